package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/internal/testkit/temporalsrv"
	"github.com/drover-run/drover/internal/testkit/testtools"
	"github.com/drover-run/drover/task"
)

// The production layout, as docker-compose.yml deploys it, run natively: Temporal's schema step,
// server and namespace step from deploy/temporal (internal/testkit/temporalsrv) on Postgres, `drover
// migrate`, and several `drover worker` processes, each a host with its own host id, HOME and CLI
// config folder, sharing the workspace.
//
// For a multi-host test:
//
//	c := newCluster(t, 2)       // an env on the shared production server, migrated, two hosts
//	a := c.start(0)             // `drover worker` as host 0 (c.hosts[0].id)
//	b := c.start(1)
//	... c.tc.Start(...), c.waitTurns(...), a.kill(), c.transcriptOf(1, session) ...
//
// newClusterOn(t, srv, n) does the same on another server.

// production is the production layout's Temporal server, shared by the package's tests that ask
// for it (setupProduction) and stopped by TestMain.
var production struct {
	once sync.Once
	err  error
	srv  *temporalsrv.Server
	log  lockedBuffer
}

// productionConfig is the configuration of a production-layout Temporal server on fresh
// databases, or a skip when the pinned tools are absent.
func productionConfig(tb testing.TB) temporalsrv.Config {
	tb.Helper()
	srv, err := testtools.TemporalServerTools()
	if err != nil {
		tb.Skipf("the Temporal server is not installed (%v): run scripts/tools.sh", err)
	}
	cli, err := testtools.TemporalBin()
	if err != nil {
		tb.Skipf("the temporal CLI is not installed (%v): run scripts/tools.sh", err)
	}
	return temporalsrv.Config{Server: srv, CLI: cli, AdminURL: pgtest.AdminURL()}
}

// setupProduction starts the shared production-layout server once, and builds drover.
func setupProduction(tb testing.TB) *temporalsrv.Server {
	tb.Helper()
	setupBinaries(tb)
	cfg := productionConfig(tb)
	production.once.Do(func() {
		cfg.Log = &production.log
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		production.srv, production.err = temporalsrv.Start(ctx, cfg)
	})
	if production.err != nil {
		tb.Fatalf("%v\nserver log:\n%s", production.err, production.log.String())
	}
	return production.srv
}

func stopProduction() {
	if production.srv != nil {
		_ = production.srv.Stop()
	}
}

// host is one machine of a multi-host test: its own identity, HOME and CLI config folder. The
// workspace is the world's, shared by every host.
type host struct {
	id        string
	home      string
	configDir string
}

// cluster is an env whose workers are hosts of their own on a production-layout server.
type cluster struct {
	*env
	temporal *temporalsrv.Server
	hosts    []host
}

// newCluster makes a cluster of n hosts on the shared production-layout server, with its database
// migrated by `drover migrate`. No worker runs until start.
func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	return newClusterOn(t, setupProduction(t), n)
}

// newClusterOn makes a cluster of n hosts on srv.
func newClusterOn(t *testing.T, srv *temporalsrv.Server, n int) *cluster {
	t.Helper()
	c := &cluster{env: newEnvOn(t, srv.Address(), srv.Namespace()), temporal: srv}
	root := t.TempDir()
	for i := range n {
		h := host{
			id:        fmt.Sprintf("host-%d-%s", i+1, c.queue),
			home:      filepath.Join(root, fmt.Sprintf("host-%d", i+1), "home"),
			configDir: filepath.Join(root, fmt.Sprintf("host-%d", i+1), "claude"),
		}
		for _, d := range []string{h.home, h.configDir} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		c.hosts = append(c.hosts, h)
	}
	c.migrate()
	return c
}

// migrate runs `drover migrate` on the cluster's database, as the compose file's migrate job does.
func (c *cluster) migrate() {
	c.t.Helper()
	cmd := exec.CommandContext(c.ctx, suite.drover, "migrate")
	cmd.Env = c.workerEnv("migrate", "info")
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("drover migrate: %v\n%s", err, out)
	}
}

// hostEnv is the whole environment of `drover worker` as host i.
func (c *cluster) hostEnv(i int) []string {
	h := c.hosts[i]
	env := c.workerEnv(h.id, "debug")
	for j, kv := range env {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "HOME":
			env[j] = "HOME=" + h.home
		case "DROVER_CLAUDE_CONFIG_DIR":
			env[j] = "DROVER_CLAUDE_CONFIG_DIR=" + h.configDir
		}
	}
	return env
}

// start runs `drover worker` as host i, stopped when the test ends.
func (c *cluster) start(i int, extraArgs ...string) *workerProc {
	c.t.Helper()
	cmd := exec.Command(suite.drover, append([]string{"worker", "--keep-alive", "2m"}, extraArgs...)...)
	cmd.Env = c.hostEnv(i)
	return launchWorker(c.t, c.t, c.hosts[i].id, cmd)
}

// hostOfQueue is the index of the host whose turn queue is q, or -1.
func (c *cluster) hostOfQueue(q string) int {
	for i, h := range c.hosts {
		if q == task.HostQueue(h.id) {
			return i
		}
	}
	return -1
}

// transcriptOf reads the session's transcript from host i's CLI config folder.
func (c *cluster) transcriptOf(i int, sessionID string) []map[string]any {
	c.t.Helper()
	return transcriptIn(c.t, c.hosts[i].configDir, sessionID)
}

// Package temporalsrv runs Temporal the way docker-compose.yml deploys it, natively, for tests: the
// schema step (deploy/temporal/setup-schema.sh with the release's temporal-sql-tool) on a fresh
// pair of Postgres databases, the server (the pinned go.temporal.io/server build, configured by
// deploy/temporal/server.yaml with Postgres persistence) on free loopback ports, and the namespace
// step (deploy/temporal/create-namespace.sh with the Temporal CLI). Stop ends the server's process
// group and drops the databases it created.
package temporalsrv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/drover-run/drover/deploy"
	"github.com/drover-run/drover/internal/tools"
	"github.com/drover-run/drover/workflows"
)

// Config describes one server.
type Config struct {
	// Server is the installed release (tools.TemporalServerTools). Required.
	Server tools.TemporalServer
	// CLI is the Temporal CLI, which runs the namespace step. Required.
	CLI string
	// AdminURL reaches Postgres as a user allowed to create databases (a postgres:// URL or a
	// key=value list). Required.
	AdminURL string
	// Database names the persistence database; the visibility database is Database+"_visibility".
	// Empty means temporal_test_<random>, new databases that Stop drops. Naming databases that
	// exist (a server started before on them) brings them up to date and keeps them.
	Database string
	// Namespace is registered with drover's search attributes. Defaults to "default".
	Namespace string
	// IP is the loopback address the services listen on. Defaults to 127.0.0.1.
	IP string
	// Log receives the output of the server and of the schema and namespace steps. Nil discards it.
	Log io.Writer
	// LogLevel is the server's log level. Defaults to "warn".
	LogLevel string
	// Logger reports lifecycle events. Nil means silent.
	Logger *slog.Logger
	// StartTimeout bounds each step. Defaults to 2 minutes.
	StartTimeout time.Duration
}

// Server is a running Temporal server on Postgres.
type Server struct {
	cfg      Config
	dir      string // the deploy files, the tools' links and the CLI's home
	env      []string
	ports    ports
	ownsDBs  bool
	stopOnce sync.Once

	// The server process: cmd is nil before it starts; done closes when it has exited and its
	// group has been killed.
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// ports are the services' listening ports, as server.yaml's variables name them.
type ports struct {
	frontend, http, frontendRing, history, historyRing, matching, matchingRing, worker, workerRing int
}

func (p ports) env() []string {
	pairs := []struct {
		key  string
		port int
	}{
		{"FRONTEND_GRPC_PORT", p.frontend}, {"FRONTEND_HTTP_PORT", p.http}, {"FRONTEND_MEMBERSHIP_PORT", p.frontendRing},
		{"HISTORY_GRPC_PORT", p.history}, {"HISTORY_MEMBERSHIP_PORT", p.historyRing},
		{"MATCHING_GRPC_PORT", p.matching}, {"MATCHING_MEMBERSHIP_PORT", p.matchingRing},
		{"WORKER_GRPC_PORT", p.worker}, {"WORKER_MEMBERSHIP_PORT", p.workerRing},
	}
	out := make([]string, len(pairs))
	for i, kv := range pairs {
		out[i] = kv.key + "=" + strconv.Itoa(kv.port)
	}
	return out
}

func (c *Config) withDefaults() error {
	if c.Server.Bin == "" || c.Server.SQLTool == "" || c.Server.SchemaDir == "" {
		return errors.New("the Temporal server release is required (tools.TemporalServerTools; run scripts/tools.sh)")
	}
	if c.CLI == "" {
		return errors.New("the Temporal CLI is required (tools.TemporalBin; run scripts/tools.sh)")
	}
	if c.AdminURL == "" {
		return errors.New("a Postgres admin URL is required")
	}
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	if c.IP == "" {
		c.IP = "127.0.0.1"
	}
	if c.LogLevel == "" {
		c.LogLevel = "warn"
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 2 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}

// Start sets up the databases, starts the server and registers the namespace; it returns once the
// frontend serves the namespace with every search attribute drover upserts.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, fmt.Errorf("temporalsrv: %w", err)
	}
	s := &Server{cfg: cfg}
	if s.cfg.Database == "" {
		s.cfg.Database = "temporal_test_" + randomHex(6)
		s.ownsDBs = true
	}
	ok := false
	defer func() {
		if !ok {
			s.cleanup()
		}
	}()
	if err := s.prepare(); err != nil {
		return nil, err
	}
	if err := s.run(ctx, "schema", "setup-schema.sh"); err != nil {
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	if err := s.run(ctx, "namespace", "create-namespace.sh"); err != nil {
		return nil, err
	}
	if err := s.waitNamespace(ctx); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// prepare writes the deploy files and links the tools the scripts call by name, and builds the
// environment every step shares: the variables server.yaml and the scripts read.
func (s *Server) prepare() error {
	dir, err := os.MkdirTemp("", "drover-temporal-")
	if err != nil {
		return fmt.Errorf("temporalsrv: %w", err)
	}
	s.dir = dir
	if err := os.CopyFS(filepath.Join(dir, "deploy"), deploy.Temporal); err != nil {
		return fmt.Errorf("temporalsrv: writing the deploy files: %w", err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		return fmt.Errorf("temporalsrv: %w", err)
	}
	for name, target := range map[string]string{"temporal-sql-tool": s.cfg.Server.SQLTool, "temporal": s.cfg.CLI} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			return fmt.Errorf("temporalsrv: linking %s: %w", name, err)
		}
	}

	pg, err := pgx.ParseConfig(s.cfg.AdminURL)
	if err != nil {
		return fmt.Errorf("temporalsrv: parsing the admin URL: %w", err)
	}
	if s.ports, err = freePorts(s.cfg.IP); err != nil {
		return fmt.Errorf("temporalsrv: %w", err)
	}
	s.env = append([]string{
		"PATH=" + bin + string(os.PathListSeparator) + "/usr/local/bin:/usr/bin:/bin",
		"HOME=" + dir,
		"POSTGRES_SEEDS=" + pg.Host,
		"DB_PORT=" + strconv.Itoa(int(pg.Port)),
		"POSTGRES_USER=" + pg.User,
		"POSTGRES_PWD=" + pg.Password,
		"DBNAME=" + s.cfg.Database,
		"VISIBILITY_DBNAME=" + s.VisibilityDatabase(),
		"SCHEMA_DIR=" + s.cfg.Server.SchemaDir,
		"BIND_ON_IP=" + s.cfg.IP,
		"LOG_LEVEL=" + s.cfg.LogLevel,
		"TEMPORAL_ADDRESS=" + s.Address(),
		"TEMPORAL_NAMESPACE=" + s.cfg.Namespace,
		"DYNAMIC_CONFIG_FILE=" + filepath.Join(dir, "deploy", "temporal", "dynamicconfig.yaml"),
	}, s.ports.env()...)
	return nil
}

// run runs one of the deploy scripts to its end.
func (s *Server) run(ctx context.Context, step, script string) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "/bin/sh", filepath.Join(s.dir, "deploy", "temporal", script))
	cmd.Env = s.env
	cmd.Dir = s.dir
	out := &tail{}
	cmd.Stdout, cmd.Stderr = io.MultiWriter(s.cfg.Log, out), io.MultiWriter(s.cfg.Log, out)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("temporalsrv: %s step (%s): %w\n%s", step, script, err, out.String())
	}
	s.cfg.Logger.Info("temporal "+step+" step done", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// start launches the server and waits until its frontend answers a health check.
func (s *Server) start(ctx context.Context) error {
	s.done = make(chan struct{})
	cmd := exec.Command(s.cfg.Server.Bin,
		"--root", "/", "--config", filepath.Join(s.dir, "deploy", "temporal"), "--env", "server",
		"--allow-no-auth", "start")
	cmd.Env = s.env
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = s.cfg.Log, s.cfg.Log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("temporalsrv: starting the server: %w", err)
	}
	s.cmd = cmd
	done := s.done
	go func() {
		s.err = cmd.Wait()
		// Whatever the server left in its group goes with it, before the group's id can be reused.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		close(done)
	}()
	s.cfg.Logger.Info("temporal server starting", "address", s.Address(), "pid", cmd.Process.Pid, "database", s.cfg.Database)

	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	return s.poll(ctx, "the frontend's health check", func(c client.Client) error {
		_, err := c.CheckHealth(ctx, &client.CheckHealthRequest{})
		return err
	})
}

// waitNamespace waits until the namespace has every search attribute of drover's, and the
// frontend's caches know them: a query naming them all is accepted. The namespace step stored them;
// the server's services learn of them within seconds.
func (s *Server) waitNamespace(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	query := attributesQuery(workflows.SearchAttributes())
	return s.poll(ctx, "namespace "+s.cfg.Namespace, func(c client.Client) error {
		resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.cfg.Namespace})
		if err != nil {
			return err
		}
		for name := range workflows.SearchAttributes() {
			if _, ok := resp.GetCustomAttributes()[name]; !ok {
				return fmt.Errorf("search attribute %s not registered yet", name)
			}
		}
		_, err = c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: s.cfg.Namespace, Query: query})
		return err
	})
}

// attributesQuery is a visibility query that names every attribute of attrs, each compared with a
// value of its type.
func attributesQuery(attrs map[string]enumspb.IndexedValueType) string {
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		names = append(names, name)
	}
	slices.Sort(names)
	terms := make([]string, len(names))
	for i, name := range names {
		value := "''"
		switch attrs[name] {
		case enumspb.INDEXED_VALUE_TYPE_INT, enumspb.INDEXED_VALUE_TYPE_DOUBLE:
			value = "0"
		case enumspb.INDEXED_VALUE_TYPE_BOOL:
			value = "false"
		case enumspb.INDEXED_VALUE_TYPE_DATETIME:
			value = "'2000-01-01T00:00:00Z'"
		case enumspb.INDEXED_VALUE_TYPE_TEXT:
			// A full-text match of an empty string never answers on SQL visibility.
			value = "'drover'"
		}
		terms[i] = name + " = " + value
	}
	return strings.Join(terms, " OR ")
}

// poll calls check with a client of the server every 100ms until it succeeds, the server exits or
// ctx ends.
func (s *Server) poll(ctx context.Context, what string, check func(client.Client) error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		select {
		case <-s.done:
			return fmt.Errorf("temporalsrv: the server exited while waiting for %s: %v", what, s.err)
		case <-ctx.Done():
			return fmt.Errorf("temporalsrv: waiting for %s at %s: %w (last: %v)", what, s.Address(), ctx.Err(), last)
		case <-tick.C:
		}
		c, err := client.Dial(client.Options{HostPort: s.Address(), Namespace: s.cfg.Namespace, Logger: quiet{}})
		if err != nil {
			last = err
			continue
		}
		last = check(c)
		c.Close()
		if last == nil {
			return nil
		}
	}
}

// Address is the frontend's host:port.
func (s *Server) Address() string {
	return net.JoinHostPort(s.cfg.IP, strconv.Itoa(s.ports.frontend))
}

// Namespace is the namespace registered at start.
func (s *Server) Namespace() string { return s.cfg.Namespace }

// Database is the name of the persistence database.
func (s *Server) Database() string { return s.cfg.Database }

// VisibilityDatabase is the name of the visibility database.
func (s *Server) VisibilityDatabase() string { return s.cfg.Database + "_visibility" }

// DatabaseURL is the admin URL naming database db (Database or VisibilityDatabase), to look at what
// the server stored.
func (s *Server) DatabaseURL(db string) (string, error) {
	return withDatabase(s.cfg.AdminURL, db)
}

// Done is closed when the server process has exited (the process Start or the last Restart
// launched).
func (s *Server) Done() <-chan struct{} { return s.done }

// Stop ends the server (SIGTERM to its process group, SIGKILL after 10s), drops the databases
// Start created, and removes its files.
func (s *Server) Stop() error {
	var err error
	s.stopOnce.Do(func() {
		s.signal(syscall.SIGTERM, 10*time.Second)
		err = s.cleanup()
		s.cfg.Logger.Info("temporal server stopped", "address", s.Address())
	})
	return err
}

// Kill ends the server at once with SIGKILL, as a crash would, and keeps its databases: Restart
// brings it back on them.
func (s *Server) Kill() {
	s.signal(syscall.SIGKILL, 0)
}

// Restart stops the server if it runs (SIGTERM, then SIGKILL after 10s) and starts it again on the
// same databases and ports, returning once its frontend is healthy.
func (s *Server) Restart(ctx context.Context) error {
	s.signal(syscall.SIGTERM, 10*time.Second)
	return s.start(ctx)
}

// signal sends sig to the server's process group and waits until the server has exited, sending
// SIGKILL after grace. It does nothing when the server is not running.
func (s *Server) signal(sig syscall.Signal, grace time.Duration) {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	pgid := s.cmd.Process.Pid
	_ = syscall.Kill(-pgid, sig)
	if sig != syscall.SIGKILL {
		select {
		case <-s.done:
			return
		case <-time.After(grace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	<-s.done
}

// cleanup ends the server if it runs, drops the databases Start created and removes the files.
func (s *Server) cleanup() error {
	s.signal(syscall.SIGKILL, 0)
	var errs []error
	if s.ownsDBs {
		errs = append(errs, dropDatabases(s.cfg.AdminURL, s.cfg.Database, s.VisibilityDatabase()))
	}
	if s.dir != "" {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}

func dropDatabases(admin string, names ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("temporalsrv: dropping the databases: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, name := range names {
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("temporalsrv: dropping database %s: %w", name, err)
		}
	}
	return nil
}

// withDatabase returns dsn (a URL or key=value list) naming database name instead.
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parsing the admin URL: %w", err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	return dsn + " dbname=" + name, nil // a later key wins
}

// freePorts finds the nine ports, all free at once. They lie below 32768: the server records its
// services' ports in a smallint column (cluster_membership.rpc_port), and the kernel hands out
// ports from 32768 up for outgoing connections, so none of these is taken by one later.
func freePorts(ip string) (ports, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ps []int
	for try := 0; len(ps) < 9; try++ {
		if try == 1000 {
			return ports{}, fmt.Errorf("finding free ports below %d on %s: %d found", maxPort, ip, len(ps))
		}
		p := minPort + mrand.IntN(maxPort-minPort)
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ps = append(ps, p)
	}
	return ports{ps[0], ps[1], ps[2], ps[3], ps[4], ps[5], ps[6], ps[7], ps[8]}, nil
}

// The range freePorts picks from.
const (
	minPort = 10000
	maxPort = 32768
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tail keeps the last 8 KiB written to it, for an error message.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 8<<10 {
		t.b = t.b[len(t.b)-8<<10:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// quiet keeps the SDK silent while the server comes up.
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}

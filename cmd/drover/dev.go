package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/devserver"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/telemetry"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/worker"
	"github.com/drover-run/drover/workflows"
	"github.com/drover-run/drover/workspace"
)

// stack is what dev and demo run in one process: a Temporal dev server
// (unless an address is given), optionally the fake Messages API, and one or
// more workers, each a host of its own.
type stack struct {
	temporal *devserver.Server
	fake     *offlinemodel.Server
	// worker and cfg are the first host's.
	worker *worker.Worker
	cfg    worker.Config
	// hosts are every host, the first included.
	hosts []devHost
}

// devHost is one worker host of the stack.
type devHost struct {
	worker *worker.Worker
	cfg    worker.Config
}

type stackOptions struct {
	stateDir        string // temporal.db and the CLI's config live here
	temporalAddress string // use this server instead of starting one
	port, uiPort    int
	headless        bool
	fakeAPI         bool
	fakeResponder   func(*offlinemodel.Request) (offlinemodel.Response, bool)
	hostID          string
	keepAlive       time.Duration
	// workspaces and retention override the managed workspaces' configuration, field by field;
	// what they leave empty defaults to the environment's, then to folders under stateDir.
	workspaces workspace.Config
	retention  time.Duration
	// workers is how many hosts run (0 means 1). With more than one, host i (from 1) is
	// <hostID>-i with the CLI config folder <config folder>-<hostID>-i, and all share the
	// workspace root, as separate machines with shared workspace storage would.
	workers int
}

// hostConfigs returns the configuration of each of n hosts made from cfg.
func hostConfigs(cfg worker.Config, n int) []worker.Config {
	if n <= 1 {
		return []worker.Config{cfg}
	}
	base := cfg.HostID
	if base == "" {
		base = devHostID
	}
	out := make([]worker.Config, n)
	for i := range out {
		c := cfg
		c.HostID = fmt.Sprintf("%s-%d", base, i+1)
		c.Claude.ConfigDir = cfg.Claude.ConfigDir + "-" + c.HostID
		out[i] = c
	}
	return out
}

// devWorkspaces is c with the fields flags set replaced.
func devWorkspaces(c, flags workspace.Config) workspace.Config {
	for _, f := range []struct{ to, from *string }{{&c.Root, &flags.Root}, {&c.StateDir, &flags.StateDir}, {&c.Remote, &flags.Remote}} {
		if *f.from != "" {
			*f.to = *f.from
		}
	}
	return c
}

func startStack(ctx context.Context, e env, o stackOptions, log *slog.Logger) (*stack, error) {
	s := &stack{}
	ok := false
	defer func() {
		if !ok {
			s.stop(ctx)
		}
	}()
	if err := os.MkdirAll(o.stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the state folder: %w", err)
	}
	cfg := e.workerConfig()
	if o.hostID != "" {
		cfg.HostID = o.hostID
	}
	cfg.KeepAlive = o.keepAlive
	cfg.Logger = log
	if cfg.Claude.Bin == "" {
		return nil, fmt.Errorf("no claude binary: run scripts/tools.sh (or make tools), or set DROVER_CLAUDE_BIN")
	}
	if e.claudeConfigDir == "" {
		cfg.Claude.ConfigDir = filepath.Join(o.stateDir, "claude")
	}
	ws, err := absWorkspaces(devWorkspaces(e.workspaceConfig(o.stateDir), o.workspaces))
	if err != nil {
		return nil, err
	}
	cfg.Workspaces = ws
	cfg.WorkspaceRetention = o.retention
	cfg.Claude.Env = append(cfg.Claude.Env, claudecode.OfflineEnv()...)

	if o.temporalAddress == "" {
		if e.temporalBin == "" {
			return nil, e.temporalBinErr
		}
		srv, err := devserver.Start(ctx, devserver.Config{
			Bin: e.temporalBin, Port: o.port, UIPort: o.uiPort, Headless: o.headless,
			DBFile:           filepath.Join(o.stateDir, "temporal.db"),
			Namespace:        e.namespace,
			SearchAttributes: devserver.SearchAttributeFlags(workflows.SearchAttributes()),
			Logger:           log,
		})
		if err != nil {
			return nil, err
		}
		s.temporal = srv
		cfg.TemporalAddress = srv.Address()
	} else {
		cfg.TemporalAddress = o.temporalAddress
	}

	if o.fakeAPI {
		fake, err := offlinemodel.Start(offlinemodel.Config{Responder: o.fakeResponder})
		if err != nil {
			return nil, fmt.Errorf("starting the fake Messages API: %w", err)
		}
		s.fake = fake
		cfg.Claude.BaseURL = fake.URL()
		cfg.Claude.APIKey = "sk-ant-offline-fake"
		cfg.Claude.Env = append(cfg.Claude.Env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	}

	if err := store.EnsureDatabase(ctx, cfg.DatabaseURL); err != nil {
		return nil, err
	}
	for i, hc := range hostConfigs(cfg, o.workers) {
		w, err := worker.Start(ctx, hc)
		if err != nil {
			return nil, err
		}
		s.hosts = append(s.hosts, devHost{worker: w, cfg: hc})
		if i == 0 {
			s.worker, s.cfg = w, hc
		}
	}
	ok = true
	return s, nil
}

func (s *stack) stop(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	// The hosts stop together, as machines shutting down at once would.
	var wg sync.WaitGroup
	for _, h := range s.hosts {
		wg.Go(func() { h.worker.Stop(ctx) })
	}
	wg.Wait()
	if s.fake != nil {
		_ = s.fake.Close()
	}
	if s.temporal != nil {
		_ = s.temporal.Stop()
	}
}

func newDevCommand(a *app) *cobra.Command {
	var o struct {
		state, addr, hostID string
		port, uiPort        int
		workers             int
		fake                bool
		listen              string
		workspaces          workspace.Config
		retention           time.Duration
	}
	c := &cobra.Command{
		Use:   "dev",
		Short: "Run a Temporal dev server, migrations and a worker, until Ctrl-C",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			hostID := o.hostID
			if a.env.hostID != "" && !c.Flags().Changed("host-id") {
				hostID = a.env.hostID
			}
			if o.workers < 1 || o.workers > maxDevWorkers {
				return fmt.Errorf("--workers %d: run between 1 and %d workers", o.workers, maxDevWorkers)
			}
			return runDev(c.Context(), a, stackOptions{
				stateDir: o.state, temporalAddress: o.addr, port: o.port, uiPort: o.uiPort,
				fakeAPI: o.fake, fakeResponder: offlineModel, hostID: hostID, workers: o.workers,
				workspaces: o.workspaces, retention: o.retention,
			}, o.listen)
		},
	}
	f := c.Flags()
	f.StringVar(&o.state, "state", ".drover", "folder for the dev server's database and the CLI's sessions")
	f.StringVar(&o.addr, "temporal-address", "", "use this Temporal server instead of starting the dev server")
	f.IntVar(&o.port, "port", worker.DefaultTemporalPort, "dev server gRPC port")
	f.IntVar(&o.uiPort, "ui-port", 8233, "dev server web UI port")
	f.BoolVar(&o.fake, "fake-api", a.env.apiKey == "" && a.env.baseURL == "",
		"answer the CLI from drover's offline fake Messages API (default when ANTHROPIC_API_KEY is unset)")
	f.StringVar(&o.hostID, "host-id", devHostID, "this worker host's stable identity (DROVER_HOST_ID wins over the default)")
	f.StringVar(&o.listen, "listen", api.DefaultListen, "address of the HTTP API and the console (empty: none); beyond loopback, tokens are required")
	addWorkspaceFlags(f, &o.workspaces, &o.retention)
	f.IntVar(&o.workers, "workers", 1, "worker hosts to run, to try several hosts: with 2, hosts <host-id>-1 and <host-id>-2, "+
		"each with its own CLI config folder, sharing the workspaces")
	return c
}

// devHostID is the host id of drover dev's worker, and the stem of its hosts' ids with --workers.
const devHostID = "dev"

// maxDevWorkers bounds --workers: each host is a full worker in this process.
const maxDevWorkers = 8

// runDev runs the dev stack, and the HTTP API on listen unless it is empty, until ctx ends.
func runDev(ctx context.Context, a *app, o stackOptions, listen string) error {
	e, log, stdout := a.env, a.log, a.stdout
	tel, err := telemetry.Setup(ctx, telemetry.Config{Service: "drover-dev", Version: version,
		Traces: a.env.otlpTraces, Metrics: a.env.otlpMetrics, Logger: log})
	if err != nil {
		return err
	}
	defer tel.Shutdown(context.WithoutCancel(ctx))
	stateDir, err := filepath.Abs(o.stateDir)
	if err != nil {
		return err
	}
	o.stateDir = stateDir
	s, err := startStack(ctx, e, o, log)
	if err != nil {
		return err
	}
	defer s.stop(ctx)
	var srv *apiServer
	if listen != "" {
		actx, stopAPI := context.WithCancel(ctx)
		defer stopAPI()
		o := apiOptions{listen: listen, temporalAddress: s.cfg.TemporalAddress, databaseURL: s.cfg.DatabaseURL,
			view: devView(s.cfg.Workspaces)}
		if s.temporal != nil {
			o.temporalUI = s.temporal.UIAddress()
		}
		if srv, err = startAPI(actx, a, o); err != nil {
			return err
		}
		defer func() { stopAPI(); _ = srv.wait() }()
	}

	fmt.Fprintf(stdout, "\ndrover dev is running (Ctrl-C stops it)\n")
	if srv != nil {
		fmt.Fprintf(stdout, "  api          %s/api/v1 (console %s/)\n", srv.url, srv.url)
	}
	fmt.Fprintf(stdout, "  temporal     %s\n", s.cfg.TemporalAddress)
	if s.temporal != nil && s.temporal.UIAddress() != "" {
		fmt.Fprintf(stdout, "  temporal ui  %s\n", s.temporal.UIAddress())
	}
	fmt.Fprintf(stdout, "  postgres     %s\n", redactURL(s.cfg.DatabaseURL))
	fmt.Fprintf(stdout, "  claude       %s\n", s.cfg.Claude.Bin)
	if len(s.hosts) == 1 {
		fmt.Fprintf(stdout, "  sessions     %s\n", s.cfg.Claude.ConfigDir)
		fmt.Fprintf(stdout, "  host queue   %s\n", s.worker.HostQueue())
	} else {
		for _, h := range s.hosts {
			fmt.Fprintf(stdout, "  host         %s: queue %s, sessions %s\n", h.cfg.HostID, h.worker.HostQueue(), h.cfg.Claude.ConfigDir)
		}
	}
	if s.fake != nil {
		fmt.Fprintf(stdout, "  model API    %s (offline fake: it echoes a prompt; \"run COMMAND\" makes it call Bash)\n", s.fake.URL())
	}
	if srv != nil {
		fmt.Fprintf(stdout, "\nOpen %s/ and press \"New task\": in mode supervised, the prompt \"run ls\" asks you\nto approve the command. Or, in another terminal:\n", srv.url)
	} else {
		fmt.Fprintf(stdout, "\nIn another terminal:\n")
	}
	if s.cfg.TemporalAddress != worker.DefaultTemporalAddress {
		fmt.Fprintf(stdout, "  export TEMPORAL_ADDRESS=%s\n", s.cfg.TemporalAddress)
	}
	fmt.Fprintf(stdout, "  go run ./cmd/drover task start --id hello --workspace . \"Say hello\"\n")
	fmt.Fprintf(stdout, "  go run ./cmd/drover task watch hello\n\n")

	select {
	case <-ctx.Done():
	case <-devDone(s):
		return fmt.Errorf("the temporal dev server exited")
	}
	return nil
}

func devDone(s *stack) <-chan struct{} {
	if s.temporal == nil {
		return nil
	}
	return s.temporal.Done()
}

// redactURL hides a password in a database URL.
func redactURL(u string) string {
	if at := strings.LastIndex(u, "@"); at > 0 {
		if scheme := strings.Index(u, "://"); scheme > 0 && scheme < at {
			userinfo := u[scheme+3 : at]
			if user, _, ok := strings.Cut(userinfo, ":"); ok {
				return u[:scheme+3] + user + ":***" + u[at:]
			}
		}
	}
	return u
}

// devView reads the checkpoints the dev stack's hosts push, for the API's diffs.
func devView(c workspace.Config) *workspaceViewOptions {
	if c.Remote == "" && c.StateDir != "" {
		c.Remote = workspace.DefaultRemote(c.StateDir)
	}
	return &workspaceViewOptions{remote: c.Remote}
}

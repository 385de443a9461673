// Package worker is drover's composition root: it connects to Postgres and
// Temporal, applies migrations, and runs the four Temporal workers of one host —
// one on the shared queue (task workflows and host assignment), one on the
// host's own queue (the turns of the tasks whose sessions live here), one on its
// warm queue (the next turns of the tasks whose previous turn ran here) and one on
// its control queue (the calls that interrupt, cancel or stop them).
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/drover-run/drover/activities"
	"github.com/drover-run/drover/archive"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/workflows"
	"github.com/drover-run/drover/workspace"
)

// The defaults of the Temporal connection, written here alone: the command line's environment,
// its help and the dev server's port refer to these names.
const (
	// DefaultTemporalPort is the port of DefaultTemporalAddress, where `drover dev` runs its
	// Temporal dev server.
	DefaultTemporalPort = 7233
	// DefaultNamespace is the Temporal namespace when none is named (task.DefaultNamespace).
	DefaultNamespace = task.DefaultNamespace
)

// DefaultTemporalAddress is the Temporal frontend when none is named.
var DefaultTemporalAddress = net.JoinHostPort("127.0.0.1", strconv.Itoa(DefaultTemporalPort))

// Config configures a worker host. Its engine.Config is what the turn engine needs (the CLI,
// workspaces, the pool of processes, the account's limits, the default budget…); the worker fills
// in its database and notifier, and gives it the host's logger. HostID defaults to the host
// name, MaxConcurrentTurns to DefaultMaxConcurrentTurns; the engine's other fields take the
// engine's defaults.
type Config struct {
	engine.Config
	// TemporalAddress is the Temporal frontend. Defaults to DefaultTemporalAddress.
	TemporalAddress string
	// Namespace defaults to DefaultNamespace.
	Namespace string
	// TaskQueue is the shared queue. Defaults to task.SharedQueue.
	TaskQueue string
	// DatabaseURL is drover's Postgres. Required.
	DatabaseURL string
	// RegisterSearchAttributes adds drover's search attributes to the namespace
	// when they are missing (needs operator rights). Defaults to true.
	RegisterSearchAttributes *bool
	// DrainTimeout is how long a stopping worker lets its running turns finish before it stops
	// them (they then continue on another host from their committed point). Zero means
	// DefaultDrainTimeout.
	DrainTimeout time.Duration
	// HostBeat and HostStale time host liveness (see DefaultHostBeat). Zero means the default.
	HostBeat  time.Duration
	HostStale time.Duration
	// MetricsListen, when set, is the address of the Prometheus scrape endpoint (GET
	// /metrics), which MetricsHandler serves. The command line's default is
	// DefaultMetricsListen. Beyond loopback it requires MetricsToken: without one the worker
	// does not start. An address it cannot listen on is logged, and the worker runs without it.
	MetricsListen string
	// MetricsToken, when set, is the bearer token a scraper must present.
	MetricsToken string
	// MetricsHandler serves the scrape (see internal/telemetry). Required with MetricsListen.
	MetricsHandler http.Handler
	// PprofListen, when set, is the address of Go's profiling endpoint (PprofPath). Beyond
	// loopback it requires MetricsToken, as the metrics endpoint does. Empty: none.
	PprofListen string
	// ArchiveDir, when set, runs the archive job on this host: finished tasks past their
	// retention are written there (one file each) and deleted from Postgres. Empty: the job
	// does not run here, and finished tasks stay.
	ArchiveDir string
	// Retention is the archive job's retention for tasks that set none (task.Params.Retention).
	// Zero means task.DefaultRetention.
	Retention time.Duration
	// ArchiveInterval is the time between the job's passes. Zero means archive.DefaultInterval.
	ArchiveInterval time.Duration
	// Workspaces configures the host's managed workspaces (see package workspace): the worktree
	// root, the state folder (mirrors, the default remote) and the durable remote. With no Root
	// the host manages none and refuses managed tasks; a Manager already set in
	// Config.Workspaces wins.
	Workspaces workspace.Config
	// WorkspaceRetention is how long a task's checkpoints are kept after its newest one; the
	// host prunes older ones every WorkspacePruneEvery. Zero means DefaultWorkspaceRetention.
	WorkspaceRetention time.Duration
}

// DefaultWorkspaceRetention is Config.WorkspaceRetention when it is zero.
const DefaultWorkspaceRetention = 30 * 24 * time.Hour

// WorkspacePruneEvery is how often a host prunes the checkpoints past their retention.
const WorkspacePruneEvery = time.Hour

func (c *Config) withDefaults() {
	if c.TemporalAddress == "" {
		c.TemporalAddress = DefaultTemporalAddress
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.TaskQueue == "" {
		c.TaskQueue = task.SharedQueue
	}
	if c.HostID == "" {
		if h, err := os.Hostname(); err == nil {
			c.HostID = h
		}
	}
	if c.MaxConcurrentTurns <= 0 {
		c.MaxConcurrentTurns = DefaultMaxConcurrentTurns
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.HostBeat <= 0 {
		c.HostBeat = DefaultHostBeat
	}
	if c.HostStale <= 0 {
		c.HostStale = DefaultHostStale
	}
	if c.WorkspaceRetention <= 0 {
		c.WorkspaceRetention = DefaultWorkspaceRetention
	}
	if c.RegisterSearchAttributes == nil {
		t := true
		c.RegisterSearchAttributes = &t
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func (c *Config) validate() error {
	switch {
	case c.DatabaseURL == "":
		return errors.New("worker: a database URL is required (DROVER_DATABASE_URL)")
	case c.HostID == "":
		return errors.New("worker: a host id is required (DROVER_HOST_ID)")
	case c.MetricsListen != "" && c.MetricsHandler == nil:
		return errors.New("worker: a metrics endpoint needs a handler")
	case c.MetricsListen != "":
		if err := checkMetricsListen(c.MetricsListen, c.MetricsToken); err != nil {
			return err
		}
	}
	if c.PprofListen != "" {
		if err := checkPprofListen(c.PprofListen, c.MetricsToken); err != nil {
			return err
		}
	}
	if err := (task.Params{Workspace: "/", Budget: c.DefaultBudget}).Validate(); err != nil {
		return fmt.Errorf("worker: the default budget: %w", err)
	}
	return nil
}

// controlSlots bounds the control calls a host runs at once. Each is short (it signals a turn or
// a CLI process and returns), so a few serve any number of turns.
const controlSlots = 16

// DefaultMaxConcurrentTurns is Config.MaxConcurrentTurns when it is zero.
const DefaultMaxConcurrentTurns = 32

// Worker is a running worker host.
type Worker struct {
	cfg    Config
	log    *slog.Logger
	pool   *pgxpool.Pool
	client client.Client
	engine *engine.Engine
	acts   *activities.Activities
	shared sdkworker.Worker
	// host runs this host's turns, warm the next turns of its tasks (task.WarmQueue); control
	// its control calls (task.ControlQueue).
	host, warm, control sdkworker.Worker
	// stopBeat ends the host's liveness loop; beatDone closes when it has.
	stopBeat context.CancelFunc
	beatDone chan struct{}
	// stopArchive ends the archive job (or, without a folder, the partition maker); archiveDone
	// closes when it has.
	stopArchive context.CancelFunc
	archiveDone chan struct{}
	// stopPrune ends the pruning of old checkpoints (see prunes); nil without workspaces.
	stopPrune func()
	metrics   *endpoint
	pprof     *endpoint
}

// Start connects, migrates, kills what CLI processes a previous run of this host left behind,
// reports the attempts that run was running as failed (so they are retried at once), and starts
// polling. It returns once its three workers poll.
func Start(ctx context.Context, cfg Config) (*Worker, error) {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, log: cfg.Logger.With("host_id", cfg.HostID)}
	ok := false
	defer func() {
		if !ok {
			w.close()
		}
	}()
	for _, step := range []func(context.Context) error{w.connect, w.recoverHost, w.newEngine, w.startWorkers} {
		if err := step(ctx); err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
	}
	w.startBeat(ctx)
	if err := w.startArchive(ctx); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	if cfg.MetricsListen != "" {
		w.metrics = serveMetrics(cfg.MetricsListen, cfg.MetricsToken, cfg.MetricsHandler, w.log)
	}
	if cfg.PprofListen != "" {
		w.pprof = servePprof(cfg.PprofListen, cfg.MetricsToken, w.log)
	}
	ok = true
	w.log.Info("drover worker started", "temporal", cfg.TemporalAddress, "namespace", cfg.Namespace,
		"shared_queue", cfg.TaskQueue, "host_queue", w.acts.HostQueue())
	return w, nil
}

// connect opens the Postgres pool, migrates, stops what CLI processes a previous run of this
// host left behind, and connects to Temporal, registering the search attributes.
func (w *Worker) connect(ctx context.Context) error {
	pool, err := store.Connect(ctx, w.cfg.DatabaseURL)
	if err != nil {
		return err
	}
	w.pool = pool
	if _, err := store.Migrate(ctx, pool, w.log); err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	reapLeftovers(w.cfg.HostID, w.log)
	if w.client, err = Dial(ctx, w.cfg.TemporalAddress, w.cfg.Namespace, w.log); err != nil {
		return err
	}
	if *w.cfg.RegisterSearchAttributes {
		if err := RegisterSearchAttributes(ctx, w.client, w.cfg.Namespace); err != nil {
			// A task upserting an attribute the namespace lacks would fail its
			// workflow task over and over: better not to start.
			return fmt.Errorf("%w; register them once with `temporal operator search-attribute create` (%s)", err, searchAttributeHint())
		}
	}
	return nil
}

// recoverHost records this host's restart and reports the attempts its previous run was running
// as failed, so that they are retried at once.
func (w *Worker) recoverHost(ctx context.Context) error {
	if err := store.RestartHost(ctx, w.pool, w.cfg.HostID, os.Getpid()); err != nil {
		return err
	}
	if err := failLostAttempts(ctx, w.pool, w.client, w.cfg.HostID, w.log); err != nil {
		w.log.Warn("recovering this host's lost attempts", "error", err)
	}
	return nil
}

// newEngine makes the turn engine from the configuration's engine part and its activities.
func (w *Worker) newEngine(ctx context.Context) error {
	ec := w.cfg.Config
	if ec.Workspaces == nil && w.cfg.Workspaces.Root != "" {
		wc := w.cfg.Workspaces
		if wc.Logger == nil {
			wc.Logger = w.log
		}
		// A host that cannot manage workspaces (no git binary, a folder it cannot write) still
		// runs unmanaged tasks; its managed ones are refused with a typed error.
		if m, err := workspace.New(ctx, wc); err != nil {
			w.log.Warn("managed workspaces unavailable on this host: tasks started with a repository are refused", "error", err)
		} else {
			ec.Workspaces = m
			w.prunes(m)
		}
	}
	ec.DB = w.pool
	ec.Notifier = activities.Notifier{Temporal: w.client}
	ec.Logger = w.log
	var err error
	if w.engine, err = engine.New(ec); err != nil {
		return err
	}
	w.acts = activities.New(w.engine, w.log, w.cfg.HostStale)
	return nil
}

// hostWorkerOptions are the options of the workers that run turns (the host's own queue and its
// warm queue), maxTurns at once, each turn's heartbeat sent every beat
// (engine.DefaultHeartbeatInterval when 0). Temporal's SDK would send a heartbeat at most every
// 0.8 of the heartbeat timeout, which leaves the server's timer 2 s of slack: on a host whose CPU
// is taken a late send times a live turn out. Sending every beat leaves it most of the timeout,
// and a worker that restarts after a crash the time to report its lost attempts (WorkerLost)
// before the timeout ends them.
func hostWorkerOptions(maxTurns int, beat time.Duration) sdkworker.Options {
	if beat <= 0 {
		beat = engine.DefaultHeartbeatInterval
	}
	return sdkworker.Options{
		MaxConcurrentActivityExecutionSize: maxTurns,
		MaxHeartbeatThrottleInterval:       beat,
		// Stop drains the turns first (see Drain); this bounds what is left.
		WorkerStopTimeout: 5 * time.Second,
	}
}

// startWorkers starts the four Temporal workers: the shared queue, the host's queue, which runs
// its turns, as many at once as its limit, the warm queue, which takes as many next turns as
// the host keeps processes (the engine runs them within the same limit: see engine.turnSlots),
// and the control queue, which runs the short calls that interrupt, cancel or stop them, so
// those never wait behind turns.
func (w *Worker) startWorkers(context.Context) error {
	w.shared = sdkworker.New(w.client, w.cfg.TaskQueue, sdkworker.Options{})
	workflows.Register(w.shared)
	w.acts.RegisterShared(w.shared)
	w.host = sdkworker.New(w.client, w.acts.HostQueue(), hostWorkerOptions(w.cfg.MaxConcurrentTurns, w.cfg.Config.HeartbeatInterval))
	w.acts.RegisterHost(w.host)
	w.warm = sdkworker.New(w.client, w.acts.WarmQueue(), hostWorkerOptions(w.cfg.MaxConcurrentTurns+w.engine.MaxIdle(), w.cfg.Config.HeartbeatInterval))
	w.acts.RegisterWarm(w.warm)
	w.control = sdkworker.New(w.client, w.acts.ControlQueue(), sdkworker.Options{
		MaxConcurrentActivityExecutionSize: controlSlots,
		WorkerStopTimeout:                  5 * time.Second,
	})
	w.acts.RegisterControl(w.control)
	for _, q := range []struct {
		name string
		w    sdkworker.Worker
	}{{"shared", w.shared}, {"host", w.host}, {"warm", w.warm}, {"control", w.control}} {
		if err := q.w.Start(); err != nil {
			return fmt.Errorf("starting the %s worker: %w", q.name, err)
		}
	}
	return nil
}

// startBeat starts the host's liveness loop, which outlives ctx until Stop.
func (w *Worker) startBeat(ctx context.Context) {
	beatCtx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
	w.stopBeat, w.beatDone = stopBeat, make(chan struct{})
	loop := &hostLoop{db: w.pool, temporal: w.client, hostID: w.cfg.HostID, interval: w.cfg.HostBeat,
		stale: w.cfg.HostStale, draining: w.engine.Draining, log: w.log}
	go func() {
		defer close(w.beatDone)
		loop.run(beatCtx)
	}()
}

// startArchive starts the archive job when the host has an archive folder. It runs in the
// worker rather than as a Temporal schedule: it needs Postgres and the folder, which every
// worker has, and nothing of Temporal; a schedule would add a workflow history per pass and
// still need a host with the folder. Every host may run it: one pass runs at a time.
//
// A host without a folder still makes the coming weeks' partitions of task_events, at start and
// hourly (archive.MakePartitions); the job's passes make them too.
func (w *Worker) startArchive(ctx context.Context) error {
	if w.cfg.ArchiveDir == "" {
		w.log.Info("no archive folder: finished tasks are kept (set --archive-dir to archive them after their retention)")
		partCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
		w.stopArchive, w.archiveDone = stop, make(chan struct{})
		go func() {
			defer close(w.archiveDone)
			_ = archive.MakePartitions(partCtx, w.pool, 0, w.log.With("job", "partitions"))
		}()
		return nil
	}
	job, err := archive.NewJob(w.pool, archive.JobConfig{Dir: w.cfg.ArchiveDir, Retention: w.cfg.Retention,
		Interval: w.cfg.ArchiveInterval, Logger: w.log.With("job", "archive")})
	if err != nil {
		return err
	}
	jobCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w.stopArchive, w.archiveDone = stop, make(chan struct{})
	go func() {
		defer close(w.archiveDone)
		_ = job.Run(jobCtx)
	}()
	return nil
}

// Client is the worker's Temporal client.
func (w *Worker) Client() client.Client { return w.client }

// Pool is the worker's Postgres pool.
func (w *Worker) Pool() *pgxpool.Pool { return w.pool }

// HostQueue is this host's own task queue.
func (w *Worker) HostQueue() string { return w.acts.HostQueue() }

// Stop stops taking workflow tasks, drains the host (see engine.Engine.Drain: no new turns; the
// running ones finish within Config.DrainTimeout or are stopped and continue on another host),
// stops polling, stops every CLI process of this host and closes the connections.
func (w *Worker) Stop(ctx context.Context) {
	// The shared queue first: this host takes no more workflow tasks or host assignments, so
	// the workflows of the turns it gives up move on other hosts without waiting on it.
	if w.shared != nil {
		w.shared.Stop()
	}
	if w.engine != nil {
		if n := w.engine.Drain(ctx, w.cfg.DrainTimeout); n > 0 {
			w.cfg.Logger.Warn("turns stopped at the drain timeout; they continue on another host", "turns", n)
		}
	}
	if w.stopArchive != nil {
		w.stopArchive()
		<-w.archiveDone
	}
	if w.stopBeat != nil {
		w.stopBeat()
		<-w.beatDone
		// The last word: this host takes nothing more.
		if err := store.BeatHost(context.WithoutCancel(ctx), w.pool, w.cfg.HostID, os.Getpid(), true); err != nil {
			w.cfg.Logger.Warn("recording this host stopped", "error", err)
		}
	}
	if w.host != nil {
		w.host.Stop()
	}
	if w.warm != nil {
		w.warm.Stop()
	}
	if w.control != nil {
		w.control.Stop()
	}
	if w.engine != nil {
		w.engine.Close(ctx)
	}
	w.close()
	w.cfg.Logger.Info("drover worker stopped", "host_id", w.cfg.HostID)
}

func (w *Worker) close() {
	if w.stopPrune != nil {
		w.stopPrune()
	}
	w.metrics.stop(context.Background())
	w.pprof.stop(context.Background())
	if w.client != nil {
		w.client.Close()
	}
	if w.pool != nil {
		w.pool.Close()
	}
}

// Run starts a worker and serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	w, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	// Room for the drain, then for stopping what it stopped.
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.DrainTimeout+2*time.Minute)
	defer cancel()
	w.Stop(stopCtx)
	return nil
}

// Dial connects to Temporal, retrying until ctx ends so that a worker can
// start before its server. Workflow and activity calls are traced with
// OpenTelemetry. Calls to a server on loopback go uncompressed (grpcCompression).
func Dial(ctx context.Context, address, namespace string, log *slog.Logger) (client.Client, error) {
	tracing, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating the tracing interceptor: %w", err)
	}
	opts := client.Options{
		HostPort:          address,
		Namespace:         namespace,
		Logger:            tlog.NewStructuredLogger(log),
		Interceptors:      []interceptor.ClientInterceptor{tracing},
		ConnectionOptions: client.ConnectionOptions{GrpcCompression: grpcCompression(address)},
	}
	backoff := 200 * time.Millisecond
	for {
		c, err := client.DialContext(ctx, opts)
		if err == nil {
			return c, nil
		}
		log.Warn("temporal not reachable yet", "address", address, "error", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting to temporal at %s: %w (last error: %v)", address, context.Cause(ctx), err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// grpcCompression is the compression of the calls to the Temporal server at address: none when
// the server is on loopback (an IP literal or localhost), where gzip costs both ends CPU on every
// call (a tenth of a worker's CPU per turn, and the server's) and saves no network; the SDK's
// default, gzip, anywhere else.
func grpcCompression(address string) client.GrpcCompression {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return &client.GrpcCompressionNone{}
	}
	return nil
}

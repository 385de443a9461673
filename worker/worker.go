// Package worker is drover's composition root: it connects to Postgres and
// Temporal, applies migrations, and runs the two Temporal workers of one host —
// one on the shared queue (task workflows and host assignment) and one on the
// host's own queue (the turns of the tasks whose sessions live here).
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/drover-run/drover/activities"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/metrics"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/workflows"
)

// Config configures a worker host.
type Config struct {
	// TemporalAddress is the Temporal frontend. Defaults to 127.0.0.1:7233.
	TemporalAddress string
	// Namespace defaults to "default".
	Namespace string
	// TaskQueue is the shared queue. Defaults to task.SharedQueue.
	TaskQueue string
	// HostID is this host's stable identity: its turns come back to the queue named after it,
	// and the CLI processes it starts carry it. Defaults to the host name.
	HostID string
	// DatabaseURL is drover's Postgres. Required.
	DatabaseURL string
	// Claude is how the CLI runs here. Bin is required.
	Claude engine.Claude
	// WorkspaceRoot, when set, confines task workspaces to that folder.
	WorkspaceRoot string
	// KeepAlive is how long a task's CLI waits for its next turn. Zero means
	// engine.DefaultKeepAlive; negative stops it after every turn.
	KeepAlive time.Duration
	// MaxIdle bounds the CLI processes kept between turns. Zero means engine.DefaultMaxIdle.
	MaxIdle int
	// StallTimeout stops a CLI that prints nothing for this long during a turn, and retries
	// the turn. Zero means engine.DefaultStallTimeout.
	StallTimeout time.Duration
	// MaxConcurrentTurns bounds the turns this host runs at once. Defaults to
	// DefaultMaxConcurrentTurns.
	MaxConcurrentTurns int
	// AccountMaxConcurrentTurns bounds the turns running at once on the host's account, over
	// every host sharing it (engine.Config.AccountMaxConcurrentTurns). Zero: no bound.
	AccountMaxConcurrentTurns int
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
	// DebugDir, when set, receives raw and normalized JSONL captures of every CLI run.
	DebugDir string
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
	// Metrics measures the host's turns. Defaults to metrics.Global().
	Metrics *metrics.Metrics
	// DefaultBudget bounds what the budget of a task whose turns run here leaves unset (see
	// task.Budget). Zero bounds nothing.
	DefaultBudget task.Budget
	// Logger receives drover's and the Temporal SDK's logs. Nil means silent.
	Logger *slog.Logger
}

func (c *Config) withDefaults() {
	if c.TemporalAddress == "" {
		c.TemporalAddress = "127.0.0.1:7233"
	}
	if c.Namespace == "" {
		c.Namespace = "default"
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
	pool   *pgxpool.Pool
	client client.Client
	engine *engine.Engine
	acts   *activities.Activities
	shared sdkworker.Worker
	// host runs this host's turns; control its control calls (task.ControlQueue).
	host, control sdkworker.Worker
	// stopBeat ends the host's liveness loop; beatDone closes when it has.
	stopBeat context.CancelFunc
	beatDone chan struct{}
	metrics  *metricsServer
	pprof    *pprofServer
}

// Start connects, migrates, kills what CLI processes a previous run of this host left behind,
// reports the attempts that run was running as failed (so they are retried at once), and starts
// polling. It returns once both workers poll.
func Start(ctx context.Context, cfg Config) (*Worker, error) {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("host_id", cfg.HostID)

	pool, err := store.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	w := &Worker{cfg: cfg, pool: pool}
	ok := false
	defer func() {
		if !ok {
			w.close()
		}
	}()
	if _, err := store.Migrate(ctx, pool, log); err != nil {
		return nil, fmt.Errorf("worker: migrating: %w", err)
	}
	reapLeftovers(cfg.HostID, log)

	c, err := Dial(ctx, cfg.TemporalAddress, cfg.Namespace, log)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	w.client = c
	if *cfg.RegisterSearchAttributes {
		if err := RegisterSearchAttributes(ctx, c, cfg.Namespace); err != nil {
			// A task upserting an attribute the namespace lacks would fail its
			// workflow task over and over: better not to start.
			return nil, fmt.Errorf("worker: %w; register them once with `temporal operator search-attribute create` (%s)", err, searchAttributeHint())
		}
	}

	if err := store.RestartHost(ctx, pool, cfg.HostID, os.Getpid()); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	if err := failLostAttempts(ctx, pool, c, cfg.HostID, log); err != nil {
		log.Warn("recovering this host's lost attempts", "error", err)
	}

	w.engine, err = engine.New(engine.Config{
		DB:                        pool,
		HostID:                    cfg.HostID,
		Claude:                    cfg.Claude,
		WorkspaceRoot:             cfg.WorkspaceRoot,
		KeepAlive:                 cfg.KeepAlive,
		StallTimeout:              cfg.StallTimeout,
		MaxIdle:                   cfg.MaxIdle,
		MaxConcurrentTurns:        cfg.MaxConcurrentTurns,
		AccountMaxConcurrentTurns: cfg.AccountMaxConcurrentTurns,
		DebugDir:                  cfg.DebugDir,
		Notifier:                  activities.Notifier{Temporal: c},
		Logger:                    log,
		Metrics:                   cfg.Metrics,
		DefaultBudget:             cfg.DefaultBudget,
	})
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	w.acts = activities.New(w.engine, log, cfg.HostStale)

	w.shared = sdkworker.New(c, cfg.TaskQueue, sdkworker.Options{})
	workflows.Register(w.shared)
	w.acts.RegisterShared(w.shared)

	// The host's queue runs its turns, as many at once as its limit; the control queue runs the
	// short calls that interrupt, cancel or stop them, so those never wait behind turns.
	w.host = sdkworker.New(c, w.acts.HostQueue(), sdkworker.Options{
		MaxConcurrentActivityExecutionSize: cfg.MaxConcurrentTurns,
		// Stop drains the turns first (see Drain); this bounds what is left.
		WorkerStopTimeout: 5 * time.Second,
	})
	w.acts.RegisterHost(w.host)
	w.control = sdkworker.New(c, w.acts.ControlQueue(), sdkworker.Options{
		MaxConcurrentActivityExecutionSize: controlSlots,
		WorkerStopTimeout:                  5 * time.Second,
	})
	w.acts.RegisterControl(w.control)

	if err := w.shared.Start(); err != nil {
		return nil, fmt.Errorf("worker: starting the shared worker: %w", err)
	}
	if err := w.host.Start(); err != nil {
		return nil, fmt.Errorf("worker: starting the host worker: %w", err)
	}
	if err := w.control.Start(); err != nil {
		return nil, fmt.Errorf("worker: starting the control worker: %w", err)
	}
	beatCtx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
	w.stopBeat, w.beatDone = stopBeat, make(chan struct{})
	loop := &hostLoop{db: pool, temporal: c, hostID: cfg.HostID, interval: cfg.HostBeat, stale: cfg.HostStale,
		draining: w.engine.Draining, log: log}
	go func() {
		defer close(w.beatDone)
		loop.run(beatCtx)
	}()
	if cfg.MetricsListen != "" {
		w.metrics = serveMetrics(cfg.MetricsListen, cfg.MetricsToken, cfg.MetricsHandler, log)
	}
	if cfg.PprofListen != "" {
		w.pprof = servePprof(cfg.PprofListen, cfg.MetricsToken, log)
	}
	ok = true
	log.Info("drover worker started", "temporal", cfg.TemporalAddress, "namespace", cfg.Namespace,
		"shared_queue", cfg.TaskQueue, "host_queue", w.acts.HostQueue())
	return w, nil
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
// OpenTelemetry.
func Dial(ctx context.Context, address, namespace string, log *slog.Logger) (client.Client, error) {
	tracing, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating the tracing interceptor: %w", err)
	}
	opts := client.Options{
		HostPort:     address,
		Namespace:    namespace,
		Logger:       tlog.NewStructuredLogger(log),
		Interceptors: []interceptor.ClientInterceptor{tracing},
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

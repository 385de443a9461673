package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// Claude describes how to run the Claude Code CLI on this host.
type Claude struct {
	// Bin is the path of the claude binary. Required.
	Bin string
	// ConfigDir is the CLI's CLAUDE_CONFIG_DIR, where it keeps session
	// transcripts. It must survive a worker restart for resume to work.
	// Empty leaves the CLI's own default (~/.claude).
	ConfigDir string
	// Home, when set, is the HOME the CLI runs with.
	Home string
	// BaseURL overrides the Messages API address (ANTHROPIC_BASE_URL).
	BaseURL string
	// APIKey is handed to the CLI as ANTHROPIC_API_KEY. It never appears in
	// logs, events or traces.
	APIKey string
	// Env is added to the CLI's environment (KEY=VALUE). The worker's own
	// ANTHROPIC_* and CLAUDE_* variables are not inherited unless listed here.
	Env []string
	// PartialMessages asks the CLI for stream_event deltas, so text reaches the
	// event log as it is generated rather than a block at a time.
	PartialMessages bool
}

// Config is what the activities need. Zero values take the documented defaults.
type Config struct {
	// DB is the Postgres pool. Required.
	DB store.TxDB
	// ExecutorID is this host's stable identity; turns of a task come back to
	// the queue named after it. Required.
	ExecutorID string
	// Claude is how to run the CLI. Bin is required.
	Claude Claude
	// WorkspaceRoot, when set, is the folder every task workspace must be in.
	WorkspaceRoot string
	// KeepAlive is how long a task's CLI process waits for its next turn before
	// it is stopped. Defaults to 10 minutes; negative stops it after every turn.
	KeepAlive time.Duration
	// MaxIdle bounds the CLI processes kept waiting for a next turn; beyond
	// it the longest idle are stopped (their tasks resume from Postgres).
	// Defaults to 16.
	MaxIdle int
	// HeartbeatInterval is how often a running turn heartbeats. Defaults to 2s.
	HeartbeatInterval time.Duration
	// BackgroundWait is how long a turn whose result came while subagents or
	// background shells still run waits for them (the CLI reports their end
	// in a turn of its own). Defaults to 15 minutes.
	BackgroundWait time.Duration
	// StallTimeout stops a CLI that prints nothing for this long during a
	// turn; the attempt fails and is retried. Defaults to 30 minutes (the
	// CLI's own tools time out well before).
	StallTimeout time.Duration
	// CommitRetry is how long a finished turn keeps trying to commit through
	// database failures before the attempt fails. Defaults to 2 minutes.
	CommitRetry time.Duration
	// StopTimeout bounds each step of stopping a CLI process. Defaults to 5s.
	StopTimeout time.Duration
	// DebugDir, when set and DROVER_DEBUG_AGENT_MESSAGES=true, receives raw and
	// normalized JSONL captures of every CLI run.
	DebugDir string
	// Logger receives the activities' logs. Nil means silent.
	Logger *slog.Logger
	// Tracer traces turns. Defaults to the global provider's tracer.
	Tracer trace.Tracer
}

func (c *Config) withDefaults() {
	if c.KeepAlive == 0 {
		c.KeepAlive = 10 * time.Minute
	}
	if c.MaxIdle <= 0 {
		c.MaxIdle = 16
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 2 * time.Second
	}
	if c.BackgroundWait <= 0 {
		c.BackgroundWait = 15 * time.Minute
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = 30 * time.Minute
	}
	if c.CommitRetry <= 0 {
		c.CommitRetry = 2 * time.Minute
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Tracer == nil {
		c.Tracer = otel.Tracer("github.com/drover-run/drover/activities")
	}
}

func (c *Config) validate() error {
	switch {
	case c.DB == nil:
		return errors.New("activities: a database is required")
	case c.ExecutorID == "":
		return errors.New("activities: an executor id is required")
	case c.Claude.Bin == "":
		return errors.New("activities: the claude binary is required (run scripts/tools.sh or set DROVER_CLAUDE_BIN)")
	}
	if _, err := os.Stat(c.Claude.Bin); err != nil {
		return fmt.Errorf("activities: claude binary: %w", err)
	}
	if c.WorkspaceRoot != "" && !filepath.IsAbs(c.WorkspaceRoot) {
		return fmt.Errorf("activities: the workspace root %q is not absolute", c.WorkspaceRoot)
	}
	return nil
}

// Activities holds the dependencies of drover's activities. Register it on
// two workers: the shared queue (AssignHost) and this host's queue (the rest).
type Activities struct {
	cfg   Config
	execs *registry

	// interrupts remembers interrupts that arrived for a turn not running yet
	// (still queued on this host, or between two attempts): task id → turn.
	interruptsMu sync.Mutex
	interrupts   map[string]int
}

// New checks cfg and returns the activities.
func New(cfg Config) (*Activities, error) {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Activities{cfg: cfg, execs: newRegistry(), interrupts: make(map[string]int)}, nil
}

// HostQueue is the task queue of this host.
func (a *Activities) HostQueue() string { return task.HostQueue(a.cfg.ExecutorID) }

// RegisterShared registers what runs on the shared queue.
func (a *Activities) RegisterShared(w worker.Registry) {
	w.RegisterActivityWithOptions(a.AssignHost, activity.RegisterOptions{Name: task.ActivityAssignHost})
}

// RegisterHost registers what runs on this host's own queue.
func (a *Activities) RegisterHost(w worker.Registry) {
	w.RegisterActivityWithOptions(a.RunTurn, activity.RegisterOptions{Name: task.ActivityRunTurn})
	w.RegisterActivityWithOptions(a.InterruptTurn, activity.RegisterOptions{Name: task.ActivityInterruptTurn})
	w.RegisterActivityWithOptions(a.StopExecutor, activity.RegisterOptions{Name: task.ActivityStopExecutor})
}

// AssignHost answers with this host's queue: the task's turns will run here.
func (a *Activities) AssignHost(ctx context.Context) (string, error) {
	return a.HostQueue(), nil
}

// InterruptTurn asks the CLI serving the task to interrupt its running turn.
// The running RunTurn then ends with status interrupted. It is not an error
// when no turn runs: the interrupt may have raced with the turn's end.
func (a *Activities) InterruptTurn(ctx context.Context, in task.InterruptTurnInput) error {
	ex := a.execs.get(in.TaskID)
	if ex == nil || !ex.runningTurn(in.Turn) {
		// The turn has not reached its CLI yet: it will interrupt itself as
		// soon as its prompt is sent.
		a.interruptsMu.Lock()
		a.interrupts[in.TaskID] = in.Turn
		a.interruptsMu.Unlock()
		a.cfg.Logger.Info("interrupt recorded for a turn not running yet", "task_id", in.TaskID, "turn", in.Turn)
		return nil
	}
	return ex.interrupt(ctx)
}

// takeInterrupt reports, once, whether an interrupt is recorded for the turn.
func (a *Activities) takeInterrupt(taskID string, turn int) bool {
	a.interruptsMu.Lock()
	defer a.interruptsMu.Unlock()
	t, ok := a.interrupts[taskID]
	if !ok || t < turn {
		return false
	}
	if t == turn {
		delete(a.interrupts, taskID)
	}
	return t == turn
}

// StopExecutor stops the task's CLI process on this host, if any.
func (a *Activities) StopExecutor(ctx context.Context, in task.InterruptTurnInput) error {
	ex := a.execs.remove(in.TaskID)
	if ex == nil {
		return nil
	}
	ex.stop(ctx, "task stopped")
	return nil
}

// Close stops every CLI process this host runs. Call it when the worker stops.
func (a *Activities) Close(ctx context.Context) {
	for _, ex := range a.execs.drain() {
		ex.stop(ctx, "worker shutting down")
	}
}

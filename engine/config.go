package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/drover-run/drover/metrics"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/streamjson"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/workspace"
)

// The defaults of Config. They are defined here and nowhere else: the worker's configuration,
// its command-line flags and the documentation refer to these names.
const (
	// DefaultKeepAlive is how long a task's CLI process waits for the task's next turn.
	DefaultKeepAlive = 10 * time.Minute
	// DefaultMaxIdle bounds the CLI processes kept waiting between turns.
	DefaultMaxIdle = 16
	// DefaultPauseIdle is how long a CLI process waiting for its task's next turn stays running;
	// then it is paused (SIGSTOP) until that turn, so that it burns no CPU meanwhile.
	DefaultPauseIdle = 5 * time.Second
	// DefaultHeartbeatInterval is how often a running attempt reports progress.
	DefaultHeartbeatInterval = 2 * time.Second
	// DefaultBackgroundWait is how long a turn whose result came while subagents or background
	// shells still run waits for them.
	DefaultBackgroundWait = 15 * time.Minute
	// DefaultStallTimeout stops a CLI that prints nothing for this long during a turn.
	DefaultStallTimeout = 30 * time.Minute
	// DefaultCommitRetry is how long a finished turn keeps trying to commit through database
	// failures.
	DefaultCommitRetry = 2 * time.Minute
	// DefaultTakeoverWait is how long a turn whose attempt Temporal gave up (its heartbeat timed
	// out) keeps its CLI running for the retry to take it over (see takeover.go): the retry goes
	// to the same host queue, which a host picks from within hostStartTimeout or loses the turn.
	DefaultTakeoverWait = 30 * time.Second
	// DefaultStopTimeout bounds each step of stopping a CLI process.
	DefaultStopTimeout = 5 * time.Second
	// DefaultRateLimitWait is how long an account waits after a 429 that announced no reset and
	// no retry delay.
	DefaultRateLimitWait = time.Minute
	// DefaultLimitRecheckFirst is how long an account waits, after the first look past a
	// limit's announced reset found it still held, before one turn looks again.
	DefaultLimitRecheckFirst = time.Minute
	// DefaultLimitRecheck is the longest an account waits between two looks at a limit that
	// outlasted its announced reset.
	DefaultLimitRecheck = 15 * time.Minute
	// DefaultLimitJitter spaces the tasks of an account that wake after its limit lifts: each
	// waits this much longer than the one before it.
	DefaultLimitJitter = 2 * time.Second
	// DefaultAccountPoll is how often a turn queued for its account's concurrency asks again
	// when no slot was announced free.
	DefaultAccountPoll = 10 * time.Second
	// DefaultAccountLease is how long an account's slot, or its turn that goes first after a
	// reset, is held without being renewed (its host died).
	DefaultAccountLease = 30 * time.Second
)

// Claude describes how to run the Claude Code CLI on this host.
type Claude struct {
	// Bin is the path of the claude binary. Required.
	Bin string
	// ConfigDir is the CLI's CLAUDE_CONFIG_DIR, where it keeps session transcripts. It must
	// survive a worker restart for resume to work. Empty leaves the CLI's default (~/.claude).
	ConfigDir string
	// Home, when set, is the HOME the CLI runs with.
	Home string
	// BaseURL overrides the Messages API address (ANTHROPIC_BASE_URL).
	BaseURL string
	// APIKey is handed to the CLI as ANTHROPIC_API_KEY. It never appears in arguments, logs,
	// events or traces.
	APIKey string
	// Env is the environment the CLI inherits (KEY=VALUE), normally the worker's own, as the
	// command line read it. The engine drops from it what it sets itself: ANTHROPIC_*,
	// CLAUDE_CONFIG_DIR, DROVER_*, and HOME when Home is set. Values an MCP server
	// configuration names as ${VAR} come from here.
	Env []string
	// BlockMessages runs the CLI without --include-partial-messages: text and thinking then
	// reach the event log a whole block at a time. By default they stream as they are generated
	// (the log coalesces what arrives while a write is in flight).
	BlockMessages bool
	// Guard, when set, is the command that supervises each CLI process (see claudecode.Guard):
	// the CLI runs as its child, and the whole tree the CLI started is killed when the worker
	// dies, however it dies. Typically the worker's own executable and its guard subcommand.
	Guard []string
}

// Config is what the engine needs. Zero values take the defaults above.
type Config struct {
	// DB is the Postgres pool. Required.
	DB store.TxDB
	// HostID is this worker host's stable identity. Required.
	HostID string
	// Claude is how to run the CLI. Bin is required.
	Claude Claude
	// WorkspaceRoot, when set, is the folder every unmanaged task's workspace must be in.
	WorkspaceRoot string
	// Workspaces manages the worktrees of managed tasks (those that name a repository): one per
	// task, checkpointed when a turn commits, restored when an attempt is retried. Nil: this
	// host refuses managed tasks (task.ErrTypeWorkspacesUnmanaged).
	Workspaces *workspace.Manager
	// KeepAlive is how long a task's CLI process waits for its next turn before it is stopped.
	// Defaults to DefaultKeepAlive; negative stops it after every turn.
	KeepAlive time.Duration
	// MaxIdle bounds the CLI processes kept waiting for a next turn; beyond it the longest idle
	// are stopped (their tasks resume from Postgres). Defaults to DefaultMaxIdle.
	MaxIdle int
	// PauseIdle is how long a process kept for a next turn stays running once it is idle and
	// quiet; then it is paused until its next turn (see executor.pauseIfIdle). Defaults to
	// DefaultPauseIdle; negative never pauses.
	PauseIdle time.Duration
	// MaxConcurrentTurns is the number of turns the host runs at once (its Temporal worker's
	// slots for turns). With it, the host's CLI processes, running a turn, idle or being stopped,
	// never number more than MaxConcurrentTurns + MaxIdle: a new one waits for room, and the
	// longest idle is stopped to make it. Zero bounds only the idle ones.
	MaxConcurrentTurns int
	// AccountMaxConcurrentTurns bounds the turns running at once on this host's account, over
	// every host that shares it (slots leased in Postgres); the others queue for it in order.
	// Zero: no bound.
	AccountMaxConcurrentTurns int
	// RateLimitWait is how long the account waits after a 429 that announced no reset nor
	// retry delay. Defaults to DefaultRateLimitWait.
	RateLimitWait time.Duration
	// LimitRecheckFirst and LimitRecheck bound the wait between two looks at a limit that
	// outlasted its announced reset: the first wait is LimitRecheckFirst, each next one twice
	// the one before, up to LimitRecheck. They default to DefaultLimitRecheckFirst and
	// DefaultLimitRecheck; a first wait beyond LimitRecheck is LimitRecheck.
	LimitRecheckFirst time.Duration
	LimitRecheck      time.Duration
	// LimitJitter spaces the tasks that wake when the account's limit lifts. Defaults to
	// DefaultLimitJitter.
	LimitJitter time.Duration
	// AccountPoll is how often a turn queued for its account asks again by itself. Defaults to
	// DefaultAccountPoll.
	AccountPoll time.Duration
	// AccountLease is how long a slot of the account, or the first turn after a reset, is held
	// without renewal. Defaults to DefaultAccountLease.
	AccountLease time.Duration
	// HeartbeatInterval is how often a running attempt calls Request.Heartbeat. Defaults to
	// DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// BackgroundWait is how long a turn whose result came while subagents or background shells
	// still run waits for them (the CLI reports their end in a turn of its own). Defaults to
	// DefaultBackgroundWait.
	BackgroundWait time.Duration
	// StallTimeout stops a CLI that prints nothing for this long during a turn; the attempt fails
	// with ClaudeStalled. Defaults to DefaultStallTimeout.
	StallTimeout time.Duration
	// CommitRetry is how long a finished turn keeps trying to commit through database failures
	// before the attempt fails with StoreUnavailable. Defaults to DefaultCommitRetry.
	CommitRetry time.Duration
	// StopTimeout bounds each step of stopping a CLI process. Defaults to DefaultStopTimeout.
	StopTimeout time.Duration
	// TakeoverWait is how long a turn left by an attempt that Temporal gave up keeps its CLI for
	// the retry to take over; then the CLI is stopped. Defaults to DefaultTakeoverWait.
	TakeoverWait time.Duration
	// DebugDir, when set, receives raw and normalized JSONL captures of every CLI run.
	DebugDir string
	// DefaultBudget bounds what a task's own budget leaves unset, for the turns this host runs
	// (see task.Budget). Zero bounds nothing.
	DefaultBudget task.Budget
	// Launcher starts CLI processes. Nil runs Claude.Bin.
	Launcher Launcher
	// Notifier hears about permission requests (supervised and plan modes). Nil: nobody is
	// told; decisions still reach waiting requests through Postgres.
	Notifier Notifier
	// Logger receives the engine's logs. Nil means silent.
	Logger *slog.Logger
	// Tracer traces turns. Defaults to the global provider's tracer.
	Tracer trace.Tracer
	// Metrics measures turns, approvals and processes. Defaults to metrics.Global().
	Metrics *metrics.Metrics
}

func (c *Config) withDefaults() {
	if c.KeepAlive == 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.PauseIdle == 0 {
		c.PauseIdle = DefaultPauseIdle
	}
	if c.MaxIdle <= 0 {
		c.MaxIdle = DefaultMaxIdle
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.BackgroundWait <= 0 {
		c.BackgroundWait = DefaultBackgroundWait
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.CommitRetry <= 0 {
		c.CommitRetry = DefaultCommitRetry
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.TakeoverWait <= 0 {
		c.TakeoverWait = DefaultTakeoverWait
	}
	if c.RateLimitWait <= 0 {
		c.RateLimitWait = DefaultRateLimitWait
	}
	if c.LimitRecheck <= 0 {
		c.LimitRecheck = DefaultLimitRecheck
	}
	if c.LimitRecheckFirst <= 0 {
		c.LimitRecheckFirst = DefaultLimitRecheckFirst
	}
	c.LimitRecheckFirst = min(c.LimitRecheckFirst, c.LimitRecheck)
	if c.LimitJitter <= 0 {
		c.LimitJitter = DefaultLimitJitter
	}
	if c.AccountPoll <= 0 {
		c.AccountPoll = DefaultAccountPoll
	}
	if c.AccountLease <= 0 {
		c.AccountLease = DefaultAccountLease
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Tracer == nil {
		c.Tracer = otel.Tracer("github.com/drover-run/drover/engine")
	}
	if c.Launcher == nil {
		c.Launcher = execLauncher{guard: c.Claude.Guard}
	}
	if c.Metrics == nil {
		c.Metrics = metrics.Global()
	}
}

func (c *Config) validate() error {
	switch {
	case c.DB == nil:
		return errors.New("engine: a database is required")
	case c.HostID == "":
		return errors.New("engine: a host id is required")
	case c.Claude.Bin == "":
		return errors.New("engine: the claude binary is required (run scripts/tools.sh or set DROVER_CLAUDE_BIN)")
	}
	if _, isExec := c.Launcher.(execLauncher); isExec {
		if _, err := os.Stat(c.Claude.Bin); err != nil {
			return fmt.Errorf("engine: claude binary: %w", err)
		}
	}
	if c.WorkspaceRoot != "" && !filepath.IsAbs(c.WorkspaceRoot) {
		return fmt.Errorf("engine: the workspace root %q is not absolute", c.WorkspaceRoot)
	}
	return nil
}

// secrets are the credentials the CLI is given, for redaction: the API key and the values of
// the credential variables of its environment.
func (c Claude) secrets() []string {
	out := []string{c.APIKey}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		if slices.Contains(streamjson.SecretEnv, k) {
			out = append(out, v)
		}
	}
	return out
}

package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// Engine runs the turns of the tasks this host serves. It is safe for concurrent use: turns of
// different tasks run in parallel; a task runs one turn at a time (the workflow sees to it).
type Engine struct {
	cfg       Config
	pool      *pool
	decisions *decisions

	// interrupts remembers interrupts that arrived for a turn not running yet (still queued on
	// this host, or between two attempts): task id → turn.
	interruptsMu sync.Mutex
	interrupts   map[string]int
	// interruptedBy names who asked for the interrupt of each task's turn (under interruptsMu),
	// for the turn's interrupted event; an attempt forgets its task's when it ends.
	interruptedBy map[string]interruptAsk

	// running are the attempts running on this host, by task, so that a cancelled task's turn
	// can be stopped at once.
	runningMu sync.Mutex
	running   map[string]*runningAttempt
	// draining: the host gives its turns up (see Drain).
	draining atomic.Bool
	// evicting counts the idle processes evictIdle is stopping: until they exit they hold their
	// memory, so they count against MaxIdle.
	evicting atomic.Int32
	// procSlots holds a token for every CLI process of the host, from its start to its exit;
	// its capacity is MaxConcurrentTurns + MaxIdle (nil: no bound). admitting counts the starts waiting
	// for a token.
	procSlots chan struct{}
	admitting atomic.Int32
	// procs counts the host's CLI processes, from admit to release.
	procs atomic.Int32
	// stopMetering ends the measurement of the host's processes.
	stopMetering func()
	// acct is the host's account (see Account).
	acct accountState
	// marks is what the session mirror remembers of the files it mirrored from this host.
	marks mirrorMarks
	// windows are the context windows the host's CLIs reported, by model.
	windows contextWindows
}

// runningAttempt is an attempt in progress and the way to cancel it.
type runningAttempt struct {
	turn      int
	attemptID string
	cancel    context.CancelCauseFunc
	// done is closed when the attempt has ended, with res and err its answer.
	done chan struct{}
	res  task.RunTurnResult
	err  *Error
}

// New checks cfg and returns an engine. It removes the private folders an earlier run of the
// same host left (see Claude.Env and MCP configuration): call it once per host process.
func New(cfg Config) (*Engine, error) {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	removeLeftoverDirs(cfg.HostID, cfg.Logger)
	e := &Engine{cfg: cfg, pool: newPool(), interrupts: make(map[string]int), interruptedBy: map[string]interruptAsk{}, running: make(map[string]*runningAttempt)}
	if cfg.MaxConcurrentTurns > 0 {
		e.procSlots = make(chan struct{}, cfg.MaxConcurrentTurns+cfg.MaxIdle)
	}
	e.decisions = newDecisions(cfg.DB, func(msg string, args ...any) { cfg.Logger.Warn(msg, args...) })
	e.stopMetering = e.meterProcesses()
	e.meterWaiting()
	return e, nil
}

// HostID is the identity of the host the engine runs on.
func (e *Engine) HostID() string { return e.cfg.HostID }

// HostTakesWork reports whether host hostID is alive (it beat within stale) and not draining.
func (e *Engine) HostTakesWork(ctx context.Context, hostID string, stale time.Duration) (bool, error) {
	return store.HostTakesWork(ctx, e.cfg.DB, hostID, stale)
}

// Request is one attempt of one turn: run the prompt in the task's session and commit it.
type Request struct {
	TaskID string
	Turn   int // 1-based
	// Attempt counts the attempts of this turn from 1; MaxAttempts bounds them (0: unbounded),
	// so that the last failing attempt closes the turn's record.
	Attempt     int
	MaxAttempts int
	// AttemptID is unique per attempt: it becomes the owner of the task's executor row, and
	// every write of the attempt is compare-and-set on it.
	AttemptID string
	// AttemptToken is kept with the executor row while the attempt owns it (see
	// store.Executor.AttemptToken).
	AttemptToken []byte
	Prompt       task.Prompt
	// PromptUUID is the transcript uuid of the prompt, the same on every attempt.
	PromptUUID string
	// Workspace is an unmanaged task's folder; Repo and Base a managed task's repository and
	// base (see task.Params): its worktree is Config.Workspaces' Dir(TaskID).
	Workspace string
	Repo      string
	Base      string
	// Fork is a forked task's fork point (task.Params.Fork).
	Fork *task.ForkPoint
	// Rewound: the task was rewound since its last turn (task.RunTurnInput.Rewound).
	Rewound bool
	Profile task.Profile
	// SessionID and LastMessageUUID are the caller's view of the resume point before this turn;
	// the executor row's committed point wins over them.
	SessionID       string
	LastMessageUUID string
	// NewSession starts the turn in a new session (task.RunTurnInput.NewSession).
	NewSession bool
	// PreviousFailure says why the previous attempt failed, for the turn_retry event.
	PreviousFailure string
	// Grants are the permissions granted for the rest of the task so far ("allow always").
	Grants []task.Grant
	// ApprovalTimeout is how long a permission request waits for a person. Defaults to
	// task.DefaultApprovalTimeout.
	ApprovalTimeout time.Duration
	// Budget is the task's own budget (the host's Config.DefaultBudget completes it), and Spent
	// what the task spent before the turn; nil Spent (a workflow from before budgets) bounds
	// nothing. The attempt's cost is recorded either way.
	Budget task.Budget
	Spent  *task.Totals
	// Heartbeat, when set, is called every Config.HeartbeatInterval from the start of the
	// attempt to its end, with the sequence number of the last event stored.
	Heartbeat func(lastSeq int64)
}

// Interrupt asks the CLI serving the task to interrupt the turn; that turn's RunTurn then ends
// with status interrupted. An interrupt for a turn not running yet is remembered and applied as
// soon as the turn's prompt is sent. It is not an error when the turn has already ended.
func (e *Engine) Interrupt(ctx context.Context, taskID string, turn int) error {
	return e.InterruptBy(ctx, taskID, turn, "")
}

// interruptAsk is who asked to interrupt which turn.
type interruptAsk struct {
	turn int
	by   string
}

// InterruptBy is Interrupt on behalf of by (empty: nobody named), whom the turn's interrupted
// event names.
func (e *Engine) InterruptBy(ctx context.Context, taskID string, turn int, by string) error {
	if by != "" {
		e.interruptsMu.Lock()
		e.interruptedBy[taskID] = interruptAsk{turn: turn, by: by}
		e.interruptsMu.Unlock()
	}
	ex := e.pool.get(taskID)
	if ex == nil || !ex.runningTurn(turn) {
		e.interruptsMu.Lock()
		e.interrupts[taskID] = turn
		e.interruptsMu.Unlock()
		e.cfg.Logger.Info("interrupt recorded for a turn not running yet", "task_id", taskID, "turn", turn)
		return nil
	}
	return ex.interrupt(ctx)
}

// interruptAuthor is who asked to interrupt the task's turn; empty when nobody named did.
func (e *Engine) interruptAuthor(taskID string, turn int) string {
	e.interruptsMu.Lock()
	defer e.interruptsMu.Unlock()
	if a, ok := e.interruptedBy[taskID]; ok && a.turn == turn {
		return a.by
	}
	return ""
}

// forgetInterruptAuthor drops who asked to interrupt the task's turn, once its attempt ends.
func (e *Engine) forgetInterruptAuthor(taskID string, turn int) {
	e.interruptsMu.Lock()
	defer e.interruptsMu.Unlock()
	if a, ok := e.interruptedBy[taskID]; ok && a.turn <= turn {
		delete(e.interruptedBy, taskID)
	}
}

// takeInterrupt reports, once, whether an interrupt is recorded for the turn.
func (e *Engine) takeInterrupt(taskID string, turn int) bool {
	e.interruptsMu.Lock()
	defer e.interruptsMu.Unlock()
	t, ok := e.interrupts[taskID]
	if !ok || t < turn {
		return false
	}
	if t == turn {
		delete(e.interrupts, taskID)
	}
	return t == turn
}

// CancelTurn stops the task's running turn as cancelled (the task was cancelled): its attempt
// ends with Cancelled at once. It reports whether such a turn was running here.
func (e *Engine) CancelTurn(taskID string, turn int) bool {
	e.runningMu.Lock()
	r, ok := e.running[taskID]
	e.runningMu.Unlock()
	if !ok || r.turn != turn {
		return false
	}
	r.cancel(context.Canceled)
	return true
}

// track registers a running attempt; untrack forgets it, with the attempt's answer. A draining
// host registers nothing (ok false): the attempt must not run. An attempt that already runs here
// (Temporal delivered its task twice: a poll's answer held by a silent link arrives after the
// task was given to another poll) is not run again: dup is the running one, whose answer the
// copy waits for.
func (e *Engine) track(taskID string, turn int, attemptID string, cancel context.CancelCauseFunc) (untrack func(task.RunTurnResult, *Error), dup *runningAttempt, ok bool) {
	e.runningMu.Lock()
	defer e.runningMu.Unlock()
	if r, ok := e.running[taskID]; ok && r.attemptID == attemptID {
		return nil, r, true
	}
	if e.draining.Load() {
		return nil, nil, false
	}
	r := &runningAttempt{turn: turn, attemptID: attemptID, cancel: cancel, done: make(chan struct{})}
	e.running[taskID] = r
	return func(res task.RunTurnResult, err *Error) {
		e.runningMu.Lock()
		// A newer attempt of the turn (one that took it over) may have replaced this one.
		if e.running[taskID] == r {
			delete(e.running, taskID)
		}
		e.runningMu.Unlock()
		r.res, r.err = res, err
		close(r.done)
	}, nil, true
}

// StopTask stops the task's CLI process on this host, if any, and forgets the task's pending
// interrupt.
func (e *Engine) StopTask(ctx context.Context, taskID string) {
	e.StopEndedTask(ctx, taskID, "")
}

// StopEndedTask is StopTask for a task that has ended, and also takes a managed task's worktree
// (repo: the task's repository) off this host; its checkpoints stay.
func (e *Engine) StopEndedTask(ctx context.Context, taskID, repo string) {
	defer e.removeWorktree(ctx, taskID, repo)
	e.interruptsMu.Lock()
	delete(e.interrupts, taskID)
	e.interruptsMu.Unlock()
	if ex := e.pool.remove(taskID); ex != nil {
		e.retire(ctx, ex, "task stopped")
	}
	e.forgetAccountWait(ctx, taskID)
	// Nothing asks any more: what still waits for a person is closed.
	if _, err := store.CancelPermissions(context.WithoutCancel(ctx), e.cfg.DB, taskID, "", "the task stopped"); err != nil {
		e.cfg.Logger.Warn("closing the stopped task's permission requests", "task_id", taskID, "error", err)
	}
}

// Close stops every CLI process of this host. Turns still running end as their attempts
// decide (their contexts should be cancelled first).
func (e *Engine) Close(ctx context.Context) {
	var wg sync.WaitGroup
	for _, ex := range e.pool.drain() {
		wg.Go(func() { e.retire(ctx, ex, "worker shutting down") })
	}
	wg.Wait()
	e.decisions.close()
	e.stopMetering()
}

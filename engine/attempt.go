package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/streamjson"
	"github.com/drover-run/drover/task"
)

// RunTurn runs one attempt of a turn: one prompt to one result, persisted.
//
// The attempt begins in one transaction (it owns the task's executor row, learns the resume
// point the turn's first attempt fixed, and records itself on the turn); it resumes the session
// there (a warm process standing exactly there is reused), sends the prompt with an uuid of its
// own, streams the CLI's events to the task's log, and commits the turn once its result is in
// and its events are stored. However it ends, exactly one function (settle) records the end:
// the turn committed, or the attempt ended on the executor row (and the turn closed when no
// attempt follows). A failed attempt's error is an *Error whose Type says whether a retry can
// help.
func (e *Engine) RunTurn(ctx context.Context, req Request) (task.RunTurnResult, error) {
	log := e.cfg.Logger.With("task_id", req.TaskID, "turn", req.Turn, "attempt", req.Attempt)
	ctx, span := e.cfg.Tracer.Start(ctx, "drover.turn", trace.WithAttributes(
		attribute.String("drover.task_id", req.TaskID),
		attribute.Int("drover.turn", req.Turn),
		attribute.Int("drover.attempt", req.Attempt),
	))
	defer span.End()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	untrack, dup, ok := e.track(req.TaskID, req.Turn, req.AttemptID, cancel)
	switch {
	case dup != nil:
		log.Info("the attempt already runs on this host; answering with its answer")
		select {
		case <-dup.done:
			if dup.err != nil {
				return task.RunTurnResult{}, dup.err
			}
			return dup.res, nil
		case <-ctx.Done():
			return task.RunTurnResult{}, contextFailure(ctx)
		}
	case !ok:
		log.Info("not running the turn: this host drains")
		return task.RunTurnResult{}, &Error{Type: task.ErrTypeWorkerStopping, Err: errDraining}
	}
	// Who asked to interrupt the turn is of no use once its attempt ended.
	defer e.forgetInterruptAuthor(req.TaskID, req.Turn)

	a := &attempt{e: e, req: req, log: log, meter: e.meterAttempt(ctx, req), cancel: cancel}
	stopHeartbeat := a.heartbeat(ctx)
	res, err := a.end(ctx, a.run(ctx))
	stopHeartbeat()
	if a.slot {
		e.turns.release(req.TaskID, a.handOver)
	}
	untrack(res, err)

	if err != nil {
		span.SetAttributes(attribute.String("drover.error_type", err.Type))
		if task.Waits(err.Type) {
			// Not a failure: the turn runs again once its account lets it.
			log.Info("turn attempt waits for its account", "error_type", err.Type, "reason", err)
			return task.RunTurnResult{}, err
		}
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		log.Warn("turn attempt failed", "error_type", err.Type, "retryable", err.Retryable(), "error", err)
		return task.RunTurnResult{}, err
	}
	span.SetAttributes(
		attribute.String("drover.turn_status", string(res.Status)),
		attribute.Float64("drover.cost_usd", res.CostUSD),
	)
	log.Info("turn finished", "status", res.Status, "cost_usd", res.CostUSD, "session_id", res.SessionID)
	return res, nil
}

// attempt is the state of one RunTurn call.
type attempt struct {
	e   *Engine
	req Request
	log *slog.Logger
	// cancel stops the attempt, with a cause (a newer attempt taking its turn over).
	cancel context.CancelCauseFunc
	// runner is the attempt as the executor knows it while it runs the turn (see takeover.go).
	runner *turnRunner

	// claimed: BeginAttempt succeeded, so the attempt owns the executor row and its end must
	// be recorded there.
	claimed bool
	elog    atomic.Pointer[eventLog]
	stopLog func()
	logDone sync.WaitGroup
	sink    *tracingSink
	meter   *attemptMeter
	// ex is the process serving the attempt, once it has one; inTurn once its sink is attached.
	ex     *executor
	inTurn bool
	// slot: the attempt holds one of the host's turn slots (see turnSlots), which it hands over
	// to its task's next turn for handOver once it ends.
	slot     bool
	handOver time.Duration
	// acct is what the attempt holds of its account (see gate).
	acct accountTurn
	// spend meters what the API bills the attempt (see budget.go); nil until it may run.
	spend *budgetMeter
	// hold keeps a managed turn's complete event from the log until its checkpoint is taken
	// (nil for an unmanaged task); restored is what restoreWorktree did, for the log.
	hold     *holdSink
	restored *events.WorkspaceRestore
}

// outcome is how an attempt's run ended: exactly one of fail, commit and answered is set.
type outcome struct {
	// fail: the attempt failed; nothing of the turn is committed. park: it failed leaving its
	// running turn, CLI and all, to the next attempt on this host (see takeover.go).
	fail *Error
	park bool
	// commit: the turn reached its result; commit it and answer with result.
	commit *store.TurnCommit
	// answered: an earlier attempt committed the turn; result comes from its record.
	answered bool
	result   task.RunTurnResult
}

func failed(e *Error) outcome { return outcome{fail: e} }

// run takes the attempt as far as it goes and says how it ended. It records nothing final:
// end does. Its steps: check the request, begin the attempt in Postgres, refuse it when the
// task's cancel is recorded, open its log, wait for the account, get a process at the resume
// point, start the turn on it, and wait for its end.
func (a *attempt) run(ctx context.Context) (o outcome) {
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("panic running a turn", "panic", r, "stack", string(debug.Stack()))
			o = failed(failure(task.ErrTypeInternal, "internal error running the turn: %v", r))
		}
	}()
	in, f := a.prepare(ctx)
	if f != nil {
		return failed(f)
	}
	begun, f := a.begin(ctx, in.workspace)
	if f != nil {
		return failed(f)
	}
	if begun.Turn.Finished() {
		// An earlier attempt committed the turn, but its answer never reached the caller (the
		// worker died in between). Answer from the record.
		a.log.Info("turn already committed by an earlier attempt")
		return outcome{answered: true, result: resultFromRecord(begun, a.req.Attempt)}
	}
	if f := a.refuseCancelled(ctx); f != nil {
		return failed(f)
	}
	if o, ok := a.takeOver(ctx); ok {
		return o
	}
	if f := a.restoreWorktree(ctx, begun); f != nil {
		return failed(f)
	}
	if in.images, f = a.managedAttachments(in); f != nil {
		return failed(f)
	}
	at := resumePoint{sessionID: begun.Turn.ResumeSessionID, uuid: begun.Turn.ResumeFromUUID, priorCostUSD: begun.PriorCostUSD}
	a.startLog(ctx, at.sessionID, begun.LostTurns)
	a.emitRestored(at.sessionID)
	if f := a.gate(ctx); f != nil {
		return failed(f)
	}
	return a.resumeWithFallback(ctx, in, at)
}

// prepared is what an attempt's request resolves to before anything is recorded.
type prepared struct {
	workspace string
	images    []claudecode.Image
}

// resumePoint is where the turn resumes its session: the turn's committed point, fixed by its
// first attempt ("" for a new session), and what the session cost up to there.
type resumePoint struct {
	sessionID, uuid string
	priorCostUSD    float64
}

// prepare checks the request, resolves its workspace and attachments, and starts the attempt's
// budget meter.
func (a *attempt) prepare(ctx context.Context) (prepared, *Error) {
	if err := validateRequest(a.req); err != nil {
		return prepared{}, &Error{Type: task.ErrTypeInvalidInput, Err: err}
	}
	workspace, f := a.workspace(ctx)
	if f != nil {
		return prepared{}, f
	}
	var images []claudecode.Image
	if !a.managed() {
		// A managed task's are loaded once its worktree is restored (managedAttachments).
		var err error
		if images, err = loadAttachments(workspace, a.req.Prompt.Attachments); err != nil {
			return prepared{}, &Error{Type: task.ErrTypeInvalidInput, Err: err}
		}
	}
	if a.spend, f = a.startBudget(ctx); f != nil {
		return prepared{}, f
	}
	return prepared{workspace: workspace, images: images}, nil
}

// begin begins the attempt in one transaction (store.BeginAttempt): it claims the task's
// executor row, learns the turn's resume point and records itself on the turn.
func (a *attempt) begin(ctx context.Context, workspace string) (store.AttemptBegun, *Error) {
	e, req := a.e, a.req
	// A warm process of the task claims the row as running; whether it stands at the turn's
	// resume point is known once the attempt has begun.
	warmPID := 0
	if ex := e.pool.get(req.TaskID); ex != nil {
		if _, idle := ex.idleSince(); idle {
			warmPID = ex.pid()
		}
	}
	begun, err := store.BeginAttempt(ctx, e.cfg.DB, store.AttemptStart{
		TaskID: req.TaskID, AttemptID: req.AttemptID, AttemptToken: req.AttemptToken, HostID: e.cfg.HostID,
		Turn: req.Turn, Prompt: req.Prompt.Text, PromptUUID: req.PromptUUID,
		Workspace: workspace, Model: req.Profile.Model, PID: warmPID,
		FallbackSessionID: req.SessionID, FallbackMessageUUID: req.LastMessageUUID, NewSession: req.NewSession,
		LostTurnError: "the turn's last attempt was lost with its worker; it was not completed",
	})
	switch {
	case errors.Is(err, store.ErrPromptMismatch):
		return begun, &Error{Type: task.ErrTypeInvalidInput, Err: err}
	case errors.Is(err, store.ErrStaleAttempt):
		return begun, &Error{Type: task.ErrTypeAttemptSuperseded, Err: err}
	case err != nil && ctx.Err() != nil:
		return begun, contextFailure(ctx)
	case err != nil:
		return begun, &Error{Type: task.ErrTypeStoreUnavailable, Err: err}
	}
	a.claimed = true
	if begun.LostTurns > 0 {
		a.log.Warn("closed earlier turns whose last attempt was lost", "turns", begun.LostTurns)
	}
	return begun, nil
}

// refuseCancelled ends the attempt as cancelled, before any process or prompt, when a cancel of
// its workflow run is recorded (store.RecordCancel): a worker that comes back after the task
// was cancelled may start a retry of the lost attempt before it learns of the cancel, and that
// retry must not reach the API. A Cancelled attempt is not retried.
func (a *attempt) refuseCancelled(ctx context.Context) *Error {
	runID, _, _ := strings.Cut(a.req.AttemptID, "/")
	cancelled, err := store.Cancelled(ctx, a.e.cfg.DB, a.req.TaskID, runID)
	switch {
	case err != nil && ctx.Err() != nil:
		return contextFailure(ctx)
	case err != nil:
		return &Error{Type: task.ErrTypeStoreUnavailable, Err: err}
	case cancelled:
		a.log.Info("not running the turn: the task was cancelled")
		return &Error{Type: task.ErrTypeCancelled, Err: errTaskCancelled}
	}
	return nil
}

// startLog opens the attempt's event log; a retry first closes what lost attempts left open and
// says why the turn runs again.
func (a *attempt) startLog(ctx context.Context, sessionID string, lostTurns int64) {
	req := a.req
	a.openLog(ctx)
	if req.Attempt > 1 || lostTurns > 0 {
		a.closeLostToolCalls(ctx)
	}
	if req.Attempt <= 1 {
		return
	}
	reason := req.PreviousFailure
	if w := a.waitedFor(ctx); w != "" {
		reason = w
	}
	if reason == "" {
		reason = "the previous attempt failed"
	}
	a.emit(events.AgentEvent{Type: events.TypeTurnRetry, SessionID: sessionID,
		TurnRetry: &events.TurnRetry{Attempt: req.Attempt - 1, Reason: reason}})
}

// emitRestored says in the log what restoreWorktree did, after the retry's turn_retry.
func (a *attempt) emitRestored(sessionID string) {
	if a.restored != nil {
		a.emit(events.AgentEvent{Type: events.TypeWorkspaceRestored, SessionID: sessionID, Workspace: a.restored})
	}
}

// startTurn starts the turn on ex: it attaches the attempt's sink, approvals and budget, sets the
// turn's permission mode, sends the prompt, records a fresh process on the executor row, and
// interrupts at once a turn that was asked to stop before it started.
func (a *attempt) startTurn(ctx context.Context, ex *executor, fresh bool, images []claudecode.Image) (<-chan turnEnd, *Error) {
	e, req := a.e, a.req
	ended, err := ex.beginTurn(req.Turn, a.turnSink(ctx, false))
	if err != nil {
		return nil, &Error{Type: task.ErrTypeInternal, Err: err}
	}
	a.inTurn = true
	approvals := newTurnApprovals(e, ex, req, a.sink, a.log)
	if l := a.elog.Load(); l != nil {
		approvals.flush = l.Flush
	}
	ex.approvals.Store(approvals)
	a.spend.arm(ex, a.cutTurn(ex))
	if ex.supervisable {
		// The CLI's own plan mode, or bypass with drover's hooks deciding: as the turn's mode says.
		if err := ex.proc.Client().SetPermissionMode(ctx, cliPermissionMode(req.Profile.PermissionMode)); err != nil {
			return nil, &Error{Type: task.ErrTypeClaudeProtocol, Err: fmt.Errorf("setting the permission mode: %w", err)}
		}
	}
	if f := a.sendPrompt(ctx, ex, images); f != nil {
		return nil, f
	}
	a.runner = &turnRunner{attempt: req.Attempt, promptUUID: req.PromptUUID, cancel: a.cancel}
	ex.setRunner(a.runner)
	if fresh {
		if err := store.SetExecutorRunning(ctx, e.cfg.DB, req.TaskID, req.AttemptID, ex.pid()); err != nil {
			if errors.Is(err, store.ErrStaleAttempt) {
				return nil, &Error{Type: task.ErrTypeAttemptSuperseded, Err: err}
			}
			// The turn goes on; its commit rides out the database's trouble.
			a.log.Warn("recording the running claude process", "error", err)
		}
	}
	if e.takeInterrupt(req.TaskID, req.Turn) {
		a.log.Info("interrupting the turn as asked before it started")
		if err := ex.interrupt(ctx); err != nil {
			a.log.Warn("interrupting the turn", "error", err)
		}
	}
	return ended, nil
}

// turnSink builds where the events of the attempt's turn go: its log, through the author,
// checkpoint-hold, metering and tracing sinks. adopted: the turn was taken over with its prompt
// already sent.
func (a *attempt) turnSink(ctx context.Context, adopted bool) streamjson.Sink {
	author := a.authorSink(a.logSink())
	author.prompted = adopted
	var logSink streamjson.Sink = author
	if a.managed() {
		a.hold = &holdSink{next: logSink}
		logSink = a.hold
	}
	a.sink = newTracingSink(ctx, a.e.cfg.Tracer, a.meter.watch(logSink))
	return a.sink
}

// sendPrompt writes the attempt's prompt to the CLI, with a transcript uuid of the attempt's own.
func (a *attempt) sendPrompt(ctx context.Context, ex *executor, images []claudecode.Image) *Error {
	prompt := claudecode.Prompt{Text: a.req.Prompt.Text, Images: images, UUID: attemptPromptUUID(a.req.PromptUUID, a.req.Attempt)}
	err := ex.sendPrompt(ctx, prompt)
	if err == nil {
		return nil
	}
	// The CLI may have exited on its own (a rejected resume exits before reading any prompt):
	// its exit says more than the broken pipe.
	select {
	case <-ex.exited:
		return exitFailure(ex.exitErr)
	case <-time.After(a.e.cfg.StopTimeout):
		return &Error{Type: task.ErrTypeClaudeExited, Err: err}
	}
}

// wait waits for the turn to end, the CLI to exit or stall, or ctx to end.
func (a *attempt) wait(ctx context.Context, ex *executor, ended <-chan turnEnd) outcome {
	e := a.e
	stall := time.NewTicker(min(e.cfg.StallTimeout/4, time.Minute))
	defer stall.Stop()
	limited := ex.retryLimits()
	for {
		select {
		case r := <-limited:
			return a.stopForRetry(ctx, ex, ended, r)
		case <-stall.C:
			if quiet := ex.quietFor(); quiet >= e.cfg.StallTimeout {
				return failed(failure(task.ErrTypeClaudeStalled, "claude printed nothing for %s; stopped it", quiet.Round(time.Second)))
			}
		case end := <-ended:
			return a.finish(end)
		case <-ex.exited:
			select {
			case end := <-ended: // the result came just before the exit
				return a.finish(end)
			default:
			}
			return failed(exitFailure(ex.exitErr))
		case <-ctx.Done():
			if f := contextFailure(ctx); a.mayPark(f) {
				return outcome{fail: f, park: true}
			}
			// Stop the turn before the process: an interrupted CLI ends its tools itself.
			ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.StopTimeout)
			if err := ex.interrupt(ictx); err != nil {
				a.log.Debug("interrupting the cancelled turn", "error", err)
			}
			cancel()
			return failed(contextFailure(ctx))
		}
	}
}

// finish decides what a turn's result means: a turn to commit (completed, interrupted, or
// failed in a way a retry would repeat: max turns, budget), or a failed attempt.
func (a *attempt) finish(end turnEnd) outcome {
	c := end.complete
	res := task.RunTurnResult{
		Attempt: a.req.Attempt, SessionID: c.SessionID, LastMessageUUID: c.LastMessageUUID, ResultUUID: c.ResultUUID,
		CostUSD: c.CostUSD, InputTokens: c.InputTokens, OutputTokens: c.OutputTokens,
		DurationMS: c.DurationMS, NumTurns: c.NumTurns, Status: task.TurnCompleted,
	}
	if c.IsError {
		info := end.err
		if info == nil {
			info = &events.ErrorInfo{Kind: events.ErrorExecution,
				Message: fmt.Sprintf("the turn ended with an error (%s, %s)", c.Subtype, c.TerminalReason)}
		}
		res.Error = info.Message
		switch info.Kind {
		case events.ErrorAPI, events.ErrorExecution, events.ErrorProtocol, events.ErrorResumeRejected:
			if h, ok := classifyLimit(info, end.limit, end.retryAfter, a.e.cfg.RateLimitWait, time.Now()); ok {
				// Not the turn's fault: it waits for its account and runs again from here.
				return failed(limitFailure(h))
			}
			// Worth another attempt (or a new session): resume where the turn began and send
			// the prompt again.
			return failed(turnFailure(info, end.retryAfter))
		case events.ErrorInterrupted:
			res.Status = task.TurnInterrupted
		default: // max turns, budget: the work done stands; the turn ends failed.
			res.Status = task.TurnFailed
		}
	}
	if res.LastMessageUUID == "" || res.SessionID == "" {
		return failed(failure(task.ErrTypeClaudeProtocol, "the turn ended without a transcript position to resume at"))
	}
	return outcome{result: res, commit: &store.TurnCommit{
		TaskID: a.req.TaskID, Turn: a.req.Turn, AttemptID: a.req.AttemptID,
		SessionID: res.SessionID, LastMessageUUID: res.LastMessageUUID, ResultUUID: res.ResultUUID,
		Status: res.Status, CostUSD: c.CostUSD, InputTokens: c.InputTokens, OutputTokens: c.OutputTokens,
		CacheReadTokens: c.CacheReadInputTokens, CacheCreationTokens: c.CacheCreationInputTokens,
		DurationMS: c.DurationMS, NumTurns: c.NumTurns, IsError: c.IsError, Error: res.Error,
	}}
}

// end winds the attempt down, however it ended, and is the one place that does: the budget
// meter stops, settle records the end, the result gets what the budget adds (or the failed
// commit its price), the metrics take the outcome, and the log stores what it still holds.
func (a *attempt) end(ctx context.Context, o outcome) (task.RunTurnResult, *Error) {
	// A parked turn's cost is the cost of the attempt that adopts and commits it.
	a.spend.finish(ctx, a.ex, o.commit != nil || o.park)
	res, err := a.e.settle(ctx, a, o)
	switch {
	case err == nil:
		res = a.budgetResult(ctx, res)
	case o.commit != nil:
		a.spend.failedCommit(ctx)
	}
	if err != nil {
		a.meter.failed(a.spend.unresulted())
	}
	a.meter.ended(res, err)
	a.close(ctx)
	return res, err
}

// settle records how the attempt ended, and is the only place that does: every path of run
// comes here. A turn to commit is committed after its events are stored (and its process kept
// for the next turn, or stopped); anything else stops the attempt's process and ends the
// attempt on the executor row, closing the turn when no attempt follows.
func (e *Engine) settle(ctx context.Context, a *attempt, o outcome) (task.RunTurnResult, *Error) {
	if o.answered {
		return o.result, nil
	}
	e.accountEnded(ctx, a, o)
	if o.park {
		a.park(ctx)
		if a.claimed && o.fail.Type != task.ErrTypeAttemptSuperseded {
			e.endAttempt(ctx, a.req, o.fail)
		}
		return task.RunTurnResult{}, o.fail
	}
	if a.ex != nil && a.runner != nil {
		// Not parked: a newer attempt waiting for the turn starts it anew.
		a.ex.letGo(a.runner)
	}
	if o.fail == nil {
		a.closeLeftRequests(ctx)
		if o.fail = e.commit(ctx, a, *o.commit, &o.result); o.fail == nil {
			a.handOver = e.holdForNext(ctx, a.ex)
			a.ex.endTurn(o.commit.SessionID, o.commit.LastMessageUUID, a.req.AttemptID)
			e.keepOrStop(ctx, a.ex)
			return o.result, nil
		}
	}
	f := o.fail
	if a.ex != nil {
		if a.inTurn {
			// What the process says while it stops (its tool calls closed, its requests
			// withdrawn) belongs to this attempt's log: stop it before the sink goes. Nothing
			// is asked of a person meanwhile.
			a.ex.approvals.Store(nil)
			e.drop(ctx, a.ex, f.Type)
			a.ex.endTurn("", "", "")
		} else {
			e.drop(ctx, a.ex, f.Type)
		}
	}
	if a.claimed && f.Type != task.ErrTypeAttemptSuperseded {
		if lastAttempt(a.req, f) {
			a.closeLeftRequests(ctx)
		}
		e.endAttempt(ctx, a.req, f)
	}
	return task.RunTurnResult{}, f
}

// lastAttempt reports whether no attempt of the turn follows one that failed with f.
func lastAttempt(req Request, f *Error) bool {
	// A host that drains or is lost hands the turn to another host, and a turn that waits for
	// its account runs again after the wait: an attempt follows.
	if task.Waits(f.Type) {
		return false
	}
	return !f.Retryable() || (!task.Reassign(f.Type) && req.MaxAttempts > 0 && req.Attempt >= req.MaxAttempts)
}

// closeLeftRequests closes what the turn still has waiting for a person once nothing will ask
// for it again (the turn reached its result, or no attempt follows): a request an earlier
// attempt asked and this one did not, or the one this attempt waited for when it was stopped.
// Each gets a permission_cancelled event. A failure is logged; the workflow closes its own view
// of them when the turn ends anyway.
func (a *attempt) closeLeftRequests(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.e.cfg.StopTimeout)
	defer cancel()
	closed, err := store.CancelTurnPermissions(ctx, a.e.cfg.DB, a.req.TaskID, a.req.Turn, "the turn ended before anybody answered")
	if err != nil {
		a.log.Warn("closing the permission requests the turn left", "error", err)
		return
	}
	for _, r := range closed {
		a.emit(events.AgentEvent{Type: events.TypePermissionCancelled, PendingID: r.RequestID})
	}
	if len(closed) > 0 {
		a.log.Info("closed the permission requests the turn left", "requests", len(closed))
	}
}

// commit records a managed task's worktree as the turn's checkpoint, stores the turn's events,
// mirrors the session, then commits the turn (with its checkpoint), riding out database failures
// for CommitRetry. The turn is not committed without its checkpoint.
func (e *Engine) commit(ctx context.Context, a *attempt, c store.TurnCommit, res *task.RunTurnResult) *Error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.CommitRetry)
	defer cancel()
	if f := a.checkpoint(ctx, &c, res); f != nil {
		return f
	}
	l := a.elog.Load()
	if err := l.Flush(ctx); err != nil {
		return &Error{Type: task.ErrTypeStoreUnavailable, Err: fmt.Errorf("storing the turn's events: %w", err)}
	}
	if err := l.Err(); err != nil {
		return &Error{Type: task.ErrTypeStoreUnavailable, Err: err}
	}
	if dir := e.cfg.Claude.ConfigDir; dir != "" && c.SessionID != "" {
		u, err := e.mirror(ctx, dir, a.ex.workspace, c.SessionID, c.LastMessageUUID)
		if err != nil {
			return err
		}
		if u == nil {
			a.log.Warn("the session has no transcript to mirror: it cannot move to another host", "session_id", c.SessionID, "config_dir", dir)
		}
		c.Mirror = u
	}
	backoff := 100 * time.Millisecond
	for {
		applied, err := store.CommitTurn(ctx, e.cfg.DB, c)
		switch {
		case err == nil:
			if !applied {
				a.log.Info("the turn's accounting was already committed")
			}
			return nil
		case errors.Is(err, store.ErrStaleAttempt):
			return &Error{Type: task.ErrTypeAttemptSuperseded, Err: fmt.Errorf("a newer attempt owns the task: %w", err)}
		}
		a.log.Warn("committing the turn failed; retrying", "error", err)
		select {
		case <-ctx.Done():
			return &Error{Type: task.ErrTypeStoreUnavailable, Err: fmt.Errorf("committing the turn: %w", err)}
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// endAttempt records a failed attempt on the executor row: failed (or stopped, when it was
// stopped on purpose), its pid gone, and the turn closed when no attempt follows. The session
// stands even when the CLI refused to resume it: only a person starts a new one. It retries briefly through database failures; what it
// cannot record, the next attempt's claim overwrites.
func (e *Engine) endAttempt(ctx context.Context, req Request, f *Error) {
	final := lastAttempt(req, f)
	status := store.ExecutorFailed
	if f.Type == task.ErrTypeCancelled || f.Type == task.ErrTypeWorkerStopping {
		status = store.ExecutorStopped
	}
	end := store.AttemptEnd{
		TaskID: req.TaskID, AttemptID: req.AttemptID, Status: status,
		Error: f.Type + ": " + f.Error(),
	}
	if final {
		end.AbandonTurn = req.Turn
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*e.cfg.StopTimeout)
	defer cancel()
	backoff := 100 * time.Millisecond
	for {
		err := store.EndAttempt(ctx, e.cfg.DB, end)
		if err == nil {
			return
		}
		if errors.Is(err, store.ErrStaleAttempt) || errors.Is(err, store.ErrNotFound) {
			e.cfg.Logger.Info("a newer attempt owns the task; not recording this one's end", "task_id", req.TaskID, "error", err)
			return
		}
		select {
		case <-ctx.Done():
			e.cfg.Logger.Warn("recording the failed attempt", "task_id", req.TaskID, "error", err)
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// executor returns a process for the task standing exactly at the resume point: the kept one
// when it qualifies, else a fresh one started with --resume/--resume-session-at (or a new
// session). fresh reports a process started for this attempt.
func (a *attempt) executor(ctx context.Context, workspace string, at resumePoint, step resumeStep) (ex *executor, fresh bool, f *Error) {
	e := a.e
	if e.pool.get(a.req.TaskID) != nil {
		// A warm process: its turn may run once it has a slot (a first turn takes one once it
		// has room for its process, in launch).
		if f := a.takeSlot(ctx); f != nil {
			return nil, false, f
		}
	}
	if ex := e.pool.get(a.req.TaskID); ex != nil {
		if step == resumeExact && ex.reusableAt(at.sessionID, at.uuid) && (ex.supervisable || !a.hooked()) {
			a.log.Debug("reusing the running claude process", "pid", ex.pid())
			return ex, false, nil
		}
		e.drop(ctx, ex, "not at the committed resume point")
	}
	spec, f := a.spec(ctx, workspace, at, step)
	if f != nil {
		return nil, false, f
	}
	if ex, f = a.launch(ctx, spec); f != nil {
		return nil, false, f
	}
	return ex, true, nil
}

// takeSlot takes one of the host's turn slots for the attempt, unless it holds one already.
func (a *attempt) takeSlot(ctx context.Context) *Error {
	if a.slot {
		return nil
	}
	if err := a.e.turns.acquire(ctx, a.req.TaskID); err != nil {
		return contextFailure(ctx)
	}
	a.slot = true
	return nil
}

// spec is how to start the task's CLI at the resume point: the command, the session to resume
// (restored from its mirror first) or a new one, and the debug capture when configured.
func (a *attempt) spec(ctx context.Context, workspace string, at resumePoint, step resumeStep) (executorSpec, *Error) {
	e, req := a.e, a.req
	spec := executorSpec{hostID: e.cfg.HostID, stopTimeout: e.cfg.StopTimeout, backgroundWait: e.cfg.BackgroundWait, pauseIdle: e.cfg.PauseIdle,
		supervisable: a.hooked(), windows: &e.windows}
	spec.cmd = e.command(req.Profile, workspace)
	if spec.supervisable {
		hookedForBudget(&spec.cmd)
	}
	if at.sessionID != "" && at.uuid != "" && e.cfg.Claude.ConfigDir != "" {
		// The session may have last run on another host, or this host's copy may hold what a
		// lost attempt wrote: make it the mirror's before the CLI reads it.
		start := time.Now()
		n, err := e.marks.restoreSession(ctx, e.cfg.DB, e.cfg.Claude.ConfigDir, at.sessionID)
		if err != nil {
			return spec, mirrorFailure(err)
		}
		if n > 0 {
			a.log.Info("restored the session from its mirror", "session_id", at.sessionID, "files", n, "took", time.Since(start).Round(time.Millisecond))
		}
	}
	if f := a.rebuildChain(at, step); f != nil {
		return spec, f
	}
	if at.sessionID != "" && at.uuid != "" {
		spec.cmd.Resume, spec.cmd.ResumeSessionAt = at.sessionID, at.uuid
		if step == resumePlain {
			spec.cmd.ResumeSessionAt = "" // the rebuilt transcript ends at the committed message
		}
		spec.sessionID, spec.resumeSessionID, spec.resumeAt = at.sessionID, at.sessionID, at.uuid
		if a.forksSession(at) {
			if f := a.forkSession(&spec, workspace); f != nil {
				return spec, f
			}
		}
		// The CLI's running cost continues across --resume from what the session cost so far;
		// the adapter subtracts it when a result lacks per-turn usage.
		spec.priorTotalCostUSD = at.priorCostUSD
	} else {
		spec.sessionID = uuid.NewString()
		spec.cmd.SessionID = spec.sessionID
	}
	if e.cfg.DebugDir != "" {
		d, err := streamjson.OpenDebugCapture(streamjson.DebugConfig{Dir: e.cfg.DebugDir, AgentID: req.TaskID, Secrets: e.cfg.Claude.secrets()})
		if err != nil {
			a.log.Warn("debug capture unavailable", "error", err)
		} else {
			spec.debug = d
		}
	}
	return spec, nil
}

// launch starts the CLI of spec once the host has room for it, initializes it and puts it in the
// pool (stopping any process it replaces).
func (a *attempt) launch(ctx context.Context, spec executorSpec) (*executor, *Error) {
	e := a.e
	closeDebug := func() {
		if spec.debug != nil {
			_ = spec.debug.Close()
		}
	}
	if err := e.admit(ctx); err != nil {
		closeDebug()
		return nil, contextFailure(ctx)
	}
	if f := a.takeSlot(ctx); f != nil {
		e.release()
		closeDebug()
		return nil, f
	}
	ex, err := startExecutor(ctx, e.cfg.Launcher, a.req.TaskID, spec, a.log)
	if err != nil {
		e.release()
		closeDebug()
		return nil, &Error{Type: task.ErrTypeClaudeStartFailed, Err: err}
	}
	go func(exited <-chan struct{}) {
		<-exited
		e.release()
	}(ex.proc.Exited())
	if err := ex.initialize(ctx, initializeRequest(spec.supervisable)); err != nil {
		ex.stop(ctx, "initialize failed")
		<-ex.exited
		var rr *claudecode.ResumeRejectedError
		switch {
		case errors.As(ex.exitErr, &rr):
			return nil, exitFailure(ex.exitErr)
		case ctx.Err() != nil:
			return nil, contextFailure(ctx)
		}
		return nil, &Error{Type: task.ErrTypeClaudeStartFailed, Err: fmt.Errorf("%w%s", err, stderrTail(ex.exitErr))}
	}
	if old := e.pool.put(ex); old != nil {
		old.stop(ctx, "replaced")
	}
	a.log.Info("claude started", "pid", ex.pid(), "session_id", spec.sessionID, "resume_at", spec.resumeAt)
	return ex, nil
}

// closeLostToolCalls closes, in the log, the tool calls that attempts lost with their worker
// left open, so that no reader waits for them for ever. A failure to look is logged: the turn
// goes on.
func (a *attempt) closeLostToolCalls(ctx context.Context) {
	open, err := store.OpenToolCalls(ctx, a.e.cfg.DB, a.req.TaskID, a.req.Turn, a.req.Attempt)
	if err != nil {
		a.log.Warn("looking for tool calls lost attempts left open", "error", err)
		return
	}
	for _, o := range open {
		a.emit(events.AgentEvent{
			Type: events.TypeToolUpdate, ToolCallID: o.ToolCallID, ToolName: o.ToolName,
			ParentToolCallID: o.ParentToolCallID, ToolStatus: events.ToolError,
			ToolError: fmt.Sprintf("the attempt running this tool (turn %d, attempt %d) was lost before the tool ended", o.Turn, o.Attempt),
		})
	}
	if len(open) > 0 {
		a.log.Info("closed tool calls of lost attempts", "tool_calls", len(open))
	}
}

// openLog starts the attempt's event log and its background writer.
func (a *attempt) openLog(ctx context.Context) {
	l := newEventLog(a.e.cfg.DB, a.req.TaskID, a.req.AttemptID, a.req.Turn, a.req.Attempt, a.log)
	a.elog.Store(l)
	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	a.stopLog = stop
	a.logDone.Go(func() { l.run(lctx) })
}

// logSink is where the attempt's events go.
func (a *attempt) logSink() streamjson.Sink { return a.elog.Load() }

// emit appends an event of the attempt's own to its log.
func (a *attempt) emit(ev events.AgentEvent) {
	if l := a.elog.Load(); l != nil {
		l.Emit(ev)
	}
}

// close ends the attempt's spans and stores whatever its log still holds (frames that follow
// the result, the last events of a failed attempt).
func (a *attempt) close(ctx context.Context) {
	// A turn that failed before its checkpoint still logs its complete event, without one.
	a.hold.release("")
	if a.sink != nil {
		a.sink.close()
	}
	l := a.elog.Load()
	if l == nil {
		return
	}
	a.stopLog()
	a.logDone.Wait()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := l.Flush(fctx); err != nil {
		a.log.Warn("storing the attempt's last events", "error", err)
	}
}

// heartbeat calls Request.Heartbeat every interval from now until the returned function is
// called.
func (a *attempt) heartbeat(ctx context.Context) (stop func()) {
	if a.req.Heartbeat == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(a.e.cfg.HeartbeatInterval)
		defer t.Stop()
		// The first beat waits a tick: the activity's start already told Temporal it runs.
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var seq int64
			if l := a.elog.Load(); l != nil {
				seq = l.LastSeq()
			}
			a.req.Heartbeat(seq)
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

func validateRequest(r Request) error {
	switch {
	case r.TaskID == "":
		return errors.New("the task id is empty")
	case r.Turn < 1:
		return fmt.Errorf("turn %d is not a turn number", r.Turn)
	case r.Attempt < 1:
		return fmt.Errorf("attempt %d is not an attempt number", r.Attempt)
	case r.AttemptID == "":
		return errors.New("the attempt id is empty")
	case strings.TrimSpace(r.Prompt.Text) == "" && len(r.Prompt.Attachments) == 0:
		return errors.New("the prompt is empty")
	case !claudecode.IsUUID(r.PromptUUID):
		return fmt.Errorf("the prompt uuid %q is not a uuid", r.PromptUUID)
	case !r.Profile.PermissionMode.Valid():
		return fmt.Errorf("unknown permission mode %q (allowed: autonomous, supervised, plan)", r.Profile.PermissionMode)
	case r.Profile.MaxTurns < 0:
		return fmt.Errorf("max turns %d is negative", r.Profile.MaxTurns)
	}
	return nil
}

// attemptPromptUUID gives each attempt its own transcript uuid for the prompt: the first
// attempt uses the workflow's, later ones a uuid derived from it, so that a retried prompt never
// repeats a uuid already written to the transcript (the file is append-only; a repeated uuid
// would attach the lost attempt's entries to the new prompt).
func attemptPromptUUID(promptUUID string, attempt int) string {
	if attempt <= 1 {
		return promptUUID
	}
	base, err := uuid.Parse(promptUUID)
	if err != nil {
		return uuid.NewString()
	}
	return uuid.NewSHA1(base, fmt.Appendf(nil, "attempt/%d", attempt)).String()
}

// resultFromRecord answers an attempt whose turn an earlier attempt committed.
func resultFromRecord(b store.AttemptBegun, attempt int) task.RunTurnResult {
	rec := b.Turn
	out := task.RunTurnResult{
		Attempt: attempt, SessionID: b.SessionID, LastMessageUUID: rec.LastMessageUUID, ResultUUID: rec.ResultUUID,
		CostUSD: rec.CostUSD, InputTokens: rec.InputTokens, OutputTokens: rec.OutputTokens,
		DurationMS: rec.DurationMS, NumTurns: rec.NumTurns, Error: rec.Error, Status: rec.Status, Checkpoint: rec.Checkpoint,
	}
	return out
}

// stderrTail is the last stderr lines of a CLI that exited, for an error message.
func stderrTail(err error) string {
	var ee *claudecode.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return "; stderr: " + strings.Join(ee.Stderr, " | ")
	}
	return ""
}

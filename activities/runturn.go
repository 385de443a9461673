package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// RunTurn runs one turn of a task: one prompt to one result. See the package
// documentation for how attempts resume.
func (a *Activities) RunTurn(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
	info := activity.GetInfo(ctx)
	attempt := int(info.Attempt)
	execID := fmt.Sprintf("%s/%s/%d", info.WorkflowExecution.RunID, info.ActivityID, attempt)
	log := a.cfg.Logger.With("task_id", in.TaskID, "turn", in.Turn, "attempt", attempt)
	ctx, span := a.cfg.Tracer.Start(ctx, "drover.turn", trace.WithAttributes(
		attribute.String("drover.task_id", in.TaskID),
		attribute.Int("drover.turn", in.Turn),
		attribute.Int("drover.attempt", attempt),
	))
	defer span.End()

	res, err := a.runTurn(ctx, in, attempt, execID, log)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == task.ErrTypeResumeRejected {
		// The session cannot continue: forget it, so the next prompt starts a
		// new one instead of being refused the same way.
		if cerr := store.ClearResumePoint(context.WithoutCancel(ctx), a.cfg.DB, in.TaskID, execID, appErr.Error()); cerr != nil {
			log.Warn("clearing the rejected resume point", "error", cerr)
		}
	}
	if err != nil && lastAttempt(ctx, err) {
		// No attempt follows: close the turn's record as failed, so that it
		// does not stay "running" forever.
		if _, aerr := store.AbandonTurn(context.WithoutCancel(ctx), a.cfg.DB, in.TaskID, in.Turn, err.Error()); aerr != nil {
			log.Warn("closing the failed turn's record", "error", aerr)
		}
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		log.Warn("turn attempt failed", "error", err)
		return res, err
	}
	span.SetAttributes(
		attribute.String("drover.turn_status", string(res.Status)),
		attribute.Float64("drover.cost_usd", res.CostUSD),
	)
	log.Info("turn finished", "status", res.Status, "cost_usd", res.CostUSD, "session_id", res.SessionID)
	return res, nil
}

func (a *Activities) runTurn(ctx context.Context, in task.RunTurnInput, attempt int, execID string, log *slog.Logger) (task.RunTurnResult, error) {
	out := task.RunTurnResult{Attempt: attempt}
	// Heartbeat from the start: a CLI that is slow to start (many at once on
	// a busy host) must not look like a lost worker.
	hb := a.startHeartbeat(ctx)
	defer hb.stop()
	if err := validateInput(in); err != nil {
		return out, nonRetryable(task.ErrTypeInvalidInput, err)
	}
	workspace, err := resolveWorkspace(a.cfg.WorkspaceRoot, in.Workspace)
	if err != nil {
		return out, nonRetryable(task.ErrTypeInvalidInput, err)
	}
	images, err := loadAttachments(workspace, in.Prompt.Attachments)
	if err != nil {
		return out, nonRetryable(task.ErrTypeInvalidInput, err)
	}

	// The resume point of this turn is fixed by its first attempt: later
	// attempts go back to it, never to where a failed attempt got.
	sessionID, resumeAt := in.SessionID, in.LastMessageUUID
	if ex, err := store.GetExecutor(ctx, a.cfg.DB, in.TaskID); err == nil {
		if s, u := ex.ResumePoint(); s != "" {
			sessionID, resumeAt = s, u
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return out, fmt.Errorf("reading the executor row: %w", err)
	}
	// A turn before this one that is still "running" lost its last attempt
	// with its worker: the workflow has moved on, so close its record.
	if n, err := store.AbandonEarlierTurns(ctx, a.cfg.DB, in.TaskID, in.Turn, "the turn's last attempt was lost (worker gone); it was not completed"); err != nil {
		log.Warn("closing earlier turns", "error", err)
	} else if n > 0 {
		log.Warn("closed earlier turns whose last attempt was lost", "turns", n)
	}
	rec, err := store.BeginTurn(ctx, a.cfg.DB, store.TurnStart{
		TaskID: in.TaskID, Turn: in.Turn, Prompt: in.Prompt.Text, PromptUUID: in.PromptUUID,
		ResumeSessionID: sessionID, ResumeFromUUID: resumeAt,
	})
	if err != nil {
		return out, fmt.Errorf("recording the turn: %w", err)
	}
	if rec.Finished() {
		// An earlier attempt committed this turn, but its completion never
		// reached the workflow (the worker died in between). Answer from the record.
		log.Info("turn already committed by an earlier attempt")
		res := resultFromRecord(rec, attempt)
		if ex, err := store.GetExecutor(ctx, a.cfg.DB, in.TaskID); err == nil {
			res.SessionID, _ = ex.ResumePoint()
		}
		return res, nil
	}
	sessionID, resumeAt = rec.ResumeSessionID, rec.ResumeFromUUID

	if _, err := store.ClaimExecutor(ctx, a.cfg.DB, store.Claim{
		TaskID: in.TaskID, ExecutionID: execID, ExecutorID: a.cfg.ExecutorID,
		WorktreePath: workspace, Model: in.Profile.Model,
	}); err != nil {
		return out, fmt.Errorf("claiming the executor row: %w", err)
	}

	elog := newEventLog(a.cfg.DB, in.TaskID, in.Turn, attempt, log)
	logCtx, stopLog := context.WithCancel(context.WithoutCancel(ctx))
	var logDone sync.WaitGroup
	logDone.Go(func() { elog.run(logCtx) })
	hb.track(elog)
	defer func() {
		stopLog()
		logDone.Wait()
		// Whatever the turn printed after its last flush (frames that follow
		// the result) is stored too.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := elog.Flush(fctx); err != nil {
			log.Warn("storing the turn's last events", "error", err)
		}
	}()
	if attempt > 1 {
		elog.Emit(events.AgentEvent{
			Type:      events.TypeTurnRetry,
			SessionID: sessionID,
			TurnRetry: &events.TurnRetry{Attempt: attempt - 1, Reason: lastFailure(ctx)},
		})
	}

	ex, err := a.executorFor(ctx, in, workspace, sessionID, resumeAt, log)
	if err != nil {
		_ = elog.Flush(ctx)
		a.markFailed(ctx, in.TaskID, execID, err)
		return out, err
	}
	if err := store.SetExecutorRunning(ctx, a.cfg.DB, in.TaskID, execID, ex.pid(), ex.currentSession()); err != nil {
		a.dropExecutor(ctx, ex, "lost the executor row")
		return out, fmt.Errorf("marking the executor running: %w", err)
	}

	sink := newTracingSink(ctx, a.cfg.Tracer, elog)
	defer sink.close()
	outcome, err := ex.beginTurn(in.Turn, sink)
	if err != nil {
		a.dropExecutor(ctx, ex, err.Error())
		return out, retryable(task.ErrTypeCLI, err)
	}
	promptUUID := attemptPromptUUID(in.PromptUUID, attempt)
	if err := ex.sendPrompt(ctx, claudecode.Prompt{Text: in.Prompt.Text, Images: images, UUID: promptUUID}); err != nil {
		// The CLI may have exited on its own (a rejected resume exits before
		// reading any prompt): its exit says more than the broken pipe.
		select {
		case <-ex.exited:
			err = classifyExit(ex.exitErr)
		case <-time.After(a.cfg.StopTimeout):
			err = retryable(task.ErrTypeCLI, err)
		}
		ex.endTurn("", "")
		a.dropExecutor(ctx, ex, "prompt not sent")
		_ = elog.Flush(ctx)
		a.markFailed(ctx, in.TaskID, execID, err)
		return out, err
	}

	if a.takeInterrupt(in.TaskID, in.Turn) {
		log.Info("interrupting the turn as asked before it started")
		if err := ex.interrupt(ctx); err != nil {
			log.Warn("interrupting the turn", "error", err)
		}
	}

	stall := time.NewTicker(min(a.cfg.StallTimeout/4, time.Minute))
	defer stall.Stop()
	for {
		select {
		case <-stall.C:
			if idle := ex.quietFor(); idle >= a.cfg.StallTimeout {
				ex.endTurn("", "")
				a.dropExecutor(ctx, ex, "stalled")
				_ = elog.Flush(ctx)
				err := retryable(task.ErrTypeCLI, fmt.Errorf("claude printed nothing for %s; stopped it", idle.Round(time.Second)))
				a.markFailed(ctx, in.TaskID, execID, err)
				return out, err
			}
			continue
		case o := <-outcome:
			return a.finishTurn(ctx, in, attempt, execID, ex, elog, o, log)

		case <-ex.exited:
			ex.endTurn("", "")
			a.dropExecutor(ctx, ex, "claude exited")
			flushErr := elog.Flush(ctx)
			err := classifyExit(ex.exitErr)
			a.markFailed(ctx, in.TaskID, execID, err)
			return out, errors.Join(err, flushErr)

		case <-ctx.Done():
			// Cancelled (the task was cancelled, or the attempt timed out):
			// stop the turn, then the process; the cleanup must run whatever
			// ctx says.
			cause := context.Cause(ctx)
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*a.cfg.StopTimeout)
			defer cancel()
			ictx, icancel := context.WithTimeout(cctx, a.cfg.StopTimeout)
			_ = ex.interrupt(ictx)
			icancel()
			ex.endTurn("", "")
			a.dropExecutor(cctx, ex, "turn cancelled")
			_ = elog.Flush(cctx)
			a.markStopped(cctx, in.TaskID, execID, cause)
			return out, fmt.Errorf("turn %d cancelled: %w", in.Turn, cause)
		}
	}
}

// finishTurn commits a turn whose result arrived.
func (a *Activities) finishTurn(ctx context.Context, in task.RunTurnInput, attempt int, execID string,
	ex *executor, elog *eventLog, o turnOutcome, log *slog.Logger) (task.RunTurnResult, error) {
	c := o.complete
	out := task.RunTurnResult{
		Attempt: attempt, SessionID: c.SessionID, LastMessageUUID: c.LastMessageUUID, ResultUUID: c.ResultUUID,
		CostUSD: c.CostUSD, InputTokens: c.InputTokens, OutputTokens: c.OutputTokens,
		DurationMS: c.DurationMS, NumTurns: c.NumTurns, Status: task.TurnCompleted, Counted: true,
	}
	if err := elog.Flush(ctx); err != nil {
		ex.endTurn("", "")
		a.dropExecutor(ctx, ex, "events not stored")
		return out, fmt.Errorf("storing the turn's events: %w", err)
	}
	if err := elog.Err(); err != nil {
		ex.endTurn("", "")
		a.dropExecutor(ctx, ex, "events not stored")
		return out, err
	}

	status := store.TurnCompleted
	if c.IsError {
		kind, msg := errorKindAndMessage(o.err, c)
		out.Error = msg
		switch kind {
		case events.ErrorAPI, events.ErrorExecution, events.ErrorProtocol:
			// Worth another attempt: resume where the turn began and send the
			// prompt again. This process holds the failed exchange, so it goes.
			ex.endTurn("", "")
			a.dropExecutor(ctx, ex, "turn failed")
			a.markFailed(ctx, in.TaskID, execID, errors.New(msg))
			return out, retryable(task.ErrTypeAPI, errors.New(msg))
		case events.ErrorResumeRejected:
			ex.endTurn("", "")
			a.dropExecutor(ctx, ex, "resume rejected")
			a.markFailed(ctx, in.TaskID, execID, errors.New(msg))
			return out, nonRetryable(task.ErrTypeResumeRejected, errors.New(msg))
		case events.ErrorInterrupted:
			status, out.Status = store.TurnInterrupted, task.TurnInterrupted
		default: // max turns, budget: the work done stands; the turn ends failed.
			status, out.Status = store.TurnFailed, task.TurnFailed
		}
	}
	if out.LastMessageUUID == "" || out.SessionID == "" {
		ex.endTurn("", "")
		a.dropExecutor(ctx, ex, "no resume point")
		return out, retryable(task.ErrTypeCLI, errors.New("the turn ended without a transcript position to resume at"))
	}

	applied, err := a.commitWithRetry(ctx, store.TurnCommit{
		TaskID: in.TaskID, Turn: in.Turn, ExecutionID: execID,
		SessionID: out.SessionID, LastMessageUUID: out.LastMessageUUID, ResultUUID: out.ResultUUID,
		Status: status, CostUSD: c.CostUSD, InputTokens: c.InputTokens, OutputTokens: c.OutputTokens,
		CacheReadTokens: c.CacheReadInputTokens, CacheCreationTokens: c.CacheCreationInputTokens,
		DurationMS: c.DurationMS, NumTurns: c.NumTurns, IsError: c.IsError, Error: out.Error,
	})
	if err != nil {
		ex.endTurn("", "")
		a.dropExecutor(ctx, ex, "commit failed")
		if errors.Is(err, store.ErrStaleExecution) {
			return out, nonRetryable(task.ErrTypeCLI, fmt.Errorf("a newer attempt owns the task: %w", err))
		}
		return out, fmt.Errorf("committing the turn: %w", err)
	}
	if !applied {
		log.Info("turn accounting was already committed")
	}
	ex.endTurn(out.SessionID, out.LastMessageUUID)
	a.keepOrStop(ctx, ex)
	return out, nil
}

// commitWithRetry commits a turn whose result is in hand, riding out a
// Postgres restart: transient failures are retried with backoff for up to
// CommitRetry (or until ctx ends). Ownership and validation errors are final.
func (a *Activities) commitWithRetry(ctx context.Context, c store.TurnCommit) (bool, error) {
	deadline := time.Now().Add(a.cfg.CommitRetry)
	backoff := 100 * time.Millisecond
	for {
		applied, err := store.CommitTurn(ctx, a.cfg.DB, c)
		if err == nil || errors.Is(err, store.ErrStaleExecution) || errors.Is(err, store.ErrNotFound) || time.Now().After(deadline) {
			return applied, err
		}
		a.cfg.Logger.Warn("committing the turn failed; retrying", "task_id", c.TaskID, "turn", c.Turn, "error", err)
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("%w (then: %w)", err, context.Cause(ctx))
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// heartbeater reports progress (the last stored event) to Temporal from a
// ticker, so that a live attempt is never taken for a lost one.
type heartbeater struct {
	elog atomic.Pointer[eventLog]
	done chan struct{}
	wg   sync.WaitGroup
}

func (a *Activities) startHeartbeat(ctx context.Context) *heartbeater {
	h := &heartbeater{done: make(chan struct{})}
	h.wg.Go(func() {
		t := time.NewTicker(a.cfg.HeartbeatInterval)
		defer t.Stop()
		for {
			var seq int64
			if l := h.elog.Load(); l != nil {
				seq = l.LastSeq()
			}
			activity.RecordHeartbeat(ctx, seq)
			select {
			case <-h.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return h
}

func (h *heartbeater) track(l *eventLog) { h.elog.Store(l) }

func (h *heartbeater) stop() {
	close(h.done)
	h.wg.Wait()
}

// lastAttempt reports whether Temporal will not retry after err: the error is
// not retryable, or the retry policy's attempts are used up.
func lastAttempt(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false // cancelled: the workflow decides what follows
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.NonRetryable() {
		return true
	}
	info := activity.GetInfo(ctx)
	if p := info.RetryPolicy; p != nil && p.MaximumAttempts > 0 {
		return info.Attempt >= p.MaximumAttempts
	}
	return false
}

func validateInput(in task.RunTurnInput) error {
	switch {
	case in.TaskID == "":
		return errors.New("the task id is empty")
	case in.Turn < 1:
		return fmt.Errorf("turn %d is not a turn number", in.Turn)
	case strings.TrimSpace(in.Prompt.Text) == "" && len(in.Prompt.Attachments) == 0:
		return errors.New("the prompt is empty")
	case !claudecode.IsUUID(in.PromptUUID):
		return fmt.Errorf("the prompt uuid %q is not a uuid", in.PromptUUID)
	case !in.Profile.PermissionMode.Valid():
		return fmt.Errorf("unknown permission mode %q", in.Profile.PermissionMode)
	case in.Profile.PermissionMode != "" && in.Profile.PermissionMode != task.Autonomous:
		return fmt.Errorf("permission mode %q is not available yet: tasks run autonomous", in.Profile.PermissionMode)
	}
	return nil
}

// attemptPromptUUID gives each attempt its own transcript uuid for the prompt:
// the first attempt uses the workflow's, later ones a uuid derived from it, so
// that a retried prompt never repeats a uuid already written to the transcript.
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

// lastFailure describes why the previous attempt failed, as far as Temporal says.
func lastFailure(ctx context.Context) string {
	if activity.HasHeartbeatDetails(ctx) {
		return "the previous attempt stopped before its turn ended (worker or CLI lost)"
	}
	return "the previous attempt failed"
}

func errorKindAndMessage(e *events.ErrorInfo, c *events.Completion) (events.ErrorKind, string) {
	if e != nil {
		return e.Kind, e.Message
	}
	return events.ErrorExecution, fmt.Sprintf("turn ended with an error (%s, %s)", c.Subtype, c.TerminalReason)
}

func resultFromRecord(rec store.TurnRecord, attempt int) task.RunTurnResult {
	out := task.RunTurnResult{
		Attempt: attempt, LastMessageUUID: rec.LastMessageUUID, ResultUUID: rec.ResultUUID,
		CostUSD: rec.CostUSD, InputTokens: rec.InputTokens, OutputTokens: rec.OutputTokens,
		DurationMS: rec.DurationMS, NumTurns: rec.NumTurns, Error: rec.Error, Counted: true,
	}
	switch rec.Status {
	case store.TurnInterrupted:
		out.Status = task.TurnInterrupted
	case store.TurnFailed:
		out.Status = task.TurnFailed
	default:
		out.Status = task.TurnCompleted
	}
	return out
}

func retryable(errType string, err error) error {
	return temporal.NewApplicationErrorWithCause(err.Error(), errType, err)
}

func nonRetryable(errType string, err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), errType, err)
}

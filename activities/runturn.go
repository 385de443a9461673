package activities

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/task"
)

// RunTurn runs one attempt of one turn of a task (see engine.Engine.RunTurn).
func (a *Activities) RunTurn(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
	info := activity.GetInfo(ctx)
	attempt := in.AttemptsBefore + int(info.Attempt)
	req := engine.Request{
		TaskID:          in.TaskID,
		Turn:            in.Turn,
		Attempt:         attempt,
		AttemptID:       AttemptID(info.WorkflowExecution.RunID, info.ActivityID, attempt),
		AttemptToken:    info.TaskToken,
		Prompt:          in.Prompt,
		PromptUUID:      in.PromptUUID,
		Workspace:       in.Workspace,
		Repo:            in.Repo,
		Base:            in.Base,
		Fork:            in.Fork,
		Rewound:         in.Rewound,
		Profile:         in.Profile,
		SessionID:       in.SessionID,
		LastMessageUUID: in.LastMessageUUID,
		NewSession:      in.NewSession,
		Grants:          in.Grants,
		ApprovalTimeout: in.ApprovalTimeout,
		Budget:          in.Budget,
		Spent:           in.Spent,
		Heartbeat:       func(lastSeq int64) { activity.RecordHeartbeat(ctx, lastSeq) },
	}
	if p := info.RetryPolicy; p != nil && p.MaximumAttempts > 0 {
		req.MaxAttempts = in.AttemptsBefore + int(p.MaximumAttempts)
	}
	switch {
	case info.Attempt == 1 && in.AttemptsBefore > 0:
		req.PreviousFailure = "the previous attempt's host stopped running the turn (it drained or was lost)"
	case info.Attempt > 1 && activity.HasHeartbeatDetails(ctx):
		req.PreviousFailure = "the previous attempt stopped before its turn ended (its worker or CLI was lost, or it failed)"
	case info.Attempt > 1:
		req.PreviousFailure = "the previous attempt failed"
	}
	tctx, cancel := turnContext(ctx)
	defer cancel()
	res, err := a.engine.RunTurn(tctx, req)
	if err != nil {
		e := engine.AsError(err, task.ErrTypeInternal)
		if e.Type == task.ErrTypeCancelled && ctx.Err() == nil {
			// Refused: the task's cancel is recorded, but Temporal has not asked this attempt
			// to stop yet, so there is no cancellation to acknowledge.
			return task.RunTurnResult{}, temporal.NewNonRetryableApplicationError(e.Error(), e.Type, e)
		}
		return task.RunTurnResult{}, toTemporal(e, task.ReassignDetails{Attempt: attempt})
	}
	return res, nil
}

// AttemptID names one attempt of one activity: the workflow run, the activity and the attempt
// (counted over the turn).
func AttemptID(runID, activityID string, attempt int) string {
	return fmt.Sprintf("%s/%s/%d", runID, activityID, attempt)
}

// ParseAttemptID returns what an AttemptID names; ok is false when id is not one.
func ParseAttemptID(id string) (runID, activityID string, attempt int, ok bool) {
	i := strings.LastIndexByte(id, '/')
	if i < 0 {
		return "", "", 0, false
	}
	n, err := strconv.Atoi(id[i+1:])
	runID, activityID, found := strings.Cut(id[:i], "/")
	if err != nil || n < 1 || !found || runID == "" || activityID == "" {
		return "", "", 0, false
	}
	return runID, activityID, n, true
}

// turnContext is the context the engine runs a turn in: ctx's deadline, and, when ctx ends,
// a cause the engine understands — a worker shutting down becomes WorkerStopping (the turn is
// retried elsewhere), a cancellation the workflow asked for becomes context.Canceled (the task
// was cancelled, or the turn moved), a deadline stays a deadline, and an attempt Temporal no
// longer knows (its heartbeat timed out: Temporal runs the next attempt) becomes
// AttemptTimedOut, so that the turn is left for that attempt (its running CLI, on this host,
// for that attempt to take over: engine.HeartbeatLost).
func turnContext(ctx context.Context) (context.Context, context.CancelFunc) {
	tctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		cause := context.Cause(ctx)
		switch {
		case errors.Is(cause, sdkworker.ErrWorkerShutdown):
			cancel(&engine.Error{Type: task.ErrTypeWorkerStopping, Err: errors.New("the worker is shutting down")})
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			cancel(context.DeadlineExceeded)
		case temporal.IsCanceledError(cause), cause == nil, errors.Is(cause, context.Canceled):
			cancel(fmt.Errorf("%w: %w", context.Canceled, cause))
		default:
			cancel(&engine.Error{Type: task.ErrTypeAttemptTimedOut,
				Err: engine.HeartbeatLost(fmt.Errorf("the attempt was given up by Temporal (its heartbeat timed out, or it was reset): %w", cause))})
		}
	})
	return tctx, func() {
		stop()
		cancel(nil)
	}
}

// toTemporal converts the engine's error into what crosses the Temporal edge: an application
// error of the engine's type and retryability, with the API's retry-after as the next delay;
// a cancellation Temporal asked for is acknowledged as a cancellation. An error of a Reassign
// type carries reassign (the attempt that ended) as its details.
func toTemporal(e *engine.Error, reassign task.ReassignDetails) error {
	if e.Type == task.ErrTypeCancelled {
		return temporal.NewCanceledError(task.ErrTypeCancelled, e.Error())
	}
	opts := temporal.ApplicationErrorOptions{NonRetryable: !e.Retryable()}
	if task.Waits(e.Type) && e.Wait != nil {
		// The turn waits for its account, in the workflow, then runs again: no retry here, and
		// the next attempts continue the count. Not a failure either: benign, so that neither
		// the SDK's log nor its metrics count it as one.
		opts.NonRetryable = true
		opts.Category = temporal.ApplicationErrorCategoryBenign
		opts.Details = []any{*e.Wait, reassign}
	}
	if task.Reassign(e.Type) {
		// A host that drains or is gone cannot take the retry: the workflow gives the turn to
		// another host, continuing the attempts' count.
		opts.NonRetryable = true
		opts.Details = []any{reassign}
	}
	if len(e.Details) > 0 && !task.Reassign(e.Type) {
		opts.Details = e.Details
	}
	if e.RetryAfter > 0 && e.Retryable() {
		opts.NextRetryDelay = e.RetryAfter
	}
	return temporal.NewApplicationErrorWithOptions(e.Error(), e.Type, opts)
}

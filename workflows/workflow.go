package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// Register registers TaskWorkflow under task.WorkflowName.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(TaskWorkflow, workflow.RegisterOptions{Name: task.WorkflowName})
}

// TaskWorkflow runs one task: it takes prompts through the UpdatePrompt Update
// and runs each as one RunTurn activity on the task's host, in order, until the
// task is closed (UpdateClose), stays idle for p.IdleTimeout, or is cancelled.
// Its workflow ID is the task ID.
//
// It returns the final State with status completed, or the Temporal canceled
// error when cancelled. It fails only for invalid params (task.ErrTypeInvalidParams).
func TaskWorkflow(ctx workflow.Context, p task.Params) (task.State, error) {
	return runTask(ctx, p, defaultLimits)
}

func runTask(ctx workflow.Context, p task.Params, lim limits) (task.State, error) {
	p = p.WithDefaults()
	info := workflow.GetInfo(ctx)
	s := newTaskState(p, lim, info.WorkflowExecution.ID, info.FirstRunID)
	s.invalidParams = p.Validate()
	// The prompt the task was started with is turn 1, queued before any Update can be.
	s.takeFirst(ctx)
	// Handlers go in before the first yield, so that the prompt of an
	// Update-with-Start finds them, and before invalid params end the run, so
	// that its validator rejects the prompt naming what is wrong with them.
	if err := s.setHandlers(ctx); err != nil {
		return s.snapshot(), err
	}
	if s.invalidParams != nil {
		msg := fmt.Sprintf("invalid task params: %v", s.invalidParams)
		s.final = task.StatusFailed
		s.setLastError(msg)
		return s.snapshot(), temporal.NewNonRetryableApplicationError(msg, task.ErrTypeInvalidParams, nil)
	}
	s.seedPublished(ctx)
	s.startRecording(ctx)
	s.watchRequests(ctx)
	s.watchHosts(ctx)
	return s.loop(ctx)
}

func (s *taskState) setHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, task.QueryState, func() (task.State, error) {
		return s.snapshot(), nil
	}); err != nil {
		return fmt.Errorf("setting the %s query handler: %w", task.QueryState, err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, task.UpdatePrompt, s.acceptPrompt,
		workflow.UpdateHandlerOptions{Validator: s.validatePrompt, Description: "queue a prompt"}); err != nil {
		return fmt.Errorf("setting the %s update handler: %w", task.UpdatePrompt, err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, task.UpdateInterrupt, s.interrupt,
		workflow.UpdateHandlerOptions{Validator: s.validateInterrupt, Description: "interrupt the running turn"}); err != nil {
		return fmt.Errorf("setting the %s update handler: %w", task.UpdateInterrupt, err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, task.UpdateClose, s.close,
		workflow.UpdateHandlerOptions{Validator: s.validateOpen, Description: "finish after the queued prompts"}); err != nil {
		return fmt.Errorf("setting the %s update handler: %w", task.UpdateClose, err)
	}
	if err := s.setBudgetHandler(ctx); err != nil {
		return err
	}
	if err := s.setRewindHandler(ctx); err != nil {
		return err
	}
	if err := s.setAttentionHandler(ctx); err != nil {
		return err
	}
	return s.setApprovalHandlers(ctx)
}

// loop runs turns until the task ends or continues as new. Search attributes
// are published when the loop is about to wait, so that a queue of prompts
// does not flip the status between turns.
//
// Every decision below reads state and acts on it without yielding in between,
// and Update handlers change state without yielding, so a prompt accepted at
// any point is either seen by the next decision or already in the queue that
// the next turn, the carry or the final wait for handlers picks up.
func (s *taskState) loop(ctx workflow.Context) (task.State, error) {
	allHandlersFinished := func() bool { return workflow.AllHandlersFinished(ctx) }
	handedOver := func() bool { return allHandlersFinished() && s.delivering == 0 }
	for {
		switch {
		case s.wantContinueAsNew(ctx):
			if err := workflow.Await(ctx, handedOver); err != nil {
				return s.cancelled(ctx, err)
			}
			return s.snapshot(), s.continueAsNew(ctx)
		case len(s.pending) > 0 && s.exhausted != nil:
			if err := s.waitForBudget(ctx); err != nil {
				return s.cancelled(ctx, err)
			}
		case len(s.pending) > 0 && s.attention != nil:
			if err := s.waitForAttention(ctx); err != nil {
				return s.cancelled(ctx, err)
			}
		case len(s.pending) > 0 && !s.rewinding:
			if err := s.runNext(ctx); err != nil {
				return s.cancelled(ctx, err)
			}
		case s.closing:
			s.publish(ctx)
			if err := workflow.Await(ctx, allHandlersFinished); err != nil {
				return s.cancelled(ctx, err)
			}
			if len(s.pending) == 0 {
				return s.completed(ctx)
			}
		default:
			if err := s.waitForWork(ctx); err != nil {
				return s.cancelled(ctx, err)
			}
		}
	}
}

// waitForWork waits for a prompt, a close, or a reason to continue as new. An
// idle timeout that passes first closes the task.
func (s *taskState) waitForWork(ctx workflow.Context) error {
	s.publish(ctx)
	ready := func() bool { return (len(s.pending) > 0 && !s.rewinding) || s.closing || s.wantContinueAsNew(ctx) }
	if s.p.IdleTimeout <= 0 {
		return workflow.Await(ctx, ready)
	}
	if workflow.GetVersion(ctx, idleTimerVersion, workflow.DefaultVersion, idleTimerKept) == workflow.DefaultVersion {
		return s.waitWithOwnTimer(ctx, ready)
	}
	idle, err := s.idle.wait(ctx, s.p.IdleTimeout, ready)
	if err != nil {
		return err
	}
	if idle {
		s.closeIdle(ctx)
	}
	return nil
}

// waitWithOwnTimer is waitForWork with an idle timeout in runs from before idleTimerKept: each
// wait starts a timer of its own, cancelled when work comes first.
func (s *taskState) waitWithOwnTimer(ctx workflow.Context, ready func() bool) error {
	ok, err := workflow.AwaitWithOptions(ctx, workflow.AwaitOptions{
		Timeout:      s.p.IdleTimeout,
		TimerOptions: workflow.TimerOptions{Summary: "idle timeout"},
	}, ready)
	if err != nil {
		return err
	}
	if !ok && !ready() {
		s.closeIdle(ctx)
	}
	return nil
}

func (s *taskState) closeIdle(ctx workflow.Context) {
	workflow.GetLogger(ctx).Info("task idle for its idle timeout; closing", "idle_timeout", s.p.IdleTimeout)
	s.closing = true
}

// completed ends the task after a close or an idle timeout.
func (s *taskState) completed(ctx workflow.Context) (task.State, error) {
	s.final = task.StatusCompleted
	s.closeTurnRequests(ctx, 0, "the task ended")
	s.publish(ctx)
	s.recordFinal(ctx)
	s.stopExecutor(ctx)
	workflow.GetLogger(ctx).Info("task completed", "turns", s.totals.Turns, "failed_turns", s.totals.FailedTurns)
	return s.snapshot(), nil
}

// cancelled ends the task after the workflow was cancelled: the running turn's
// activity has been cancelled (and waited for) by then; what remains is to stop
// the executor, from a context the cancellation does not reach.
func (s *taskState) cancelled(ctx workflow.Context, err error) (task.State, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if ctx.Err() == nil && !temporal.IsCanceledError(err) {
		// Nothing but cancellation ends the loop with an error; keep this
		// branch so that a future one cannot pass for a cancellation.
		s.final = task.StatusFailed
		s.setLastError(fmt.Sprintf("task failed: %v", err))
		s.publish(dctx)
		s.recordFinal(dctx)
		return s.snapshot(), fmt.Errorf("running task: %w", err)
	}
	s.final = task.StatusCancelled
	s.closeTurnRequests(dctx, 0, "the task was cancelled")
	s.publish(dctx)
	s.recordFinal(dctx)
	s.stopExecutor(dctx)
	workflow.GetLogger(ctx).Info("task cancelled", "turns", s.totals.Turns)
	return s.snapshot(), temporal.NewCanceledError()
}

package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// validateOpen rejects an Update sent to a task that has ended.
func (s *taskState) validateOpen(workflow.Context) error {
	if err := s.validateParams(); err != nil {
		return err
	}
	if s.final != "" {
		return rejection(task.ErrTypeTaskClosed, fmt.Sprintf("task has ended (%s)", s.final))
	}
	return nil
}

// validateParams rejects every Update sent to a run whose params are invalid,
// saying what is wrong with them.
func (s *taskState) validateParams() error {
	if s.invalidParams != nil {
		return rejection(task.ErrTypeInvalidParams, fmt.Sprintf("invalid task params: %v", s.invalidParams))
	}
	return nil
}

// close is the handler of UpdateClose: no more prompts are accepted, and the
// task ends once the queued ones have run.
func (s *taskState) close(ctx workflow.Context) error {
	if !s.closing {
		workflow.GetLogger(ctx).Info("task closing", "pending", len(s.pending), "running_turn", s.running)
	}
	s.closing = true
	return nil
}

// validateInterrupt is the validator of UpdateInterrupt: validateOpen, whoever asks.
func (s *taskState) validateInterrupt(ctx workflow.Context, _ task.InterruptRequest) error {
	return s.validateOpen(ctx)
}

// interrupt is the handler of UpdateInterrupt. It asks the host to interrupt
// the running turn; the turn's RunTurn activity then ends by itself with status
// interrupted. The activity is not cancelled: cancelling would cost the turn
// its result.
func (s *taskState) interrupt(ctx workflow.Context, req task.InterruptRequest) (task.InterruptResult, error) {
	turn := s.running
	if turn == 0 {
		return task.InterruptResult{}, nil
	}
	// The turn may still be looking for a host.
	if err := workflow.Await(ctx, func() bool { return s.hostQueue != "" || s.running != turn }); err != nil {
		return task.InterruptResult{}, interruptFailed(turn, err)
	}
	if s.running != turn {
		return task.InterruptResult{}, nil
	}
	actx := s.controlContext(ctx, s.hostQueue, s.lim.interruptTimeout, fmt.Sprintf("interrupt turn %d", turn))
	in := task.InterruptTurnInput{TaskID: s.taskID, Turn: turn, By: req.By}
	if err := workflow.ExecuteActivity(actx, task.ActivityInterruptTurn, in).Get(ctx, nil); err != nil {
		return task.InterruptResult{}, interruptFailed(turn, err)
	}
	workflow.GetLogger(ctx).Info("turn interrupted", "turn", turn)
	return task.InterruptResult{Interrupted: true, Turn: turn}, nil
}

// interruptFailed is the Update's answer when the interrupt of turn did not reach it.
func interruptFailed(turn int, err error) error {
	errType, msg := describeError(err)
	return temporal.NewApplicationErrorWithCause(
		fmt.Sprintf("interrupting turn %d: the host did not interrupt it (%s: %s); the turn goes on", turn, errType, msg),
		task.ErrTypeInterruptFailed, err)
}

// stopExecutor asks the task's host to stop the task's executor, so that no
// CLI process outlives the task. It is best effort: a host that is gone has no
// process left to stop.
func (s *taskState) stopExecutor(ctx workflow.Context) {
	if s.hostQueue == "" {
		return
	}
	actx := s.controlContext(ctx, s.hostQueue, s.lim.stopTimeout, "stop executor")
	in := task.InterruptTurnInput{TaskID: s.taskID, Turn: s.lastTurn, Repo: s.p.Repo}
	if err := workflow.ExecuteActivity(actx, task.ActivityStopExecutor, in).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("stopping the executor failed", "host_queue", s.hostQueue, "error", err)
	}
}

// controlContext carries the options of the short activities sent to a host: they go to its
// control queue, which turns do not fill.
func (s *taskState) controlContext(ctx workflow.Context, host string, timeout time.Duration, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              task.ControlQueue(host),
		ScheduleToStartTimeout: timeout,
		StartToCloseTimeout:    timeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: s.lim.retryInitial,
			MaximumAttempts: int32(s.lim.controlAttempts),
		},
		Summary: summary,
	})
}

package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// rewindTimeout bounds one attempt of the Rewind activity: a fetch and a push of a few refs, and
// one transaction.
const rewindTimeout = 2 * time.Minute

// setRewindHandler registers UpdateRewind. A handler adds nothing to a history until it is
// called, so histories recorded before it replay as they did.
func (s *taskState) setRewindHandler(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, task.UpdateRewind, s.rewind,
		workflow.UpdateHandlerOptions{Validator: s.validateRewind, Description: "go back to an earlier turn, conversation and files"}); err != nil {
		return fmt.Errorf("setting the %s update handler: %w", task.UpdateRewind, err)
	}
	return nil
}

// validateRewind refuses a rewind the task cannot take now: one of a task with no managed
// workspace, one while a turn runs or waits, one to a turn the task has not reached.
func (s *taskState) validateRewind(ctx workflow.Context, r task.RewindRequest) error {
	if err := s.validateOpen(ctx); err != nil {
		return err
	}
	switch {
	case s.p.Repo == "":
		return rejection(task.ErrTypeCannotRewind, "the task has no managed workspace (it was started with a folder, not a repository): its files cannot go back")
	case s.running != 0 || len(s.pending) > 0 || s.rewinding:
		return rejection(task.ErrTypeCannotRewind, "a turn runs or waits in the task: interrupt it, or let the queue finish, then rewind")
	case r.Turn < 0 || r.Turn > s.lastTurn:
		return rejection(task.ErrTypeCannotRewind, fmt.Sprintf("turn %d is not one the task has reached: give 0 (its start) to %d", r.Turn, s.lastTurn))
	}
	return nil
}

// rewind is the handler of UpdateRewind: the Rewind activity sets the task's committed point
// (checkpoint refs, executor row) back to the turn's end, and the task's next turn resumes its
// conversation there, in the files of the turn's checkpoint (the engine restores a worktree that
// is not at its committed checkpoint). Prompts that arrive meanwhile wait for it.
func (s *taskState) rewind(ctx workflow.Context, r task.RewindRequest) (task.Rewound, error) {
	s.rewinding = true
	defer func() { s.rewinding = false }()
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: rewindTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        s.lim.retryInitial,
			MaximumAttempts:        int32(s.lim.controlAttempts),
			NonRetryableErrorTypes: []string{task.ErrTypeCannotRewind},
		},
		Summary: fmt.Sprintf("rewind to turn %d", r.Turn),
	})
	var res task.Rewound
	in := task.RewindInput{TaskID: s.taskID, Repo: s.p.Repo, Turn: r.Turn}
	if err := workflow.ExecuteActivity(actx, task.ActivityRewind, in).Get(ctx, &res); err != nil {
		errType, msg := describeError(err)
		if errType != task.ErrTypeCannotRewind {
			errType = task.ErrTypeStoreUnavailable
		}
		return res, temporal.NewApplicationErrorWithCause(fmt.Sprintf("rewinding to turn %d: %s", r.Turn, msg), errType, err)
	}
	s.sessionID, s.lastUUID = res.SessionID, res.LastMessageUUID
	s.rewound = true
	workflow.GetLogger(ctx).Info("task rewound", "turn", r.Turn, "set_aside", res.SetAside)
	return res, nil
}

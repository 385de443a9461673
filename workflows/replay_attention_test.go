package workflows

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/task"
)

// A task whose session could not be resumed, on a real server, leaves a history that replays:
// the version marker of the attention wait, the wait itself, the person's choice (retry), and the
// refused prompt run again as the next turn in the same session.
func TestReplayNeedsAttention(t *testing.T) {
	t.Parallel()
	r := newServerRig(t)
	id := uuid.NewString()[:8]
	shared, host := "shared-"+id, task.HostQueue("host-"+id)
	var calls atomic.Int32
	var sessions [4]atomic.Value
	r.startWorkers(
		r.sharedWorker(shared, func(context.Context) (string, error) { return host, nil }),
		r.hostWorker(host, func(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
			calls.Add(1)
			sessions[min(in.Turn, 3)].Store(in.SessionID)
			if in.Turn == 2 {
				return task.RunTurnResult{}, temporal.NewNonRetryableApplicationError("claude rejected the resume: No message found", task.ErrTypeResumeRejected, nil)
			}
			return task.RunTurnResult{Status: task.TurnCompleted, SessionID: "s1", LastMessageUUID: uuid.NewString(),
				Attempt: int(activity.GetInfo(ctx).Attempt)}, nil
		}))

	taskID := "task-" + id
	r.startTask(taskID, shared, params(), "one", nil)
	r.mustUpdate(taskID, task.UpdatePrompt, "p2", nil, task.Prompt{Text: "two"})
	require.Eventually(t, func() bool { return r.state(taskID).Status == task.StatusNeedsAttention },
		time.Minute, 20*time.Millisecond, "the task needs attention")
	assert.EqualValues(t, 2, calls.Load(), "nothing runs while the task needs attention")
	r.mustUpdate(taskID, task.UpdateResolve, "r1", nil, task.AttentionChoice{Choice: task.ResolveRetry})
	r.mustUpdate(taskID, task.UpdateClose, "close", nil)
	st, runID := r.finish(taskID)
	assert.Equal(t, 3, st.Totals.Turns)
	assert.Equal(t, 1, st.Totals.FailedTurns)
	assert.Equal(t, "s1", sessions[3].Load(), "the retried prompt resumes the same session")

	hist := r.history(taskID, runID)
	assert.Contains(t, versionMarkers(t, hist), attentionChangeID)
	replay(t, hist)
}

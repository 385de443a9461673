package workflows

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/activity"

	"github.com/drover-run/drover/task"
)

// A turn that waited for its account on a real server leaves a history that replays: the
// version marker of "account-waits", the durable timer until the wait's retry time, the search
// attributes of the wait, and RunTurn again, continuing the attempts' count.
func TestReplayAccountWait(t *testing.T) {
	t.Parallel()
	r := newServerRig(t)
	id := uuid.NewString()[:8]
	shared, host := "shared-"+id, task.HostQueue("host-"+id)
	var calls, before atomic.Int32
	r.startWorkers(
		r.sharedWorker(shared, func(context.Context) (string, error) { return host, nil }),
		r.hostWorker(host, func(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
			if calls.Add(1) == 1 {
				now := time.Now().UTC()
				return task.RunTurnResult{}, waitError(task.ErrTypeAccountLimited, task.Wait{Account: "acct-replay", Reason: task.WaitUsageLimit,
					LimitType: "five_hour", Since: now, ResetsAt: now.Add(time.Second).Truncate(time.Second), RetryAt: now.Add(1500 * time.Millisecond)}, 1)
			}
			before.Store(int32(in.AttemptsBefore))
			return task.RunTurnResult{Status: task.TurnCompleted, SessionID: uuid.NewString(), LastMessageUUID: uuid.NewString(),
				Attempt: in.AttemptsBefore + int(activity.GetInfo(ctx).Attempt)}, nil
		}))

	taskID := "task-" + id
	r.startTask(taskID, shared, params(), "one", nil)
	r.mustUpdate(taskID, task.UpdateClose, "close", nil)
	st, runID := r.finish(taskID)
	assert.Equal(t, 1, st.Totals.Turns)
	assert.Zero(t, st.Totals.FailedTurns, st.LastError)
	assert.EqualValues(t, 1, before.Load(), "the attempt after the wait numbers on")

	hist := r.history(taskID, runID)
	var timers, waitUpserts int
	for _, ev := range hist.Events {
		if ev.GetTimerStartedEventAttributes() != nil {
			timers++
		}
		if a := ev.GetUpsertWorkflowSearchAttributesEventAttributes(); a != nil {
			if _, ok := a.GetSearchAttributes().GetIndexedFields()[task.SearchLimitResetsAt]; ok {
				waitUpserts++
			}
		}
	}
	assert.Contains(t, versionMarkers(t, hist), "account-waits")
	assert.Equal(t, 1, timers, "one durable timer for the wait")
	assert.Equal(t, 2, waitUpserts, "DroverLimitResetsAt set for the wait and unset after it")
	replay(t, hist)
}

package workflows

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/activity"

	"github.com/drover-run/drover/task"
)

// A turn moved off a lost host on a real server leaves a history that replays: the version
// marker of "reassign-lost-host", AssignHost again, and RunTurn on the new host's queue; the
// task's next turn on that host is scheduled at the warm turns' priority.
func TestReplayReassignedTurn(t *testing.T) {
	t.Parallel()
	r := newServerRig(t)
	id := uuid.NewString()[:8]
	shared, lost, live := "shared-"+id, task.HostQueue("lost-"+id), task.HostQueue("live-"+id)
	var assigned, before atomic.Int32
	r.startWorkers(
		r.sharedWorker(shared, func(context.Context) (string, error) {
			if assigned.Add(1) == 1 {
				return lost, nil
			}
			return live, nil
		}),
		r.hostWorker(lost, func(context.Context, task.RunTurnInput) (task.RunTurnResult, error) {
			return task.RunTurnResult{}, reassignError(task.ErrTypeHostLost, 1)
		}),
		r.hostWorker(live, func(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
			if in.Turn == 1 {
				before.Store(int32(in.AttemptsBefore))
			}
			return task.RunTurnResult{Status: task.TurnCompleted, SessionID: uuid.NewString(), LastMessageUUID: uuid.NewString(),
				Attempt: in.AttemptsBefore + int(activity.GetInfo(ctx).Attempt)}, nil
		}))

	taskID := "task-" + id
	r.startTask(taskID, shared, params(), "one", nil)
	r.mustUpdate(taskID, task.UpdatePrompt, "p2", nil, task.Prompt{Text: "two"})
	r.mustUpdate(taskID, task.UpdateClose, "close", nil)
	st, runID := r.finish(taskID)
	assert.Equal(t, live, st.HostQueue)
	assert.Equal(t, 2, st.Totals.Turns)
	assert.Zero(t, st.Totals.FailedTurns, st.LastError)
	assert.EqualValues(t, 1, before.Load(), "the new host numbers its attempts on")

	hist := r.history(taskID, runID)
	var markers int
	versions := versionMarkers(t, hist)
	for _, v := range versions {
		if v == "reassign-lost-host" {
			markers++
		}
	}
	var turnQueues []string
	var priorities []int32
	for _, ev := range hist.Events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == task.ActivityRunTurn {
			turnQueues = append(turnQueues, a.GetTaskQueue().GetName())
			priorities = append(priorities, a.GetPriority().GetPriorityKey())
		}
	}
	assert.Equal(t, 1, markers, "the move is recorded under its version (versions: %q)", versions)
	assert.Equal(t, []string{lost, live, live}, turnQueues)
	assert.Equal(t, []int32{0, 0, warmTurnPriority}, priorities,
		"the first turn and the moved one at the default priority; the next turn on the same host first")
	replay(t, hist)
}

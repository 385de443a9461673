package workflows

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/drover-run/drover/internal/devserver"
	"github.com/drover-run/drover/internal/testkit/temporaltest"
	"github.com/drover-run/drover/task"
)

// A turn moved off a lost host on a real server leaves a history that replays: the version
// marker of "reassign-lost-host", AssignHost again, and RunTurn on the new host's queue; the
// task's next turn on that host is scheduled on its warm queue, at the warm turns' priority.
func TestReplayReassignedTurn(t *testing.T) {
	t.Parallel()
	srv := temporaltest.Start(t, devserver.SearchAttributeFlags(SearchAttributes()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.Address(), Namespace: srv.Namespace(), Logger: logger})
	require.NoError(t, err)
	t.Cleanup(c.Close)

	id := uuid.NewString()[:8]
	shared, lost, live := "shared-"+id, task.HostQueue("lost-"+id), task.HostQueue("live-"+id)
	var assigned atomic.Int32
	sw := worker.New(c, shared, worker.Options{})
	Register(sw)
	sw.RegisterActivityWithOptions(func(context.Context) (string, error) {
		if assigned.Add(1) == 1 {
			return lost, nil
		}
		return live, nil
	}, activity.RegisterOptions{Name: task.ActivityAssignHost})
	sw.RegisterActivityWithOptions(func(context.Context, task.StateRecord) error { return nil },
		activity.RegisterOptions{Name: task.ActivityRecordState})
	lw := worker.New(c, lost, worker.Options{})
	lw.RegisterActivityWithOptions(func(context.Context, task.RunTurnInput) (task.RunTurnResult, error) {
		return task.RunTurnResult{}, reassignError(task.ErrTypeHostLost, 1)
	}, activity.RegisterOptions{Name: task.ActivityRunTurn})
	hw := newHostWorker(c, live)
	var before atomic.Int32
	hw.RegisterActivityWithOptions(func(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
		if in.Turn == 1 {
			before.Store(int32(in.AttemptsBefore))
		}
		return task.RunTurnResult{Status: task.TurnCompleted, SessionID: uuid.NewString(), LastMessageUUID: uuid.NewString(),
			Attempt: in.AttemptsBefore + int(activity.GetInfo(ctx).Attempt)}, nil
	}, activity.RegisterOptions{Name: task.ActivityRunTurn})
	for _, w := range []worker.Worker{sw, lw, hw} {
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
	}

	taskID := "task-" + id
	start := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{ID: taskID, TaskQueue: shared,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}, task.WorkflowName, params())
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: task.UpdatePrompt, UpdateID: "p1",
			Args: []any{task.Prompt{Text: "one"}}, WaitForStage: client.WorkflowUpdateStageCompleted}})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	h, err = c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: taskID, UpdateName: task.UpdatePrompt,
		UpdateID: "p2", Args: []any{task.Prompt{Text: "two"}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	h, err = c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: taskID, UpdateName: task.UpdateClose,
		UpdateID: "close", WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	run, err := start.Get(ctx)
	require.NoError(t, err)
	var st task.State
	require.NoError(t, run.Get(ctx, &st))
	assert.Equal(t, live, st.HostQueue)
	assert.Equal(t, 2, st.Totals.Turns)
	assert.Zero(t, st.Totals.FailedTurns, st.LastError)
	assert.EqualValues(t, 1, before.Load(), "the new host numbers its attempts on")

	var hist historypb.History
	iter := c.GetWorkflowHistory(ctx, taskID, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		hist.Events = append(hist.Events, ev)
	}
	var markers int
	var versions []string
	var turnQueues []string
	var priorities []int32
	for _, ev := range hist.Events {
		if m := ev.GetMarkerRecordedEventAttributes(); m.GetMarkerName() == "Version" {
			var change string
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["change-id"], &change))
			versions = append(versions, change)
			if change == "reassign-lost-host" {
				markers++
			}
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == task.ActivityRunTurn {
			turnQueues = append(turnQueues, a.GetTaskQueue().GetName())
			priorities = append(priorities, a.GetPriority().GetPriorityKey())
		}
	}
	assert.Equal(t, 1, markers, "the move is recorded under its version (versions: %q)", versions)
	assert.Equal(t, []string{lost, live, task.WarmQueue(live)}, turnQueues)
	assert.Equal(t, []int32{0, 0, warmTurnPriority}, priorities,
		"the first turn and the moved one at the default priority; the next turn on the same host first")

	replayer := worker.NewWorkflowReplayer()
	Register(replayer)
	require.NoError(t, replayer.ReplayWorkflowHistory(logger, &hist), "the history replays")
}

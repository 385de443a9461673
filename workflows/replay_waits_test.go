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
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/drover-run/drover/internal/devserver"
	"github.com/drover-run/drover/internal/testkit/temporaltest"
	"github.com/drover-run/drover/task"
)

// A turn that waited for its account on a real server leaves a history that replays: the
// version marker of "account-waits", the durable timer until the wait's retry time, the search
// attributes of the wait, and RunTurn again, continuing the attempts' count.
func TestReplayAccountWait(t *testing.T) {
	t.Parallel()
	srv := temporaltest.Start(t, devserver.SearchAttributeFlags(SearchAttributes()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.Address(), Namespace: srv.Namespace(), Logger: logger})
	require.NoError(t, err)
	t.Cleanup(c.Close)

	id := uuid.NewString()[:8]
	shared, host := "shared-"+id, task.HostQueue("host-"+id)
	sw := worker.New(c, shared, worker.Options{})
	Register(sw)
	sw.RegisterActivityWithOptions(func(context.Context) (string, error) { return host, nil },
		activity.RegisterOptions{Name: task.ActivityAssignHost})
	sw.RegisterActivityWithOptions(func(context.Context, task.StateRecord) error { return nil },
		activity.RegisterOptions{Name: task.ActivityRecordState})
	hw := newHostWorker(c, host)
	var calls, before atomic.Int32
	hw.RegisterActivityWithOptions(func(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
		if calls.Add(1) == 1 {
			now := time.Now().UTC()
			return task.RunTurnResult{}, waitError(task.ErrTypeAccountLimited, task.Wait{Account: "acct-replay", Reason: task.WaitUsageLimit,
				LimitType: "five_hour", Since: now, ResetsAt: now.Add(time.Second).Truncate(time.Second), RetryAt: now.Add(1500 * time.Millisecond)}, 1)
		}
		before.Store(int32(in.AttemptsBefore))
		return task.RunTurnResult{Status: task.TurnCompleted, SessionID: uuid.NewString(), LastMessageUUID: uuid.NewString(),
			Attempt: in.AttemptsBefore + int(activity.GetInfo(ctx).Attempt)}, nil
	}, activity.RegisterOptions{Name: task.ActivityRunTurn})
	hw.RegisterActivityWithOptions(func(context.Context, task.InterruptTurnInput) error { return nil },
		activity.RegisterOptions{Name: task.ActivityStopExecutor})
	for _, w := range []worker.Worker{sw, hw} {
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
	h, err = c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: taskID, UpdateName: task.UpdateClose,
		UpdateID: "close", WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	run := c.GetWorkflow(ctx, taskID, "")
	var st task.State
	require.NoError(t, run.Get(ctx, &st))
	assert.Equal(t, 1, st.Totals.Turns)
	assert.Zero(t, st.Totals.FailedTurns, st.LastError)
	assert.EqualValues(t, 1, before.Load(), "the attempt after the wait numbers on")

	var hist historypb.History
	iter := c.GetWorkflowHistory(ctx, taskID, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		hist.Events = append(hist.Events, ev)
	}
	var timers, waitUpserts int
	var versions []string
	for _, ev := range hist.Events {
		if m := ev.GetMarkerRecordedEventAttributes(); m.GetMarkerName() == "Version" {
			versions = append(versions, string(m.GetDetails()["change-id"].GetPayloads()[0].GetData()))
		}
		if ev.GetTimerStartedEventAttributes() != nil {
			timers++
		}
		if a := ev.GetUpsertWorkflowSearchAttributesEventAttributes(); a != nil {
			if _, ok := a.GetSearchAttributes().GetIndexedFields()[task.SearchLimitResetsAt]; ok {
				waitUpserts++
			}
		}
	}
	assert.Contains(t, versions, `"account-waits"`)
	assert.Equal(t, 1, timers, "one durable timer for the wait")
	assert.Equal(t, 2, waitUpserts, "DroverLimitResetsAt set for the wait and unset after it")

	replayer := worker.NewWorkflowReplayer()
	Register(replayer)
	require.NoError(t, replayer.ReplayWorkflowHistory(logger, &hist), "the history replays")
}

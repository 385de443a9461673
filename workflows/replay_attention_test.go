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
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/drover-run/drover/internal/devserver"
	"github.com/drover-run/drover/internal/testkit/temporaltest"
	"github.com/drover-run/drover/task"
)

// A task whose session could not be resumed, on a real server, leaves a history that replays:
// the version marker of the attention wait, the wait itself, the person's choice (retry), and the
// refused prompt run again as the next turn in the same session.
func TestReplayNeedsAttention(t *testing.T) {
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
	var calls atomic.Int32
	var sessions [4]atomic.Value
	hw.RegisterActivityWithOptions(func(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
		calls.Add(1)
		sessions[min(in.Turn, 3)].Store(in.SessionID)
		if in.Turn == 2 {
			return task.RunTurnResult{}, temporal.NewNonRetryableApplicationError("claude rejected the resume: No message found", task.ErrTypeResumeRejected, nil)
		}
		return task.RunTurnResult{Status: task.TurnCompleted, SessionID: "s1", LastMessageUUID: uuid.NewString(),
			Attempt: int(activity.GetInfo(ctx).Attempt)}, nil
	}, activity.RegisterOptions{Name: task.ActivityRunTurn})
	hw.RegisterActivityWithOptions(func(context.Context, task.InterruptTurnInput) error { return nil },
		activity.RegisterOptions{Name: task.ActivityStopExecutor})
	for _, w := range []worker.Worker{sw, hw} {
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
	}

	taskID := "task-" + id
	update := func(name, updateID string, args ...any) {
		t.Helper()
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: taskID, UpdateName: name,
			UpdateID: updateID, Args: args, WaitForStage: client.WorkflowUpdateStageCompleted})
		require.NoError(t, err)
		require.NoError(t, h.Get(ctx, nil))
	}
	start := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{ID: taskID, TaskQueue: shared,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}, task.WorkflowName, params())
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: task.UpdatePrompt, UpdateID: "p1",
			Args: []any{task.Prompt{Text: "one"}}, WaitForStage: client.WorkflowUpdateStageCompleted}})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	update(task.UpdatePrompt, "p2", task.Prompt{Text: "two"})
	var st task.State
	require.Eventually(t, func() bool {
		v, err := c.QueryWorkflow(ctx, taskID, "", task.QueryState)
		return err == nil && v.Get(&st) == nil && st.Status == task.StatusNeedsAttention
	}, time.Minute, 20*time.Millisecond, "the task needs attention")
	assert.EqualValues(t, 2, calls.Load(), "nothing runs while the task needs attention")
	update(task.UpdateResolve, "r1", task.AttentionChoice{Choice: task.ResolveRetry})
	update(task.UpdateClose, "close")
	run := c.GetWorkflow(ctx, taskID, "")
	require.NoError(t, run.Get(ctx, &st))
	assert.Equal(t, 3, st.Totals.Turns)
	assert.Equal(t, 1, st.Totals.FailedTurns)
	assert.Equal(t, "s1", sessions[3].Load(), "the retried prompt resumes the same session")

	var hist historypb.History
	iter := c.GetWorkflowHistory(ctx, taskID, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		hist.Events = append(hist.Events, ev)
	}
	var versions []string
	for _, ev := range hist.Events {
		if m := ev.GetMarkerRecordedEventAttributes(); m.GetMarkerName() == "Version" {
			versions = append(versions, string(m.GetDetails()["change-id"].GetPayloads()[0].GetData()))
		}
	}
	assert.Contains(t, versions, `"`+attentionChangeID+`"`)

	replayer := worker.NewWorkflowReplayer()
	Register(replayer)
	require.NoError(t, replayer.ReplayWorkflowHistory(logger, &hist), "the history replays")
}

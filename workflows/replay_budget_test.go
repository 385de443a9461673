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

// A task whose budget ran out on a real server leaves a history that replays: the version marker
// of "task-budget", a turn refused for its budget and run again once the budget was raised, a
// turn cut for the budget, a prompt refused meanwhile, and the turn that continues the cut one.
func TestReplayBudget(t *testing.T) {
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
	hw.RegisterActivityWithOptions(func(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
		res := task.RunTurnResult{Status: task.TurnCompleted, SessionID: "s", LastMessageUUID: uuid.NewString(),
			CostUSD: 0.25, DurationMS: 100, Attempt: int(activity.GetInfo(ctx).Attempt)}
		switch calls.Add(1) {
		case 1: // refused: the host's figures say the budget is spent
			x := task.BudgetExhausted{Bound: task.BoundCost, Budget: in.Budget, CostUSD: 1, Turn: in.Turn, At: time.Now().UTC()}
			return task.RunTurnResult{}, temporal.NewNonRetryableApplicationError("spent", task.ErrTypeBudgetExhausted, nil, x, task.Budget{})
		case 2: // runs after the raise, and is cut
			res.Status = task.TurnInterrupted
			res.BudgetExhausted = &task.BudgetExhausted{Bound: task.BoundCost, Budget: in.Budget, CostUSD: 2.5,
				Turns: 1, Turn: in.Turn, At: time.Now().UTC(), Cut: true}
		}
		return res, nil
	}, activity.RegisterOptions{Name: task.ActivityRunTurn})
	hw.RegisterActivityWithOptions(func(context.Context, task.InterruptTurnInput) error { return nil },
		activity.RegisterOptions{Name: task.ActivityStopExecutor})
	for _, w := range []worker.Worker{sw, hw} {
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
	}

	taskID := "task-" + id
	p := params()
	p.Budget = task.Budget{MaxCostUSD: 1}
	start := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{ID: taskID, TaskQueue: shared,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}, task.WorkflowName, p)
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: task.UpdatePrompt, UpdateID: "p1",
			Args: []any{task.Prompt{Text: "one"}}, WaitForStage: client.WorkflowUpdateStageCompleted}})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	state := func() task.State {
		v, err := c.QueryWorkflow(ctx, taskID, "", task.QueryState)
		require.NoError(t, err)
		var st task.State
		require.NoError(t, v.Get(&st))
		return st
	}
	spent := func(what string) {
		require.Eventually(t, func() bool { st := state(); return st.Status == task.StatusBudgetExhausted && st.RunningTurn == 0 },
			time.Minute, 50*time.Millisecond, what)
	}
	update := func(name, updateID string, args ...any) error {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: taskID, UpdateName: name,
			UpdateID: updateID, Args: args, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err != nil {
			return err
		}
		return h.Get(ctx, nil)
	}
	raise := func(updateID string, usd float64) {
		require.NoError(t, update(task.UpdateBudget, updateID, task.BudgetChange{MaxCostUSD: &usd}))
	}
	spent("the first turn refused")
	raise("b1", 2)
	spent("the first turn cut")
	err = update(task.UpdatePrompt, "p2", task.Prompt{Text: "two"})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr, "a prompt is refused while the budget is spent")
	assert.Equal(t, task.ErrTypeBudgetExhausted, appErr.Type())
	raise("b2", 10)
	require.Eventually(t, func() bool { st := state(); return st.Totals.Turns == 2 && st.RunningTurn == 0 },
		time.Minute, 50*time.Millisecond, "the cut turn continued")
	require.NoError(t, update(task.UpdateClose, "close"))
	run := c.GetWorkflow(ctx, taskID, "")
	var st task.State
	require.NoError(t, run.Get(ctx, &st))
	assert.Equal(t, task.StatusCompleted, st.Status)
	assert.EqualValues(t, 3, calls.Load())
	assert.Equal(t, 2, st.Totals.Turns)
	assert.Equal(t, 200*time.Millisecond, st.Totals.WorkDuration)

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
	assert.Contains(t, versions, `"`+budgetChangeID+`"`)

	replayer := worker.NewWorkflowReplayer()
	Register(replayer)
	require.NoError(t, replayer.ReplayWorkflowHistory(logger, &hist), "the history replays")
}

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

// A task whose budget ran out on a real server leaves a history that replays: the version marker
// of "task-budget", a turn refused for its budget and run again once the budget was raised, a
// turn cut for the budget, a prompt refused meanwhile, and the turn that continues the cut one.
func TestReplayBudget(t *testing.T) {
	t.Parallel()
	r := newServerRig(t)
	id := uuid.NewString()[:8]
	shared, host := "shared-"+id, task.HostQueue("host-"+id)
	var calls atomic.Int32
	r.startWorkers(
		r.sharedWorker(shared, func(context.Context) (string, error) { return host, nil }),
		r.hostWorker(host, func(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
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
		}))

	taskID := "task-" + id
	p := params()
	p.Budget = task.Budget{MaxCostUSD: 1}
	r.startTask(taskID, shared, p, "one", nil)
	spent := func(what string) {
		require.Eventually(t, func() bool {
			st := r.state(taskID)
			return st.Status == task.StatusBudgetExhausted && st.RunningTurn == 0
		},
			time.Minute, 50*time.Millisecond, what)
	}
	raise := func(updateID string, usd float64) {
		r.mustUpdate(taskID, task.UpdateBudget, updateID, nil, task.BudgetChange{MaxCostUSD: &usd})
	}
	spent("the first turn refused")
	raise("b1", 2)
	spent("the first turn cut")
	err := r.update(taskID, task.UpdatePrompt, "p2", nil, task.Prompt{Text: "two"})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr, "a prompt is refused while the budget is spent")
	assert.Equal(t, task.ErrTypeBudgetExhausted, appErr.Type())
	raise("b2", 10)
	require.Eventually(t, func() bool { st := r.state(taskID); return st.Totals.Turns == 2 && st.RunningTurn == 0 },
		time.Minute, 50*time.Millisecond, "the cut turn continued")
	r.mustUpdate(taskID, task.UpdateClose, "close", nil)
	st, runID := r.finish(taskID)
	assert.Equal(t, task.StatusCompleted, st.Status)
	assert.EqualValues(t, 3, calls.Load())
	assert.Equal(t, 2, st.Totals.Turns)
	assert.Equal(t, 200*time.Millisecond, st.Totals.WorkDuration)

	hist := r.history(taskID, runID)
	assert.Contains(t, versionMarkers(t, hist), budgetChangeID)
	replay(t, hist)
}

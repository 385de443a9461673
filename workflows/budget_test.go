package workflows

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/task"
)

func ptr[T any](v T) *T { return &v }

func budgetParams(b task.Budget) task.Params {
	p := params()
	p.Budget = b
	return p
}

// budgetError asserts that err is the typed refusal of a task whose budget is spent, with x's bound.
func budgetError(t *testing.T, err error, bound task.BudgetBound) {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an application error, got %v", err)
	assert.Equal(t, task.ErrTypeBudgetExhausted, appErr.Type())
	var x task.BudgetExhausted
	require.NoError(t, appErr.Details(&x))
	assert.Equal(t, bound, x.Bound)
}

func TestBudgetCutTurnContinuesOnceRaised(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	host := task.Budget{MaxTurns: 50}
	rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
		res, _ := completeTurn(c)
		res.DurationMS = 1500
		res.HostBudget = host
		if c.In.Turn == 2 {
			res.Status = task.TurnInterrupted
			res.FailedAttemptsCostUSD = 0.125
			res.BudgetExhausted = &task.BudgetExhausted{Bound: task.BoundCost, Budget: c.In.Budget.WithDefault(host),
				CostUSD: 0.625, Turns: 2, Turn: 2, Cut: true}
		}
		return res, nil
	})
	var refused, raised, low *update
	var spent, after task.State
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "one"); sendPrompt(env, "p2", "two") }, 0)
	env.RegisterDelayedCallback(func() {
		spent = query(t, env)
		refused = sendPrompt(env, "p3", "three")
		low = sendUpdate(env, task.UpdateBudget, "b0", task.BudgetChange{MaxCostUSD: ptr(0.5)})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		raised = sendUpdate(env, task.UpdateBudget, "b1", task.BudgetChange{MaxCostUSD: ptr(2.0), By: "ana"})
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		after = query(t, env)
		sendUpdate(env, task.UpdateClose, "close")
	}, 3*time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, budgetParams(task.Budget{MaxCostUSD: 0.4}))
	st := result(t, env)

	assert.Equal(t, task.StatusBudgetExhausted, spent.Status)
	require.NotNil(t, spent.BudgetExhausted)
	assert.Equal(t, task.BudgetExhausted{Bound: task.BoundCost, Budget: task.Budget{MaxCostUSD: 0.4, MaxTurns: 50},
		CostUSD: 0.625, Turns: 2, Turn: 2, Cut: true}, *spent.BudgetExhausted)
	assert.InDelta(t, 0.625, spent.Totals.BilledCostUSD(), 1e-9, "the failed attempts' cost is billed")
	assert.Equal(t, 3*time.Second, spent.Totals.WorkDuration)
	assert.Equal(t, task.Budget{MaxCostUSD: 0.4, MaxTurns: 50}, spent.Budget, "the task's budget completed by its host's default")
	require.True(t, refused.rejected, "a prompt sent while the budget is spent is refused")
	budgetError(t, refused.err, task.BoundCost)
	assert.Equal(t, task.Budget{MaxCostUSD: 0.5, MaxTurns: 50}, as[task.Budget](t, low), "a raise that leaves no room is taken")

	assert.Equal(t, task.Budget{MaxCostUSD: 2, MaxTurns: 50}, as[task.Budget](t, raised))
	assert.Nil(t, after.BudgetExhausted)
	assert.Empty(t, spent.BudgetBy, "a budget as the task was started was changed by nobody")
	assert.Equal(t, "ana", after.BudgetBy, "who changed the budget last")
	calls := rec.runCalls()
	require.Equal(t, []int{1, 2, 3}, turnsOf(calls), "the cut turn is continued by a turn of its own")
	assert.Equal(t, continueAfterBudget, calls[2].In.Prompt.Text)
	assert.Equal(t, task.Budget{MaxCostUSD: 0.4}, calls[0].In.Budget, "turns carry the task's own budget")
	require.NotNil(t, calls[1].In.Spent)
	assert.Equal(t, 1, calls[1].In.Spent.Turns, "and what the task spent before them")
	assert.Equal(t, task.Budget{MaxCostUSD: 2}, calls[2].In.Budget)
	assert.Equal(t, task.StatusCompleted, st.Status)
}

func TestBudgetRefusedTurnRunsOnceRaised(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	host := task.Budget{MaxCostUSD: 0.3}
	refusals := 0
	rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
		if c.In.Turn == 2 && c.In.Budget.MaxCostUSD == 0 {
			refusals++
			x := task.BudgetExhausted{Bound: task.BoundCost, Budget: host, CostUSD: 0.35, Turns: 1, Turn: 2}
			return task.RunTurnResult{}, temporal.NewNonRetryableApplicationError("budget spent", task.ErrTypeBudgetExhausted, nil, x, host)
		}
		return completeTurn(c)
	})
	var spent task.State
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "one"); sendPrompt(env, "p2", "two") }, 0)
	env.RegisterDelayedCallback(func() {
		spent = query(t, env)
		sendUpdate(env, task.UpdateBudget, "b1", task.BudgetChange{MaxCostUSD: ptr(5.0)})
	}, time.Minute)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, 2*time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, params())
	st := result(t, env)

	assert.Equal(t, 1, refusals, "a refusal is not retried")
	assert.Equal(t, task.StatusBudgetExhausted, spent.Status)
	require.Len(t, spent.Pending, 1, "the refused prompt waits at the head of the queue")
	assert.Equal(t, 2, spent.Pending[0].Turn)
	assert.Equal(t, 1, spent.Totals.Turns, "a refused turn is not counted")
	assert.InDelta(t, 0.1, spent.Totals.FailedAttemptsCostUSD, 1e-9, "the host's figure of failed attempts is taken")
	assert.Equal(t, task.Budget{MaxCostUSD: 0.3}, spent.Budget, "the host's default bounds the task")
	calls := rec.runCalls()
	require.Equal(t, []int{1, 2, 2}, turnsOf(calls))
	assert.Equal(t, calls[1].In.PromptUUID, calls[2].In.PromptUUID, "the refused turn runs as itself")
	assert.Equal(t, 2, st.Totals.Turns)
	assert.Nil(t, st.BudgetExhausted)
}

func TestBudgetTurnsBound(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := standard(env)
	var bad, second *update
	var spent task.State
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "one") }, 0)
	env.RegisterDelayedCallback(func() {
		spent = query(t, env)
		second = sendPrompt(env, "p2", "two")
		bad = sendUpdate(env, task.UpdateBudget, "b0", task.BudgetChange{MaxTurns: ptr(-1)})
		sendUpdate(env, task.UpdateBudget, "b1", task.BudgetChange{MaxTurns: ptr(2)})
	}, time.Minute)
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p3", "three") }, 2*time.Minute)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, 3*time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, budgetParams(task.Budget{MaxTurns: 1}))
	st := result(t, env)

	assert.Equal(t, task.StatusBudgetExhausted, spent.Status, "a task whose turns reach the bound has spent its budget")
	require.NotNil(t, spent.BudgetExhausted)
	assert.Equal(t, task.BoundTurns, spent.BudgetExhausted.Bound)
	assert.False(t, spent.BudgetExhausted.Cut)
	require.True(t, second.rejected)
	budgetError(t, second.err, task.BoundTurns)
	require.True(t, bad.rejected, "a negative bound is refused")
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, bad.err, &appErr)
	assert.Equal(t, task.ErrTypeInvalidBudget, appErr.Type())
	assert.Equal(t, []int{1, 2}, turnsOf(rec.runCalls()), "the raise lets one more turn run, no continuation for a turn that was not cut")
	assert.Equal(t, "three", rec.runCalls()[1].In.Prompt.Text)
	assert.Equal(t, task.StatusCompleted, st.Status)
	require.NotNil(t, st.BudgetExhausted, "the second turn spent the raised budget")
}

func TestBudgetCloseWhileSpentEndsTheTask(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
		if c.In.Turn == 2 {
			x := task.BudgetExhausted{Bound: task.BoundDuration, Budget: task.Budget{MaxDuration: time.Second}, Turn: 2}
			return task.RunTurnResult{}, temporal.NewNonRetryableApplicationError("budget spent", task.ErrTypeBudgetExhausted, nil, x, task.Budget{})
		}
		return completeTurn(c)
	})
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "one"); sendPrompt(env, "p2", "two") }, 0)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, params())
	st := result(t, env)

	assert.Equal(t, task.StatusCompleted, st.Status)
	assert.Empty(t, st.Pending)
	assert.Contains(t, st.LastError, "did not run")
	assert.Equal(t, []int{1, 2}, turnsOf(rec.runCalls()))
}

func TestBudgetSpentCarriesOverContinueAsNew(t *testing.T) {
	t.Parallel()
	lim := defaultLimits
	lim.maxTurnsPerRun = 1
	env := newEnv(t, lim)
	standard(env)
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "one") }, 0)
	env.ExecuteWorkflow(task.WorkflowName, budgetParams(task.Budget{MaxTurns: 1}))
	next := continuedWith(t, env)
	require.NotNil(t, next.Carry.BudgetExhausted)
	assert.Equal(t, task.BoundTurns, next.Carry.BudgetExhausted.Bound)
	assert.Equal(t, task.Budget{MaxTurns: 1}, next.Budget)
}

// A raise that lets an idle task go on publishes its status at once, without waiting for a turn.
func TestBudgetRaisePublishesTheStatus(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	standard(env)
	var mu sync.Mutex
	var statuses []string
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(statusKey); ok {
			mu.Lock()
			statuses = append(statuses, v)
			mu.Unlock()
		}
	}).Return(nil)
	var idle []string
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "one") }, 0)
	env.RegisterDelayedCallback(func() {
		sendUpdate(env, task.UpdateBudget, "b1", task.BudgetChange{MaxTurns: ptr(2)})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		mu.Lock()
		idle = dedup(statuses)
		mu.Unlock()
		sendUpdate(env, task.UpdateClose, "close")
	}, time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, budgetParams(task.Budget{MaxTurns: 1}))
	result(t, env)
	assert.Equal(t, []string{"running", "budget_exhausted", "idle"}, idle)
}

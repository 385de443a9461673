package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/task"
)

// waitError is the error of an attempt whose turn waits for its account, as activities send it.
func waitError(typ string, w task.Wait, attempt int) error {
	return temporal.NewApplicationErrorWithOptions("the account waits", typ, temporal.ApplicationErrorOptions{
		NonRetryable: true, Details: []any{w, task.ReassignDetails{Attempt: attempt}}})
}

// A turn whose account reached its usage limit waits on a durable timer until the reset the
// attempt named, showing waiting_for_limit with the wait, then runs again by itself, counting
// neither a failure nor a retry of its own.
func TestTurnWaitsForTheUsageLimitReset(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	start := env.Now()
	resets := start.Add(3 * time.Hour)
	retry := resets.Add(7 * time.Second)
	rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
		if len(rec.runCalls()) == 1 {
			return task.RunTurnResult{}, waitError(task.ErrTypeAccountLimited, task.Wait{Account: "acct-1", Reason: task.WaitUsageLimit,
				LimitType: "five_hour", Since: start, ResetsAt: resets, RetryAt: retry}, 1)
		}
		return completeTurn(c)
	})
	var during task.State
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "work") }, 0)
	env.RegisterDelayedCallback(func() { during = query(t, env) }, time.Hour)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, 4*time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, params())
	st := result(t, env)

	assert.Equal(t, task.StatusWaitingForLimit, during.Status)
	require.NotNil(t, during.Wait)
	assert.Equal(t, task.WaitUsageLimit, during.Wait.Reason)
	assert.Equal(t, 1, during.Wait.Turn)
	assert.True(t, during.Wait.ResetsAt.Equal(resets))
	calls := rec.runCalls()
	require.Len(t, calls, 2)
	assert.False(t, calls[1].At.Before(retry), "the turn ran again at %s, before its retry time %s", calls[1].At, retry)
	assert.Equal(t, 1, calls[1].In.AttemptsBefore, "the attempts' count goes on after the wait")
	assert.Equal(t, calls[0].In.PromptUUID, calls[1].In.PromptUUID)
	assert.Equal(t, 1, st.Totals.Turns)
	assert.Zero(t, st.Totals.FailedTurns)
	assert.Empty(t, st.LastError)
	assert.Nil(t, st.Wait)
}

// A spend cap has no reset: the turn waits, showing waiting_for_spend_cap, until it is told its
// account is ready, and then no sooner than the time the signal names.
func TestTurnWaitsForTheSpendCapUntilTold(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	start := env.Now()
	rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
		if len(rec.runCalls()) == 1 {
			return task.RunTurnResult{}, waitError(task.ErrTypeSpendCapReached, task.Wait{Account: "acct-1", Reason: task.WaitSpendCap, Since: start}, 1)
		}
		return completeTurn(c)
	})
	var during task.State
	notBefore := start.Add(50*time.Hour + time.Minute)
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "work") }, 0)
	env.RegisterDelayedCallback(func() { during = query(t, env) }, 49*time.Hour)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(task.SignalAccountReady, task.AccountReady{Account: "acct-1", NotBefore: notBefore})
	}, 50*time.Hour)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, 51*time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, params())
	st := result(t, env)

	assert.Equal(t, task.StatusWaitingForSpendCap, during.Status)
	calls := rec.runCalls()
	require.Len(t, calls, 2)
	assert.False(t, calls[1].At.Before(notBefore), "ran again at %s, before %s", calls[1].At, notBefore)
	assert.Zero(t, st.Totals.FailedTurns)
}

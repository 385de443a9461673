package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// continuedWith is the input the workflow continued as new with.
func continuedWith(t *testing.T, env *testsuite.TestWorkflowEnvironment) task.Params {
	t.Helper()
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "want continue-as-new, got %v", env.GetWorkflowError())
	assert.Equal(t, task.WorkflowName, can.WorkflowType.Name)
	var next task.Params
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.NotNil(t, next.Carry)
	return next
}

func TestContinueAsNewCarriesPendingPromptsAndTotals(t *testing.T) {
	t.Parallel()
	lim := defaultLimits
	lim.maxTurnsPerRun = 2
	env := newEnv(t, lim)
	rec := standard(env)
	var ups []*update
	env.RegisterDelayedCallback(func() {
		for _, id := range []string{"p1", "p2", "p3", "p4"} {
			ups = append(ups, sendPrompt(env, id, "prompt "+id))
		}
	}, 0)
	p := params()
	p.IdleTimeout = time.Hour
	p.MaxAttempts = 5
	env.ExecuteWorkflow(task.WorkflowName, p)
	next := continuedWith(t, env)

	assert.Equal(t, []int{1, 2}, turnsOf(rec.runCalls()), "the run hands over after its bound of turns")
	assert.Equal(t, p.Workspace, next.Workspace)
	assert.Equal(t, p.IdleTimeout, next.IdleTimeout)
	assert.Equal(t, 5, next.MaxAttempts)
	assert.Equal(t, "claude-test", next.Profile.Model)
	c := next.Carry
	assert.Equal(t, 4, c.Turn)
	assert.Equal(t, "s1", c.SessionID)
	assert.Equal(t, "m2", c.LastMessageUUID)
	assert.Equal(t, hostA, c.HostQueue)
	assert.Equal(t, task.Totals{CostUSD: 0.5, InputTokens: 20, OutputTokens: 40, Turns: 2}, c.Totals)
	require.Len(t, c.Pending, 2, "the prompts not yet run travel to the next run")
	for i, q := range c.Pending {
		acc := as[task.PromptAccepted](t, ups[i+2])
		assert.Equal(t, acc.Turn, q.Turn)
		assert.Equal(t, acc.PromptUUID, q.PromptUUID)
		assert.Equal(t, "prompt p"+string(rune('3'+i)), q.Prompt.Text)
	}

	// The next run picks up where this one stopped.
	env2 := newEnv(t, lim)
	rec2 := standard(env2)
	var fifth *update
	env2.RegisterDelayedCallback(func() {
		fifth = sendPrompt(env2, "p5", "fifth")
		sendUpdate(env2, task.UpdateClose, "close")
	}, 0)
	env2.ExecuteWorkflow(task.WorkflowName, next)
	next2 := continuedWith(t, env2)
	calls := rec2.runCalls()
	require.Equal(t, []int{3, 4}, turnsOf(calls))
	assert.Equal(t, c.Pending[0].PromptUUID, calls[0].In.PromptUUID)
	assert.Equal(t, [2]string{"s1", "m2"}, [2]string{calls[0].In.SessionID, calls[0].In.LastMessageUUID})
	assert.Equal(t, warmA, calls[0].Queue, "the carried host ran the previous turn")
	assert.Empty(t, rec2.assignCalls(), "the carried host queue is kept")
	assert.Equal(t, 5, as[task.PromptAccepted](t, fifth).Turn, "turn numbers continue")
	assert.Equal(t, 4, next2.Carry.Totals.Turns)
	assert.True(t, next2.Carry.Closing, "a close travels too")
	assert.Equal(t, []int{5}, []int{next2.Carry.Pending[0].Turn})

	// And a closing run ends once its carried prompts ran.
	env3 := newEnv(t, lim)
	rec3 := standard(env3)
	env3.ExecuteWorkflow(task.WorkflowName, next2)
	st := result(t, env3)
	assert.Equal(t, []int{5}, turnsOf(rec3.runCalls()))
	assert.Equal(t, task.StatusCompleted, st.Status)
	assert.Equal(t, 5, st.Totals.Turns)
	assert.InDelta(t, 1.25, st.Totals.CostUSD, 1e-9)
}

func TestContinueAsNewWhenSuggested(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := standard(env)
	env.SetContinueAsNewSuggested(true)
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p1", "one")
		sendPrompt(env, "p2", "two")
	}, 0)
	env.ExecuteWorkflow(task.WorkflowName, params())
	next := continuedWith(t, env)
	assert.Equal(t, []int{1}, turnsOf(rec.runCalls()), "a run continues as new after a turn once the server suggests it")
	assert.Equal(t, []int{2}, []int{next.Carry.Pending[0].Turn})
	assert.Equal(t, 1, next.Carry.Totals.Turns)
}

func TestContinueAsNewWaitsForTheRunningTurn(t *testing.T) {
	t.Parallel()
	lim := defaultLimits
	lim.maxTurnsPerRun = 1
	env := newEnv(t, lim)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, completeTurn).After(10 * time.Minute)
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "one") }, 0)
	// Sent while turn 1 runs, which is already past the bound.
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p2", "two") }, time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, params())
	next := continuedWith(t, env)
	assert.Equal(t, []int{1}, turnsOf(rec.runCalls()))
	assert.Equal(t, 1, next.Carry.Totals.Turns, "the running turn finished before the hand-over")
	require.Len(t, next.Carry.Pending, 1, "a prompt that came during the turn is carried")
	assert.Equal(t, 2, next.Carry.Pending[0].Turn)
}

// A client that retries a prompt Update after the task continued as new gets
// the answer the first run gave, and the prompt runs once.
func TestPromptUpdateRetriedAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	lim := defaultLimits
	lim.maxTurnsPerRun = 1
	env := newEnv(t, lim)
	standard(env)
	var first, second *update
	env.RegisterDelayedCallback(func() {
		first = sendPrompt(env, "retry-me", "only once")
		second = sendPrompt(env, "other", "another")
	}, 0)
	p := params()
	p.IdleTimeout = time.Hour
	env.ExecuteWorkflow(task.WorkflowName, p)
	next := continuedWith(t, env)
	acc := as[task.PromptAccepted](t, first)
	require.Len(t, next.Carry.Recent, 2)
	assert.Equal(t, "retry-me", next.Carry.Recent[0].UpdateID)

	env2 := newEnv(t, defaultLimits)
	rec2 := standard(env2)
	var retried *update
	env2.RegisterDelayedCallback(func() {
		retried = sendPrompt(env2, "retry-me", "only once")
		sendUpdate(env2, task.UpdateClose, "close")
	}, 0)
	env2.ExecuteWorkflow(task.WorkflowName, next)
	st := result(t, env2)
	assert.Equal(t, acc, as[task.PromptAccepted](t, retried), "the retry gets the first answer")
	assert.Equal(t, []int{as[task.PromptAccepted](t, second).Turn}, turnsOf(rec2.runCalls()),
		"the next run runs the waiting prompt and nothing for the retry")
	assert.Equal(t, 2, st.Turn, "no turn number was given to the retry")
}

package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/task"
)

// defaultTestTaskQueue is the task queue the test environment runs a workflow on.
const defaultTestTaskQueue = "default-test-taskqueue"

func hostGone() error {
	return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
}

func TestVanishedHostIsReplaced(t *testing.T) {
	t.Parallel()
	const hostB = "executor/host-b"
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA, hostB)
	rec.mockControl(env)
	rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
		if c.Queue == hostA {
			return task.RunTurnResult{}, hostGone()
		}
		return completeTurn(c)
	})
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p1", "one")
		sendPrompt(env, "p2", "two")
		sendUpdate(env, task.UpdateClose, "close")
	}, 0)
	env.ExecuteWorkflow(task.WorkflowName, params())
	st := result(t, env)

	assert.Equal(t, []string{defaultTestTaskQueue, defaultTestTaskQueue}, rec.assignCalls(),
		"AssignHost runs on the workflow's own queue, again when the host is gone")
	calls := rec.runCalls()
	require.Equal(t, []int{1, 1, 2}, turnsOf(calls))
	assert.Equal(t, []string{hostA, hostB, warmB}, []string{calls[0].Queue, calls[1].Queue, calls[2].Queue})
	assert.Equal(t, hostB, st.HostQueue)
	assert.Equal(t, task.Totals{CostUSD: 0.5, InputTokens: 20, OutputTokens: 40, Turns: 2}, st.Totals)
	assert.Empty(t, st.LastError)
	assert.Equal(t, []controlCall{{In: task.InterruptTurnInput{TaskID: defaultTestTaskID, Turn: 2}, Queue: task.ControlQueue(hostB)}}, rec.stopCalls())
}

func TestNoHostFailsTheTurnAfterBoundedReassignments(t *testing.T) {
	t.Parallel()
	lim := defaultLimits
	lim.maxReassign = 2
	env := newEnv(t, lim)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
		if c.In.Turn == 1 {
			return task.RunTurnResult{}, hostGone()
		}
		return completeTurn(c)
	})
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p1", "one")
		sendPrompt(env, "p2", "two")
		sendUpdate(env, task.UpdateClose, "close")
	}, 0)
	env.ExecuteWorkflow(task.WorkflowName, params())
	st := result(t, env)

	assert.Equal(t, []int{1, 1, 1, 2}, turnsOf(rec.runCalls()), "one try and two reassignments, then the next turn")
	assert.Len(t, rec.assignCalls(), 4, "the next turn looks for a host again")
	assert.Equal(t, 1, st.Totals.FailedTurns)
	assert.Contains(t, st.LastError, "turn 1 failed: no host picked it up")
}

func TestQueryState(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, completeTurn).After(10 * time.Minute)
	var before, during, after task.State
	env.RegisterDelayedCallback(func() { before = query(t, env) }, time.Second)
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p1", "one")
		sendPrompt(env, "p2", "two")
	}, time.Minute)
	env.RegisterDelayedCallback(func() { during = query(t, env) }, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		after = query(t, env)
		sendUpdate(env, task.UpdateClose, "close")
	}, time.Hour)
	// params() leave the mode empty: the state shows the default.
	env.ExecuteWorkflow(task.WorkflowName, params())
	final := result(t, env)

	assert.Equal(t, task.State{
		Status:         task.StatusIdle,
		Workspace:      "/srv/work/t1",
		Model:          "claude-test",
		PermissionMode: task.Autonomous,
	}, before)
	assert.Equal(t, task.State{
		Status:         task.StatusRunning,
		Workspace:      "/srv/work/t1",
		Model:          "claude-test",
		PermissionMode: task.Autonomous,
		Turn:           2,
		RunningTurn:    1,
		HostQueue:      hostA,
		Pending:        []task.QueuedPrompt{{Turn: 2, PromptUUID: PromptUUID("", 2), Prompt: task.Prompt{Text: "two"}}},
	}, during)
	assert.Equal(t, task.State{
		Status:          task.StatusIdle,
		Workspace:       "/srv/work/t1",
		Model:           "claude-test",
		PermissionMode:  task.Autonomous,
		Turn:            2,
		SessionID:       "s1",
		LastMessageUUID: "m2",
		HostQueue:       hostA,
		Totals:          task.Totals{CostUSD: 0.5, InputTokens: 20, OutputTokens: 40, Turns: 2},
	}, after)
	after.Status = task.StatusCompleted
	assert.Equal(t, after, final, "the result is the final state")
	assert.Len(t, rec.runCalls(), 2)
}

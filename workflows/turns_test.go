package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

func TestPromptsRunInOrder(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := standard(env)
	var ups []*update
	env.RegisterDelayedCallback(func() {
		ups = append(ups, sendPrompt(env, "p1", "first"), sendPrompt(env, "p2", "second"), sendPrompt(env, "p3", "third"))
		sendUpdate(env, task.UpdateClose, "close")
	}, 0)
	env.ExecuteWorkflow(task.WorkflowName, params())
	st := result(t, env)

	calls := rec.runCalls()
	require.Equal(t, []int{1, 2, 3}, turnsOf(calls))
	texts := []string{"first", "second", "third"}
	seen := map[string]bool{}
	for i, c := range calls {
		acc := as[task.PromptAccepted](t, ups[i])
		assert.Equal(t, i+1, acc.Turn, "accepted turn")
		assert.Equal(t, i, acc.Queued, "prompts ahead of prompt %d", i+1)
		assert.Equal(t, acc.PromptUUID, c.In.PromptUUID, "turn %d runs with the uuid it was given", i+1)
		assert.Equal(t, PromptUUID("", i+1), c.In.PromptUUID, "prompt uuid is derived from the first run id and the turn")
		assert.False(t, seen[c.In.PromptUUID], "prompt uuids are distinct")
		seen[c.In.PromptUUID] = true
		assert.Equal(t, texts[i], c.In.Prompt.Text)
		want := hostA
		if i > 0 {
			want = warmA
		}
		assert.Equal(t, want, c.Queue, "the first turn runs on the host queue, the next ones on its warm queue")
		assert.Equal(t, "/srv/work/t1", c.In.Workspace)
		assert.Equal(t, task.Autonomous, c.In.Profile.PermissionMode, "permission mode defaults to autonomous")
		assert.Equal(t, "claude-test", c.In.Profile.Model)
		assert.Equal(t, defaultTestTaskID, c.In.TaskID)
	}
	// Each turn resumes where the previous one ended.
	assert.Equal(t, [2]string{"", ""}, [2]string{calls[0].In.SessionID, calls[0].In.LastMessageUUID})
	assert.Equal(t, [2]string{"s1", "m1"}, [2]string{calls[1].In.SessionID, calls[1].In.LastMessageUUID})
	assert.Equal(t, [2]string{"s1", "m2"}, [2]string{calls[2].In.SessionID, calls[2].In.LastMessageUUID})
	// The host is assigned once, on the workflow's own queue.
	assert.Len(t, rec.assignCalls(), 1)

	assert.Equal(t, task.StatusCompleted, st.Status)
	assert.Equal(t, 3, st.Turn)
	assert.Equal(t, task.Totals{CostUSD: 0.75, InputTokens: 30, OutputTokens: 60, Turns: 3}, st.Totals)
	assert.Equal(t, "s1", st.SessionID)
	assert.Equal(t, "m3", st.LastMessageUUID)
	assert.Empty(t, st.Pending)
	assert.Empty(t, st.LastError)
	// Completing the task stops its executor.
	assert.Equal(t, []controlCall{{In: task.InterruptTurnInput{TaskID: defaultTestTaskID, Turn: 3}, Queue: task.ControlQueue(hostA)}}, rec.stopCalls())
}

// defaultTestTaskID is the workflow ID the test environment gives a workflow.
const defaultTestTaskID = "default-test-workflow-id"

func TestPromptWhileRunningWaitsForItsTurn(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, completeTurn).After(10 * time.Minute)

	var second *update
	var during task.State
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "first") }, 0)
	env.RegisterDelayedCallback(func() {
		second = sendPrompt(env, "p2", "second")
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		during = query(t, env)
		sendUpdate(env, task.UpdateClose, "close")
	}, 2*time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, params())
	st := result(t, env)

	acc := as[task.PromptAccepted](t, second)
	assert.Equal(t, 2, acc.Turn)
	assert.Equal(t, 1, acc.Queued, "the running turn is ahead of the second prompt")

	assert.Equal(t, task.StatusRunning, during.Status)
	assert.Equal(t, 1, during.RunningTurn)
	require.Len(t, during.Pending, 1, "the second prompt waits while the first turn runs")
	assert.Equal(t, 2, during.Pending[0].Turn)
	assert.Equal(t, "second", during.Pending[0].Prompt.Text)

	calls := rec.runCalls()
	require.Equal(t, []int{1, 2}, turnsOf(calls), "the second prompt runs as its own turn, after the first")
	assert.Equal(t, "second", calls[1].In.Prompt.Text)
	assert.True(t, calls[1].At.Sub(calls[0].At) == 10*time.Minute,
		"the second turn ends a full turn after the first: they did not overlap")
	assert.Equal(t, 2, st.Totals.Turns)
}

func TestRetryableErrorIsRetried(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
		if c.Attempt == 1 {
			return task.RunTurnResult{}, temporalAppError("model API overloaded", task.ErrTypeModelAPI)
		}
		return completeTurn(c)
	})
	p := params()
	p.TurnTimeout = 5 * time.Minute
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p1", "one")
		sendUpdate(env, task.UpdateClose, "close")
	}, 0)
	env.ExecuteWorkflow(task.WorkflowName, p)
	st := result(t, env)

	calls := rec.runCalls()
	require.Len(t, calls, 2, "the API error is retried once, then the turn succeeds")
	assert.Equal(t, []int32{1, 2}, []int32{calls[0].Attempt, calls[1].Attempt})
	assert.Equal(t, calls[0].In, calls[1].In, "a retry sends the same input")
	assert.Equal(t, 10*time.Second, calls[0].Info.HeartbeatTimeout)
	assert.Equal(t, 5*time.Minute, calls[0].Info.StartToCloseTimeout, "start-to-close is the task's turn timeout")
	assert.Equal(t, task.Totals{CostUSD: 0.25, InputTokens: 10, OutputTokens: 20, Turns: 1}, st.Totals)
	assert.Empty(t, st.LastError)
}

func TestExhaustedRetriesFailTheTurnNotTheTask(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
		if c.In.Turn == 1 {
			return task.RunTurnResult{}, temporalAppError("claude exited with status 3", task.ErrTypeClaudeExited)
		}
		return completeTurn(c)
	})
	p := params()
	p.MaxAttempts = 2
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p1", "one")
		sendPrompt(env, "p2", "two")
		sendUpdate(env, task.UpdateClose, "close")
	}, 0)
	env.ExecuteWorkflow(task.WorkflowName, p)
	st := result(t, env)

	assert.Equal(t, []int{1, 1, 2}, turnsOf(rec.runCalls()), "turn 1 gets MaxAttempts attempts, then turn 2 runs")
	assert.Equal(t, task.StatusCompleted, st.Status)
	assert.Equal(t, task.Totals{CostUSD: 0.25, InputTokens: 10, OutputTokens: 20, Turns: 2, FailedTurns: 1}, st.Totals)
	assert.Contains(t, st.LastError, "turn 1")
	assert.Contains(t, st.LastError, task.ErrTypeClaudeExited)
	assert.Contains(t, st.LastError, "claude exited with status 3")
}

func TestFailedResultIsRecorded(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
		res, _ := completeTurn(c)
		res.Status, res.Error = task.TurnFailed, "max turns reached"
		return res, nil
	})
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p1", "one")
		sendUpdate(env, task.UpdateClose, "close")
	}, 0)
	env.ExecuteWorkflow(task.WorkflowName, params())
	st := result(t, env)
	assert.Len(t, rec.runCalls(), 1, "a failed result is not retried")
	assert.Equal(t, "turn 1 failed: max turns reached", st.LastError)
	assert.Equal(t, task.Totals{CostUSD: 0.25, InputTokens: 10, OutputTokens: 20, Turns: 1, FailedTurns: 1}, st.Totals,
		"a failed turn's cost still counts")
}

func TestResumeRejectedNeedsAttention(t *testing.T) {
	for _, choice := range task.Resolutions() {
		t.Run(string(choice), func(t *testing.T) {
			t.Parallel()
			env := newEnv(t, defaultLimits)
			rec := &recorder{}
			rec.mockHosts(env, hostA)
			rec.mockControl(env)
			rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
				if c.In.Turn == 2 {
					// Retryable as far as the error goes: only the retry policy's
					// NonRetryableErrorTypes stops a second attempt.
					return task.RunTurnResult{}, temporalAppError("no conversation found with session ID s1", task.ErrTypeResumeRejected)
				}
				return completeTurn(c)
			})
			var waiting, early task.State
			var resolved *update
			env.RegisterDelayedCallback(func() {
				sendPrompt(env, "p1", "one")
				sendPrompt(env, "p2", "two")
			}, 0)
			env.RegisterDelayedCallback(func() {
				waiting = query(t, env)
				sendPrompt(env, "p3", "three")
			}, time.Hour)
			env.RegisterDelayedCallback(func() {
				early = query(t, env)
				resolved = sendUpdate(env, task.UpdateResolve, "r1", task.AttentionChoice{Choice: choice, Summary: "we said one"})
				sendUpdate(env, task.UpdateClose, "close")
			}, 2*time.Hour)
			env.ExecuteWorkflow(task.WorkflowName, params())
			st := result(t, env)

			calls := rec.runCalls()
			require.Equal(t, []int{1, 2, 3, 4}, turnsOf(calls), "nothing runs until a person chooses; the refused prompt runs again as turn 3")
			assert.Equal(t, task.StatusNeedsAttention, waiting.Status)
			require.NotNil(t, waiting.Attention)
			assert.Equal(t, 2, waiting.Attention.Turn)
			assert.Contains(t, waiting.Attention.Error, "no conversation found")
			assert.NotEmpty(t, waiting.SessionID, "the session stands")
			assert.Equal(t, task.StatusNeedsAttention, early.Status, "a new prompt does not run past the choice")
			assert.Len(t, early.Pending, 2)
			assert.Equal(t, 3, as[int](t, resolved))
			assert.Equal(t, "two", calls[1].In.Prompt.Text)
			switch choice {
			case task.ResolveRetry:
				assert.Equal(t, "two", calls[2].In.Prompt.Text)
				assert.Equal(t, "s1", calls[2].In.SessionID, "a retry resumes the same session")
				assert.False(t, calls[2].In.NewSession)
			case task.ResolveNewSession:
				assert.Equal(t, task.SeededPrompt("we said one", "two"), calls[2].In.Prompt.Text)
				assert.Empty(t, calls[2].In.SessionID)
				assert.True(t, calls[2].In.NewSession, "a new session, as the person chose")
			}
			assert.False(t, calls[3].In.NewSession)
			assert.Nil(t, st.Attention)
			assert.Equal(t, 4, st.Totals.Turns)
			assert.Equal(t, 1, st.Totals.FailedTurns)
		})
	}
}

// A history from before tasks waited for a person replays as it ran: the session cleared, the
// next prompt in a new session.
func TestResumeRejectedBeforeAttentionClearsTheSession(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	env.OnGetVersion(attentionChangeID, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
		if c.In.Turn == 2 {
			return task.RunTurnResult{}, temporalAppError("no conversation found with session ID s1", task.ErrTypeResumeRejected)
		}
		return completeTurn(c)
	})
	var between task.State
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p1", "one")
		sendPrompt(env, "p2", "two")
	}, 0)
	env.RegisterDelayedCallback(func() {
		between = query(t, env)
		sendPrompt(env, "p3", "three")
		sendUpdate(env, task.UpdateClose, "close")
	}, time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, params())
	result(t, env)
	calls := rec.runCalls()
	require.Equal(t, []int{1, 2, 3}, turnsOf(calls))
	assert.Equal(t, task.StatusIdle, between.Status)
	assert.Empty(t, between.SessionID)
	assert.Equal(t, "three", calls[2].In.Prompt.Text)
}

func TestResolveIsRefusedWhenNothingNeedsAttention(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, completeTurn)
	var u *update
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p1", "one")
	}, 0)
	env.RegisterDelayedCallback(func() {
		u = sendUpdate(env, task.UpdateResolve, "r1", task.AttentionChoice{Choice: task.ResolveRetry})
		sendUpdate(env, task.UpdateClose, "close")
	}, time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, params())
	result(t, env)
	require.True(t, u.rejected)
	assert.Contains(t, u.err.Error(), "does not need attention")
}

func TestInvalidInputIsNotRetried(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
		return task.RunTurnResult{}, temporalAppError("workspace does not exist", task.ErrTypeInvalidInput)
	})
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p1", "one")
		sendUpdate(env, task.UpdateClose, "close")
	}, 0)
	env.ExecuteWorkflow(task.WorkflowName, params())
	st := result(t, env)
	assert.Len(t, rec.runCalls(), 1)
	assert.Contains(t, st.LastError, task.ErrTypeInvalidInput)
	assert.Equal(t, 1, st.Totals.FailedTurns)
}

package workflows

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-run/drover/task"
)

// A task started with its first prompt runs it as turn 1 with no Update; the same prompt sent
// again as an Update with the creation's id is answered as turn 1 and runs once; the next
// prompt is turn 2.
func TestFirstPromptComesWithTheStart(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := standard(env)
	var again, next *update
	env.RegisterDelayedCallback(func() {
		again = sendPrompt(env, "create-1", "first")
		next = sendPrompt(env, "p2", "second")
		sendUpdate(env, task.UpdateClose, "close")
	}, 0)
	p := params()
	p.First = &task.FirstPrompt{Prompt: task.Prompt{Text: "first"}, UpdateID: "create-1"}
	env.ExecuteWorkflow(task.WorkflowName, p)
	st := result(t, env)

	calls := rec.runCalls()
	require.Equal(t, []int{1, 2}, turnsOf(calls))
	assert.Equal(t, "first", calls[0].In.Prompt.Text)
	assert.Equal(t, PromptUUID("", 1), calls[0].In.PromptUUID)
	assert.Equal(t, "second", calls[1].In.Prompt.Text)
	assert.Equal(t, 1, as[task.PromptAccepted](t, again).Turn, "the creation sent again is answered as turn 1")
	assert.Equal(t, 2, as[task.PromptAccepted](t, next).Turn)
	assert.Equal(t, task.StatusCompleted, st.Status)
}

// A first prompt that no task could take is not run, and the task says why.
func TestFirstPromptThatCannotRun(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := standard(env)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, 0)
	p := params()
	p.First = &task.FirstPrompt{Prompt: task.Prompt{Text: "  "}}
	env.ExecuteWorkflow(task.WorkflowName, p)
	st := result(t, env)
	assert.Empty(t, rec.runCalls())
	assert.Contains(t, st.LastError, "first prompt")
}

package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/drover-run/drover/task"
)

func managedParams() task.Params {
	return task.Params{Repo: "/srv/repos/app", Profile: task.Profile{Model: "claude-test"}}
}

// A rewind of an idle managed task runs the Rewind activity, and the task's next turn resumes at
// the point it answers; a rewind of an unmanaged task, one past the turns run and one while a
// turn runs are refused before anything runs.
func TestRewindSetsTheNextTurnsResumePoint(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := standard(env)
	var rewinds []task.RewindInput
	env.OnActivity(task.ActivityRewind, mock.Anything, mock.Anything).Return(func(_ context.Context, in task.RewindInput) (task.Rewound, error) {
		rewinds = append(rewinds, in)
		return task.Rewound{Turn: in.Turn, SessionID: "s1", LastMessageUUID: "m1", Checkpoint: "c1", SetAside: []int{2}}, nil
	})
	var tooFar, back, again *update
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p1", "one")
		sendPrompt(env, "p2", "two")
	}, 0)
	env.RegisterDelayedCallback(func() {
		tooFar = sendUpdate(env, task.UpdateRewind, "far", task.RewindRequest{Turn: 3})
		back = sendUpdate(env, task.UpdateRewind, "back", task.RewindRequest{Turn: 1})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p3", "three")
		again = sendUpdate(env, task.UpdateRewind, "again", task.RewindRequest{Turn: 1})
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, 3*time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, managedParams())
	result(t, env)

	rejectedWith(t, tooFar, task.ErrTypeCannotRewind)
	require.True(t, back.completed && back.err == nil, "rewind: %v", back.err)
	assert.Equal(t, task.Rewound{Turn: 1, SessionID: "s1", LastMessageUUID: "m1", Checkpoint: "c1", SetAside: []int{2}}, as[task.Rewound](t, back))
	assert.Equal(t, []task.RewindInput{{TaskID: "default-test-workflow-id", Repo: "/srv/repos/app", Turn: 1}}, rewinds)
	runs := rec.runCalls()
	require.Len(t, runs, 3)
	assert.Equal(t, "m1", runs[2].In.LastMessageUUID, "turn 3 resumes where the rewind left the task")
	assert.True(t, again.rejected || again.completed, "a rewind sent with a prompt is answered")

	unmanaged := newEnv(t, defaultLimits)
	standard(unmanaged)
	var refused *update
	unmanaged.RegisterDelayedCallback(func() { sendPrompt(unmanaged, "p1", "one") }, 0)
	unmanaged.RegisterDelayedCallback(func() {
		refused = sendUpdate(unmanaged, task.UpdateRewind, "r", task.RewindRequest{Turn: 0})
		sendUpdate(unmanaged, task.UpdateClose, "close")
	}, time.Minute)
	unmanaged.ExecuteWorkflow(task.WorkflowName, params())
	result(t, unmanaged)
	rejectedWith(t, refused, task.ErrTypeCannotRewind)
}

// A forked task's first turn resumes the other task's conversation at the turn forked from and
// carries the fork point to the engine.
func TestForkResumesTheOtherTasksTurn(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := standard(env)
	p := managedParams()
	p.Fork = &task.ForkPoint{Task: "src", Turn: 1, SessionID: "s-src", LastMessageUUID: "m-src-1", Checkpoint: "c1"}
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "one") }, 0)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, p)
	result(t, env)
	runs := rec.runCalls()
	require.Len(t, runs, 1)
	assert.Equal(t, "s-src", runs[0].In.SessionID)
	assert.Equal(t, "m-src-1", runs[0].In.LastMessageUUID)
	assert.Equal(t, p.Fork, runs[0].In.Fork)
}

package workflows

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/task"
)

func rejectedWith(t *testing.T, u *update, errType string) {
	t.Helper()
	require.True(t, u.rejected, "update should be rejected (accepted=%v err=%v)", u.accepted, u.err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(u.err, &appErr), "rejection is an application error: %v", u.err)
	assert.Equal(t, errType, appErr.Type(), "rejection type (%v)", u.err)
}

func TestValidatorRejects(t *testing.T) {
	t.Parallel()
	lim := defaultLimits
	lim.maxPending = 2
	lim.maxQueuedBytes = 300
	env := newEnv(t, lim)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, completeTurn).After(time.Hour)

	var empty, blank, big, badAttach, ok1, ok2, ok3, full, bytesFull, afterClose, closeAgainAfterEnd *update
	env.RegisterDelayedCallback(func() {
		empty = sendPrompt(env, "empty", "")
		blank = sendPrompt(env, "blank", " \n\t ")
		big = sendPrompt(env, "big", strings.Repeat("x", task.MaxPromptBytes))
		badAttach = sendUpdate(env, task.UpdatePrompt, "attach", task.Prompt{Text: "look", Attachments: []string{"../../etc/passwd"}})
		ok1 = sendPrompt(env, "ok1", "runs at once")
		ok2 = sendUpdate(env, task.UpdatePrompt, "ok2", task.Prompt{Text: strings.Repeat("y", 150), Attachments: []string{"img/a.png"}})
	}, 0)
	env.RegisterDelayedCallback(func() {
		bytesFull = sendPrompt(env, "bytes", strings.Repeat("z", 150))
		ok3 = sendPrompt(env, "ok3", "short")
		full = sendPrompt(env, "full", "one too many")
		sendUpdate(env, task.UpdateClose, "close")
		afterClose = sendPrompt(env, "late", "after close")
	}, time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, params())
	st := result(t, env)
	closeAgainAfterEnd = sendUpdate(env, task.UpdateClose, "close-2")

	rejectedWith(t, empty, task.ErrTypeInvalidPrompt)
	rejectedWith(t, blank, task.ErrTypeInvalidPrompt)
	rejectedWith(t, big, task.ErrTypeInvalidPrompt)
	rejectedWith(t, badAttach, task.ErrTypeInvalidPrompt)
	rejectedWith(t, bytesFull, task.ErrTypeQueueFull)
	rejectedWith(t, full, task.ErrTypeQueueFull)
	rejectedWith(t, afterClose, task.ErrTypeTaskClosed)
	assert.False(t, closeAgainAfterEnd.accepted, "nothing is accepted after the task ended")

	// Rejected prompts take no turn number.
	assert.Equal(t, 1, as[task.PromptAccepted](t, ok1).Turn)
	assert.Equal(t, 2, as[task.PromptAccepted](t, ok2).Turn)
	assert.Equal(t, 3, as[task.PromptAccepted](t, ok3).Turn)
	assert.Equal(t, []int{1, 2, 3}, turnsOf(rec.runCalls()))
	assert.Equal(t, []string{"img/a.png"}, rec.runCalls()[1].In.Prompt.Attachments)
	assert.Equal(t, 3, st.Turn)
}

// An interrupt whose host does not interrupt the turn is answered with a typed error, and the
// turn goes on to its end.
func TestInterruptThatDoesNotReachTheTurn(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	env.OnActivity(task.ActivityInterruptTurn, mock.Anything, mock.Anything).Return(
		temporal.NewApplicationError("no such turn here", "Unreachable"))
	env.OnActivity(task.ActivityStopExecutor, mock.Anything, mock.Anything).Return(nil).Maybe()
	rec.mockRunTurn(env, completeTurn).After(10 * time.Minute)
	var interrupt *update
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "long job") }, 0)
	env.RegisterDelayedCallback(func() { interrupt = sendUpdate(env, task.UpdateInterrupt, "i1") }, time.Minute)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, params())
	st := result(t, env)

	require.NotNil(t, interrupt)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(interrupt.err, &appErr), "the interrupt's error is an application error: %v", interrupt.err)
	assert.Equal(t, task.ErrTypeInterruptFailed, appErr.Type())
	assert.Contains(t, appErr.Error(), "no such turn here", "the error says what the host answered")
	assert.Equal(t, 1, st.Totals.Turns, "the turn went on to its end")
	assert.Zero(t, st.Totals.FailedTurns)
}

func TestInterruptRunningTurn(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
		res, _ := completeTurn(c)
		res.Status = task.TurnInterrupted
		return res, nil
	}).After(10 * time.Minute)
	var running, idle *update
	var canceled bool
	env.SetOnActivityCanceledListener(func(info *activity.Info) { canceled = true })
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "long job") }, 0)
	env.RegisterDelayedCallback(func() { running = sendUpdate(env, task.UpdateInterrupt, "i1") }, time.Minute)
	env.RegisterDelayedCallback(func() {
		idle = sendUpdate(env, task.UpdateInterrupt, "i2")
		sendUpdate(env, task.UpdateClose, "close")
	}, time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, params())
	st := result(t, env)

	assert.Equal(t, task.InterruptResult{Interrupted: true, Turn: 1}, as[task.InterruptResult](t, running))
	assert.Equal(t, task.InterruptResult{}, as[task.InterruptResult](t, idle), "nothing to interrupt while idle")
	assert.Equal(t, []controlCall{{In: task.InterruptTurnInput{TaskID: defaultTestTaskID, Turn: 1}, Queue: task.ControlQueue(hostA)}},
		rec.interruptCalls(), "InterruptTurn goes to the host's control queue, once")
	assert.False(t, canceled, "an interrupt does not cancel the RunTurn activity")
	assert.Equal(t, 1, st.Totals.Turns, "the interrupted turn ends with its own result")
	assert.Equal(t, 0, st.Totals.FailedTurns)
	assert.Empty(t, st.LastError)
}

func TestCancelStopsTheExecutor(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, completeTurn).After(time.Hour)
	var canceled []string
	env.SetOnActivityCanceledListener(func(info *activity.Info) { canceled = append(canceled, info.ActivityType.Name) })
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p1", "long job")
		sendPrompt(env, "p2", "never runs")
	}, 0)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, params())

	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	var canceledErr *temporal.CanceledError
	require.True(t, errors.As(err, &canceledErr), "the workflow ends cancelled: %v", err)
	assert.Equal(t, []string{task.ActivityRunTurn}, canceled, "the running turn is cancelled")
	assert.Equal(t, []controlCall{{In: task.InterruptTurnInput{TaskID: defaultTestTaskID, Turn: 1}, Queue: task.ControlQueue(hostA)}},
		rec.cancelCalls(), "the host is told to stop the turn at once, on its control queue")
	assert.Equal(t, []controlCall{{In: task.InterruptTurnInput{TaskID: defaultTestTaskID, Turn: 1}, Queue: task.ControlQueue(hostA)}},
		rec.stopCalls(), "StopExecutor runs on the host's control queue")
	st := query(t, env)
	assert.Equal(t, task.StatusCancelled, st.Status)
	assert.Zero(t, st.RunningTurn)
}

func TestCancelWhileIdleStopsTheExecutor(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := standard(env)
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "short job") }, 0)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, params())
	var canceledErr *temporal.CanceledError
	require.True(t, errors.As(env.GetWorkflowError(), &canceledErr), "the workflow ends cancelled: %v", env.GetWorkflowError())
	assert.Len(t, rec.stopCalls(), 1)
	assert.Equal(t, task.StatusCancelled, query(t, env).Status)
}

func TestIdleTimeoutEndsTheTask(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := standard(env)
	p := params()
	p.IdleTimeout = 30 * time.Minute
	// The second prompt comes 20 minutes after the first turn: that is within
	// the idle timeout, so it runs and the countdown starts again after it.
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "one") }, 0)
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p2", "two") }, 20*time.Minute)
	start := env.Now()
	env.ExecuteWorkflow(task.WorkflowName, p)
	st := result(t, env)
	assert.Equal(t, task.StatusCompleted, st.Status)
	assert.Equal(t, []int{1, 2}, turnsOf(rec.runCalls()))
	assert.Equal(t, 50*time.Minute, env.Now().Sub(start).Round(time.Minute), "the task ends an idle timeout after its last turn")
}

// The idle timer runs on through a turn: one that fires while a turn runs does not close the
// task, which stays open for a whole idle timeout after its last turn.
func TestIdleTimeoutCountsFromTheLastTurn(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, completeTurn).After(20 * time.Minute)
	p := params()
	p.IdleTimeout = 30 * time.Minute
	// Turn 1 runs 0–20 min, the task waits from 20; the prompt at 40 runs turn 2 from 40 to 60,
	// across the first timer's end (50); the task closes 30 minutes after turn 2, at 90.
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "one") }, 0)
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p2", "two") }, 40*time.Minute)
	start := env.Now()
	env.ExecuteWorkflow(task.WorkflowName, p)
	st := result(t, env)
	assert.Equal(t, task.StatusCompleted, st.Status)
	assert.Equal(t, []int{1, 2}, turnsOf(rec.runCalls()))
	assert.Equal(t, 90*time.Minute, env.Now().Sub(start).Round(time.Minute), "the task ends an idle timeout after its last turn")
}

func TestInvalidParamsFailTheWorkflow(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		p    task.Params
		says string
	}{
		"no workspace":       {task.Params{}, "workspace: is required"},
		"bad mode":           {task.Params{Workspace: "/w", Profile: task.Profile{PermissionMode: "yolo"}}, `"yolo" is unknown`},
		"after plan":         {task.Params{Workspace: "/w", Profile: task.Profile{PermissionMode: task.Plan, AfterPlan: task.Plan}}, `"plan" is not a mode a task can continue in`},
		"negative max turns": {task.Params{Workspace: "/w", Profile: task.Profile{MaxTurns: -3}}, "profile.max_turns: -3 is negative"},
		"negative idle":      {task.Params{Workspace: "/w", IdleTimeout: -time.Second}, "idle_timeout: -1s is negative"},
		"attempts":           {task.Params{Workspace: "/w", MaxAttempts: 1000}, "max_attempts: 1000 is outside 1..100"},
		"carry out of order": {task.Params{Workspace: "/w", Carry: &task.Carry{Turn: 2, Pending: []task.QueuedPrompt{{Turn: 2}, {Turn: 1}}}}, "carry.pending"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := newEnv(t, defaultLimits)
			// The prompt arrives with the start, as Update-with-Start sends it.
			var prompt *update
			env.RegisterDelayedCallback(func() { prompt = sendPrompt(env, "p1", "hello") }, 0)
			env.ExecuteWorkflow(task.WorkflowName, tc.p)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(env.GetWorkflowError(), &appErr), "%v", env.GetWorkflowError())
			assert.Equal(t, task.ErrTypeInvalidParams, appErr.Type())
			assert.Contains(t, appErr.Error(), tc.says)

			// The prompt is rejected naming the problem, not as an unknown update.
			require.NotNil(t, prompt, "the prompt was sent")
			rejectedWith(t, prompt, task.ErrTypeInvalidParams)
			assert.Contains(t, prompt.err.Error(), "invalid task params: ")
			assert.Contains(t, prompt.err.Error(), tc.says)
		})
	}
}

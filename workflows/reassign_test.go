package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

const (
	hostB = "executor/host-b"
	hostC = "executor/host-c"
)

// reassignError is what RunTurn returns when its host drains or is lost: a non-retryable error
// of type errType carrying the attempt that ended (attempt 0: no details at all).
func reassignError(errType string, attempt int) error {
	opts := temporal.ApplicationErrorOptions{NonRetryable: true}
	if attempt > 0 {
		opts.Details = []any{task.ReassignDetails{Attempt: attempt}}
	}
	return temporal.NewApplicationErrorWithOptions("the host stopped running the turn", errType, opts)
}

// started records every RunTurn attempt as it starts, cancelled ones included (a mock with
// After records a call only once its delay has passed).
type started struct {
	mu    sync.Mutex
	calls []runCall
}

func (s *started) listen(env *testsuite.TestWorkflowEnvironment) {
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name != task.ActivityRunTurn {
			return
		}
		var in task.RunTurnInput
		if err := args.Get(&in); err != nil {
			panic(err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calls = append(s.calls, runCall{In: in, Queue: info.TaskQueue, Attempt: info.Attempt})
	})
}

func (s *started) get() []runCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]runCall(nil), s.calls...)
}

// where says, per call, its queue, its attempt on that queue and the attempts before it.
func where(calls []runCall) [][3]any {
	var out [][3]any
	for _, c := range calls {
		out = append(out, [3]any{c.Queue, int(c.Attempt), c.In.AttemptsBefore})
	}
	return out
}

// A turn whose host drains or is lost moves to the host AssignHost names, at once, numbering
// its attempts on from the one that ended; the move does not spend the task's MaxAttempts: the
// new host gets its own retries.
func TestReassignedTurnRunsOnAnotherHost(t *testing.T) {
	t.Parallel()
	for _, errType := range []string{task.ErrTypeHostLost, task.ErrTypeWorkerStopping} {
		t.Run(errType, func(t *testing.T) {
			t.Parallel()
			env := newEnv(t, defaultLimits)
			rec := &recorder{}
			rec.mockHosts(env, hostA, hostB)
			rec.mockControl(env)
			rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
				switch {
				case c.In.Turn == 1 && c.Queue == hostA && c.Attempt == 1:
					return task.RunTurnResult{}, temporalAppError("claude exited", task.ErrTypeClaudeExited)
				case c.In.Turn == 1 && c.Queue == hostA:
					return task.RunTurnResult{}, reassignError(errType, 2)
				case c.In.Turn == 1 && c.Attempt == 1:
					return task.RunTurnResult{}, temporalAppError("claude exited", task.ErrTypeClaudeExited)
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
			start := env.Now()
			env.ExecuteWorkflow(task.WorkflowName, p)
			st := result(t, env)

			calls := rec.runCalls()
			require.Equal(t, []int{1, 1, 1, 1, 2}, turnsOf(calls))
			assert.Equal(t, [][3]any{{hostA, 1, 0}, {hostA, 2, 0}, {hostB, 1, 2}, {hostB, 2, 2}, {warmB, 1, 0}}, where(calls),
				"two attempts on A, then B's own two attempts numbered on from A's second; turn 2 stays on B")
			assert.Equal(t, []string{defaultTestTaskQueue, defaultTestTaskQueue}, rec.assignCalls(),
				"AssignHost on the shared queue, once for the task and once for the move")
			assert.Equal(t, calls[1].At, calls[2].At, "the turn moves at once, without a retry interval")
			assert.Less(t, calls[4].At.Sub(start), time.Minute)
			assert.Equal(t, hostB, st.HostQueue)
			assert.Equal(t, 2, st.Totals.Turns)
			assert.Zero(t, st.Totals.FailedTurns)
			assert.Empty(t, st.LastError)
		})
	}
}

// One turn moves at most five times (defaultLimits.maxReassign): the sixth host that gives it
// up fails the turn, and the task goes on with its next prompt. An error without details still
// numbers the attempts on.
func TestReassignIsBoundedAtFiveMoves(t *testing.T) {
	t.Parallel()
	hosts := []string{"executor/h1", "executor/h2", "executor/h3", "executor/h4", "executor/h5", "executor/h6", "executor/h7"}
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hosts...)
	rec.mockControl(env)
	rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
		if c.In.Turn == 1 {
			return task.RunTurnResult{}, reassignError(task.ErrTypeWorkerStopping, 0)
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

	calls := rec.runCalls()
	require.Equal(t, []int{1, 1, 1, 1, 1, 1, 2}, turnsOf(calls), "one try and five moves, then the next turn")
	var queues []string
	var before []int
	for _, c := range calls[:6] {
		queues = append(queues, c.Queue)
		before = append(before, c.In.AttemptsBefore)
		assert.EqualValues(t, 1, c.Attempt, "a reassigned error is not retried on its queue")
	}
	assert.Equal(t, hosts[:6], queues)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, before)
	assert.Equal(t, hosts[6], calls[6].Queue, "the next turn asks for a host again")
	assert.Equal(t, 1, st.Totals.FailedTurns)
	assert.Equal(t, 2, st.Totals.Turns)
	assert.Contains(t, st.LastError, "turn 1 failed: RunTurn gave up (WorkerStopping: ")
}

// A host_lost signal naming the host that runs the turn cancels the turn there and moves it at
// once, numbering the attempts on from the signal's; a signal naming another host changes
// nothing.
func TestHostLostSignalMovesTheRunningTurn(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA, hostB)
	rec.mockControl(env)
	rec.mockRunTurn(env, completeTurn).After(time.Hour)
	var starts started
	starts.listen(env)
	var canceled []string
	env.SetOnActivityCanceledListener(func(info *activity.Info) {
		canceled = append(canceled, info.ActivityType.Name)
	})
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "one") }, 0)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(task.SignalHostLost, task.HostLost{HostQueue: hostC, Attempt: 7, Turn: 1})
	}, time.Minute)
	var during task.State
	env.RegisterDelayedCallback(func() {
		during = query(t, env)
		env.SignalWorkflow(task.SignalHostLost, task.HostLost{HostQueue: hostA, Attempt: 3, Turn: 1})
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, 3*time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, params())
	st := result(t, env)

	assert.Equal(t, hostA, during.HostQueue, "a signal for another host leaves the turn where it runs")
	assert.Equal(t, [][3]any{{hostA, 1, 0}, {hostB, 1, 3}}, where(starts.get()))
	assert.Equal(t, []string{task.ActivityRunTurn}, canceled, "the lost host's attempt is cancelled")
	assert.Len(t, rec.assignCalls(), 2)
	assert.Empty(t, rec.cancelCalls(), "no CancelTurn is sent to a lost host")
	assert.Equal(t, hostB, st.HostQueue)
	assert.Equal(t, 1, st.Totals.Turns)
	assert.Zero(t, st.Totals.FailedTurns)
}

// Between turns, a host_lost signal for the task's host makes the next turn ask for a host;
// one for another host does not.
func TestHostLostSignalBetweenTurns(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA, hostB)
	rec.mockControl(env)
	rec.mockRunTurn(env, completeTurn)
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "one") }, 0)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(task.SignalHostLost, task.HostLost{HostQueue: hostC})
		sendPrompt(env, "p2", "two")
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(task.SignalHostLost, task.HostLost{HostQueue: hostA, Attempt: 1, Turn: 2})
	}, 2*time.Minute)
	var between task.State
	env.RegisterDelayedCallback(func() {
		between = query(t, env)
		sendPrompt(env, "p3", "three")
		sendUpdate(env, task.UpdateClose, "close")
	}, 3*time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, params())
	st := result(t, env)

	assert.Empty(t, between.HostQueue, "the lost host is forgotten")
	calls := rec.runCalls()
	require.Equal(t, []int{1, 2, 3}, turnsOf(calls))
	assert.Equal(t, [][3]any{{hostA, 1, 0}, {warmA, 1, 0}, {hostB, 1, 0}}, where(calls),
		"a new turn starts its count afresh on its new host")
	assert.Len(t, rec.assignCalls(), 2)
	assert.Equal(t, hostB, st.HostQueue)
	assert.Zero(t, st.Totals.FailedTurns)
}

// A history written before turns moved between hosts (its version of "reassign-lost-host" is
// the default) keeps its meaning on replay: the turn fails where it ran, and no host is asked.
func TestOldHistoriesDoNotMoveTurns(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	env.OnGetVersion("reassign-lost-host", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	rec := &recorder{}
	rec.mockHosts(env, hostA, hostB)
	rec.mockControl(env)
	rec.mockRunTurn(env, func(c runCall) (task.RunTurnResult, error) {
		if c.In.Turn == 1 {
			return task.RunTurnResult{}, reassignError(task.ErrTypeHostLost, 1)
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

	assert.Equal(t, [][3]any{{hostA, 1, 0}, {warmA, 1, 0}}, where(rec.runCalls()))
	assert.Len(t, rec.assignCalls(), 1)
	assert.Equal(t, 1, st.Totals.FailedTurns)
	assert.Contains(t, st.LastError, "turn 1 failed: RunTurn gave up (HostLost: ")
}

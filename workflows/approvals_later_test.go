package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// A decision sent by signal (no worker took the Update) is checked and applied like the
// Update's: recorded, delivered once; sent again, or about a request that does not wait, it
// changes nothing.
func TestDecisionBySignal(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, completeTurn).After(time.Hour)
	var mu sync.Mutex
	var delivered []task.DecisionRecord
	env.OnActivity(task.ActivityDeliverDecision, mock.Anything, mock.Anything).Return(
		func(_ context.Context, d task.DecisionRecord) error {
			mu.Lock()
			defer mu.Unlock()
			delivered = append(delivered, d)
			return nil
		})
	asked := task.PendingRequest{RequestID: "r1", Turn: 1, Kind: task.KindTool, Tool: "Bash", Summary: "make deploy"}
	var waiting, after task.State
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "deploy") }, 0)
	env.RegisterDelayedCallback(func() {
		asked.Since = env.Now()
		env.SignalWorkflow(task.SignalPermissionAsked, asked)
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		waiting = query(t, env)
		env.SignalWorkflow(task.SignalDecide, task.Decision{RequestID: "r1", Allow: true, By: "carol"})
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(task.SignalDecide, task.Decision{RequestID: "r1", Allow: false, Reason: "changed my mind", By: "dave"})
		env.SignalWorkflow(task.SignalDecide, task.Decision{RequestID: "nope", Allow: true, By: "erin"})
	}, 3*time.Minute)
	env.RegisterDelayedCallback(func() {
		after = query(t, env)
		sendUpdate(env, task.UpdateClose, "close")
	}, 4*time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, params())
	result(t, env)

	assert.Len(t, waiting.Awaiting, 1, "the request waits before the decision")
	mu.Lock()
	defer mu.Unlock()
	if assert.Len(t, delivered, 1, "one decision delivered") {
		assert.Equal(t, "r1", delivered[0].RequestID)
		assert.Equal(t, task.OutcomeAllowed, delivered[0].Outcome)
		assert.Equal(t, "carol", delivered[0].By)
	}
	assert.Empty(t, after.Awaiting, "nothing waits after the decision")
}

// A moved deadline holds the request past its first deadline, and is recorded where the inbox
// reads it.
func TestExtendedDeadlineIsRecorded(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, completeTurn).After(3 * time.Hour)
	var mu sync.Mutex
	var moved []task.DeadlineMoved
	var expired []task.DecisionRecord
	env.OnActivity(task.ActivityRecordDeadline, mock.Anything, mock.Anything).Return(
		func(_ context.Context, m task.DeadlineMoved) error {
			mu.Lock()
			defer mu.Unlock()
			moved = append(moved, m)
			return nil
		})
	env.OnActivity(task.ActivityDeliverDecision, mock.Anything, mock.Anything).Return(
		func(_ context.Context, d task.DecisionRecord) error {
			mu.Lock()
			defer mu.Unlock()
			expired = append(expired, d)
			return nil
		}).Maybe()
	var extended *update
	var atFirstDeadline task.State
	var newDeadline time.Time
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "deploy") }, 0)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(task.SignalPermissionAsked, task.PendingRequest{RequestID: "r1", Turn: 1, Kind: task.KindTool,
			Tool: "Bash", Since: env.Now(), Deadline: env.Now().Add(time.Hour)})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		newDeadline = env.Now().Add(2 * time.Hour)
		extended = sendUpdate(env, task.UpdateExtendDeadline, "x1", task.ExtendDeadline{RequestID: "r1", Deadline: newDeadline})
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() { atFirstDeadline = query(t, env) }, 90*time.Minute)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, 4*time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, params())
	result(t, env)

	got := as[task.PendingRequest](t, extended)
	assert.True(t, got.Deadline.Equal(newDeadline), "the Update answers with the new deadline")
	assert.Len(t, atFirstDeadline.Awaiting, 1, "past its first deadline the request still waits")
	mu.Lock()
	defer mu.Unlock()
	if assert.Len(t, moved, 1) {
		assert.Equal(t, "r1", moved[0].RequestID)
		assert.Equal(t, defaultTestTaskID, moved[0].TaskID)
		assert.True(t, moved[0].Deadline.Equal(newDeadline))
	}
	if assert.Len(t, expired, 1, "the request expires at its new deadline") {
		assert.Equal(t, task.OutcomeExpired, expired[0].Outcome)
	}
}

// An "allow always" grant outlives the run that granted it: carried across continue-as-new, it
// is handed to the next run's turns.
func TestGrantCarriedAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	lim := defaultLimits
	lim.maxTurnsPerRun = 1
	env := newEnv(t, lim)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, completeTurn).After(time.Hour)
	env.OnActivity(task.ActivityDeliverDecision, mock.Anything, mock.Anything).Return(nil)
	sg := task.Suggestion{Key: "1", Label: "allow Bash(make test)", Raw: []byte(`{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"make test"}],"behavior":"allow","destination":"session"}`)}
	var decided *update
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "test it") }, 0)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(task.SignalPermissionAsked, task.PendingRequest{RequestID: "r1", Turn: 1, Kind: task.KindTool,
			Tool: "Bash", Summary: "make test", Suggestions: []task.Suggestion{sg}, Since: env.Now(), Deadline: env.Now().Add(time.Hour)})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		decided = sendUpdate(env, task.UpdateDecide, "d1", task.Decision{RequestID: "r1", Allow: true, Always: "1", By: "carol"})
	}, 2*time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, params())
	next := continuedWith(t, env)
	if rec := as[task.DecisionRecord](t, decided); rec.Grant == nil || rec.Grant.Key != "1" {
		t.Fatalf("the decision: %+v", rec)
	}
	want := []task.Grant{{Tool: "Bash", Suggestion: sg}}
	assert.Equal(t, want, next.Carry.Grants, "the grant is carried")

	env2 := newEnv(t, lim)
	rec2 := standard(env2)
	env2.RegisterDelayedCallback(func() {
		sendPrompt(env2, "p2", "test it again")
		sendUpdate(env2, task.UpdateClose, "close")
	}, 0)
	env2.ExecuteWorkflow(task.WorkflowName, next)
	calls := rec2.runCalls()
	if assert.Len(t, calls, 1) {
		assert.Equal(t, want, calls[0].In.Grants, "the next run's turn gets the grant")
	}
}

// A decision that arrives before the task hears of its request (a person reads requests from
// Postgres; the worker that recorded one may be lost before it told the task) is applied once
// the request is asked; on a run from before, it is dropped as it was.
func TestDecisionBeforeItsRequest(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		version workflow.Version
		applied bool
	}{{"waits for the ask", 1, true}, {"replayed from before", workflow.DefaultVersion, false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := newEnv(t, defaultLimits)
			if c.version == workflow.DefaultVersion {
				env.OnGetVersion(decideUnaskedVersion, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			}
			rec := &recorder{}
			rec.mockHosts(env, hostA)
			rec.mockControl(env)
			rec.mockRunTurn(env, completeTurn).After(time.Hour)
			rec.mockDeliver(env, 0)
			var waiting task.State
			env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "deploy") }, 0)
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(task.SignalDecide, task.Decision{RequestID: "r1", Allow: true, By: "carol"})
			}, time.Minute)
			env.RegisterDelayedCallback(func() {
				ask(env, toolAsk("r1", 1, env.Now()))
			}, 10*time.Minute)
			env.RegisterDelayedCallback(func() {
				waiting = query(t, env)
				sendUpdate(env, task.UpdateClose, "close")
			}, 11*time.Minute)
			env.ExecuteWorkflow(task.WorkflowName, params())
			result(t, env)

			delivered := rec.delivered()
			if c.applied {
				assert.Empty(t, waiting.Awaiting, "the request was decided as soon as it was asked")
				if assert.Len(t, delivered, 1) {
					assert.Equal(t, "r1", delivered[0].RequestID)
					assert.Equal(t, task.OutcomeAllowed, delivered[0].Outcome)
					assert.Equal(t, "carol", delivered[0].By)
				}
				return
			}
			assert.Len(t, waiting.Awaiting, 1, "the decision was dropped, the request waits")
			for _, d := range delivered {
				assert.NotEqual(t, task.OutcomeAllowed, d.Outcome, "nothing was allowed")
			}
		})
	}
}

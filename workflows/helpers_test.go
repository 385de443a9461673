package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

const hostA = "executor/host-a"

// newEnv is a test environment running TaskWorkflow with lim under its real
// name, with stub activities registered by name (tests mock their behaviour).
func newEnv(t *testing.T, lim limits) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, p task.Params) (task.State, error) {
		return runTask(ctx, p, lim)
	}, workflow.RegisterOptions{Name: task.WorkflowName})
	notMocked := errors.New("activity not mocked")
	env.RegisterActivityWithOptions(func(context.Context) (string, error) { return "", notMocked },
		activity.RegisterOptions{Name: task.ActivityAssignHost})
	env.RegisterActivityWithOptions(func(context.Context, string) (bool, error) { return false, notMocked },
		activity.RegisterOptions{Name: task.ActivityHostTakesWork})
	env.RegisterActivityWithOptions(func(context.Context, task.RunTurnInput) (task.RunTurnResult, error) {
		return task.RunTurnResult{}, notMocked
	}, activity.RegisterOptions{Name: task.ActivityRunTurn})
	env.RegisterActivityWithOptions(func(context.Context, task.InterruptTurnInput) error { return notMocked },
		activity.RegisterOptions{Name: task.ActivityInterruptTurn})
	env.RegisterActivityWithOptions(func(context.Context, task.InterruptTurnInput) error { return notMocked },
		activity.RegisterOptions{Name: task.ActivityStopExecutor})
	env.RegisterActivityWithOptions(func(context.Context, task.InterruptTurnInput) error { return notMocked },
		activity.RegisterOptions{Name: task.ActivityCancelTurn})
	env.RegisterActivityWithOptions(func(context.Context, task.DecisionRecord) error { return notMocked },
		activity.RegisterOptions{Name: task.ActivityDeliverDecision})
	env.RegisterActivityWithOptions(func(context.Context, task.DeadlineMoved) error { return notMocked },
		activity.RegisterOptions{Name: task.ActivityRecordDeadline})
	env.RegisterActivityWithOptions(func(context.Context, task.RewindInput) (task.Rewound, error) { return task.Rewound{}, notMocked },
		activity.RegisterOptions{Name: task.ActivityRewind})
	// The read side's record succeeds unless a test says otherwise.
	env.RegisterActivityWithOptions(func(context.Context, task.StateRecord) error { return nil },
		activity.RegisterOptions{Name: task.ActivityRecordState})
	return env
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func params() task.Params {
	return task.Params{Workspace: "/srv/work/t1", Profile: task.Profile{Model: "claude-test"}}
}

// runCall is one RunTurn attempt as the activity saw it.
type runCall struct {
	In      task.RunTurnInput
	Queue   string
	Attempt int32
	Info    activity.Info
	// At is the time on the workflow clock when the mocked attempt returns
	// (a mock with After records only when its delay has passed).
	At time.Time
}

// controlCall is one InterruptTurn or StopExecutor call.
type controlCall struct {
	In    task.InterruptTurnInput
	Queue string
}

// recorder keeps what the mocked activities were called with.
type recorder struct {
	mu         sync.Mutex
	runs       []runCall
	assigns    []string
	interrupts []controlCall
	stops      []controlCall
	cancels    []controlCall
	deliveries []deliveryCall
}

// deliveryCall is one DeliverDecision attempt.
type deliveryCall struct {
	Rec     task.DecisionRecord
	Queue   string
	Attempt int32
	// At is the time on the workflow clock of the attempt; Failed is whether it failed.
	At     time.Time
	Failed bool
}

func (r *recorder) deliveryCalls() []deliveryCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]deliveryCall(nil), r.deliveries...)
}

// delivered are the decisions DeliverDecision recorded, in order.
func (r *recorder) delivered() []task.DecisionRecord {
	var out []task.DecisionRecord
	for _, d := range r.deliveryCalls() {
		if !d.Failed {
			out = append(out, d.Rec)
		}
	}
	return out
}

// mockDeliver answers DeliverDecision: its first failFirst attempts fail as they do while no
// worker can reach the database, the others succeed.
func (r *recorder) mockDeliver(env *testsuite.TestWorkflowEnvironment, failFirst int) {
	env.OnActivity(task.ActivityDeliverDecision, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, rec task.DecisionRecord) error {
			info := activity.GetInfo(ctx)
			r.mu.Lock()
			defer r.mu.Unlock()
			failed := len(r.deliveries) < failFirst
			r.deliveries = append(r.deliveries, deliveryCall{Rec: rec, Queue: info.TaskQueue, Attempt: info.Attempt, At: env.Now(), Failed: failed})
			if failed {
				return temporal.NewApplicationError("the database is unavailable", task.ErrTypeStoreUnavailable)
			}
			return nil
		}).Maybe()
}

func (r *recorder) runCalls() []runCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]runCall(nil), r.runs...)
}

func (r *recorder) interruptCalls() []controlCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]controlCall(nil), r.interrupts...)
}

func (r *recorder) stopCalls() []controlCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]controlCall(nil), r.stops...)
}

func (r *recorder) cancelCalls() []controlCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]controlCall(nil), r.cancels...)
}

func (r *recorder) assignCalls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.assigns...)
}

// mockHosts answers AssignHost with hosts in turn (the last one repeating).
func (r *recorder) mockHosts(env *testsuite.TestWorkflowEnvironment, hosts ...string) {
	env.OnActivity(task.ActivityAssignHost, mock.Anything).Return(func(ctx context.Context) (string, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.assigns = append(r.assigns, activity.GetInfo(ctx).TaskQueue)
		i := min(len(r.assigns), len(hosts)) - 1
		return hosts[i], nil
	})
}

// mockRunTurn answers RunTurn with fn.
func (r *recorder) mockRunTurn(env *testsuite.TestWorkflowEnvironment, fn func(runCall) (task.RunTurnResult, error)) *testsuite.MockCallWrapper {
	return env.OnActivity(task.ActivityRunTurn, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
			info := activity.GetInfo(ctx)
			c := runCall{In: in, Queue: info.TaskQueue, Attempt: info.Attempt, Info: info, At: env.Now()}
			r.mu.Lock()
			r.runs = append(r.runs, c)
			r.mu.Unlock()
			return fn(c)
		})
}

// mockControl answers InterruptTurn and StopExecutor with success.
func (r *recorder) mockControl(env *testsuite.TestWorkflowEnvironment) {
	env.OnActivity(task.ActivityInterruptTurn, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in task.InterruptTurnInput) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.interrupts = append(r.interrupts, controlCall{In: in, Queue: activity.GetInfo(ctx).TaskQueue})
			return nil
		}).Maybe()
	env.OnActivity(task.ActivityStopExecutor, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in task.InterruptTurnInput) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.stops = append(r.stops, controlCall{In: in, Queue: activity.GetInfo(ctx).TaskQueue})
			return nil
		}).Maybe()
	env.OnActivity(task.ActivityCancelTurn, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in task.InterruptTurnInput) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.cancels = append(r.cancels, controlCall{In: in, Queue: activity.GetInfo(ctx).TaskQueue})
			return nil
		}).Maybe()
}

// standard mocks every activity: one host, and turns that complete with
// session "s1", last uuid "m<turn>", cost 0.25 and 10/20 tokens.
func standard(env *testsuite.TestWorkflowEnvironment) *recorder {
	r := &recorder{}
	r.mockHosts(env, hostA)
	r.mockRunTurn(env, completeTurn)
	r.mockControl(env)
	return r
}

func completeTurn(c runCall) (task.RunTurnResult, error) {
	return task.RunTurnResult{
		Status:          task.TurnCompleted,
		SessionID:       "s1",
		LastMessageUUID: "m" + strconv.Itoa(c.In.Turn),
		CostUSD:         0.25,
		InputTokens:     10,
		OutputTokens:    20,
		Attempt:         int(c.Attempt),
	}, nil
}

// update is the outcome of one Update sent to the test environment.
type update struct {
	accepted, rejected, completed bool
	err                           error
	value                         any
}

func sendUpdate(env *testsuite.TestWorkflowEnvironment, name, id string, args ...any) *update {
	u := &update{}
	env.UpdateWorkflow(name, id, &testsuite.TestUpdateCallback{
		OnAccept:   func() { u.accepted = true },
		OnReject:   func(err error) { u.rejected, u.err = true, err },
		OnComplete: func(v any, err error) { u.completed, u.value, u.err = true, v, err },
	}, args...)
	return u
}

func sendPrompt(env *testsuite.TestWorkflowEnvironment, id, text string) *update {
	return sendUpdate(env, task.UpdatePrompt, id, task.Prompt{Text: text})
}

// as decodes an Update's result into T.
func as[T any](t *testing.T, u *update) T {
	t.Helper()
	var v T
	if !u.completed || u.err != nil {
		t.Fatalf("update did not complete: accepted=%v rejected=%v err=%v", u.accepted, u.rejected, u.err)
	}
	if tv, ok := u.value.(T); ok {
		return tv
	}
	b, err := json.Marshal(u.value)
	if err != nil {
		t.Fatalf("encoding update result %#v: %v", u.value, err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding update result %s: %v", b, err)
	}
	return v
}

func query(t *testing.T, env *testsuite.TestWorkflowEnvironment) task.State {
	t.Helper()
	v, err := env.QueryWorkflow(task.QueryState)
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	var st task.State
	if err := v.Get(&st); err != nil {
		t.Fatalf("decoding state: %v", err)
	}
	return st
}

// result is the workflow's final State; it fails the test if the workflow did
// not complete successfully.
func result(t *testing.T, env *testsuite.TestWorkflowEnvironment) task.State {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	var st task.State
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatalf("decoding result: %v", err)
	}
	return st
}

func turnsOf(calls []runCall) []int {
	var out []int
	for _, c := range calls {
		out = append(out, c.In.Turn)
	}
	return out
}

// temporalAppError is what an activity returns for a failure of type errType
// that it leaves to the retry policy.
func temporalAppError(msg, errType string) error {
	return temporal.NewApplicationError(msg, errType)
}

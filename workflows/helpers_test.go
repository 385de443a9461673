package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/internal/devserver"
	"github.com/drover-run/drover/internal/testkit/temporaltest"
	"github.com/drover-run/drover/task"
)

const hostA = "executor/host-a"

// warmA and warmB are the warm queues of hostA and hostB: a task's next turn on the host that
// ran its previous one goes there.
var (
	warmA = task.WarmQueue(hostA)
	warmB = task.WarmQueue(hostB)
)

// newEnv is a test environment running TaskWorkflow with lim under its real
// name, with stub activities registered by name (tests mock their behaviour).
func newEnv(t *testing.T, lim limits) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(testLogger(t))
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

// serverRig is a real Temporal dev server with a client on it, for the tests that run a task on
// stub activities, fetch its history and replay it (or record it to testdata).
type serverRig struct {
	t   *testing.T
	ctx context.Context
	c   client.Client
}

// newServerRig starts a dev server with drover's search attributes and dials it; everything ends
// with the test.
func newServerRig(t *testing.T) *serverRig {
	t.Helper()
	srv := temporaltest.Start(t, devserver.SearchAttributeFlags(SearchAttributes()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	logger := testLogger(t)
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.Address(), Namespace: srv.Namespace(), Logger: logger})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return &serverRig{t: t, ctx: ctx, c: c}
}

// testLogger is the SDK's logger writing warnings and worse to the test's log.
func testLogger(t *testing.T) log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// sharedWorker is a worker on the shared queue running the workflow, AssignHost answered by
// assign, and a RecordState that records nothing; a test may register more before startWorkers.
func (r *serverRig) sharedWorker(queue string, assign func(context.Context) (string, error)) worker.Worker {
	w := worker.New(r.c, queue, worker.Options{})
	Register(w)
	w.RegisterActivityWithOptions(assign, activity.RegisterOptions{Name: task.ActivityAssignHost})
	w.RegisterActivityWithOptions(func(context.Context, task.StateRecord) error { return nil },
		activity.RegisterOptions{Name: task.ActivityRecordState})
	return w
}

// hostWorker is a worker on a host's queue running RunTurn with run; a worker on the host's
// control queue, started at once, answers StopExecutor with success.
func (r *serverRig) hostWorker(queue string, run func(context.Context, task.RunTurnInput) (task.RunTurnResult, error)) worker.Worker {
	cw := worker.New(r.c, task.ControlQueue(queue), worker.Options{})
	cw.RegisterActivityWithOptions(func(context.Context, task.InterruptTurnInput) error { return nil },
		activity.RegisterOptions{Name: task.ActivityStopExecutor})
	r.startWorkers(cw)
	w := newHostWorker(r.c, queue)
	w.RegisterActivityWithOptions(run, activity.RegisterOptions{Name: task.ActivityRunTurn})
	return w
}

// startWorkers starts ws and stops them at the test's end.
func (r *serverRig) startWorkers(ws ...worker.Worker) {
	r.t.Helper()
	for _, w := range ws {
		require.NoError(r.t, w.Start())
		r.t.Cleanup(w.Stop)
	}
}

// startTask starts taskID on the shared queue with p, by Update-with-Start carrying the prompt
// text as the Update "p1", and waits for the Update's result (into out, unless nil).
func (r *serverRig) startTask(taskID, shared string, p task.Params, text string, out any) client.WorkflowRun {
	r.t.Helper()
	start := r.c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{ID: taskID, TaskQueue: shared,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}, task.WorkflowName, p)
	h, err := r.c.UpdateWithStartWorkflow(r.ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: task.UpdatePrompt, UpdateID: "p1",
			Args: []any{task.Prompt{Text: text}}, WaitForStage: client.WorkflowUpdateStageCompleted}})
	require.NoError(r.t, err)
	require.NoError(r.t, h.Get(r.ctx, out))
	run, err := start.Get(r.ctx)
	require.NoError(r.t, err)
	return run
}

// update sends the Update name to taskID and waits for its result (into out, unless nil).
func (r *serverRig) update(taskID, name, updateID string, out any, args ...any) error {
	h, err := r.c.UpdateWorkflow(r.ctx, client.UpdateWorkflowOptions{WorkflowID: taskID, UpdateName: name,
		UpdateID: updateID, Args: args, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		return err
	}
	return h.Get(r.ctx, out)
}

// mustUpdate is update, failing the test on an error.
func (r *serverRig) mustUpdate(taskID, name, updateID string, out any, args ...any) {
	r.t.Helper()
	require.NoError(r.t, r.update(taskID, name, updateID, out, args...), "update %s %s", name, updateID)
}

// state is taskID's state by query; a failed query fails the test and is the zero state (it
// does not stop the test, so that state may be called from require.Eventually's condition).
func (r *serverRig) state(taskID string) task.State {
	r.t.Helper()
	var st task.State
	v, err := r.c.QueryWorkflow(r.ctx, taskID, "", task.QueryState)
	if assert.NoError(r.t, err) {
		assert.NoError(r.t, v.Get(&st))
	}
	return st
}

// finish waits for taskID's run to end and returns its final state and run id.
func (r *serverRig) finish(taskID string) (task.State, string) {
	r.t.Helper()
	run := r.c.GetWorkflow(r.ctx, taskID, "")
	var st task.State
	require.NoError(r.t, run.Get(r.ctx, &st))
	return st, run.GetRunID()
}

// history is the whole history of taskID's run.
func (r *serverRig) history(taskID, runID string) *historypb.History {
	r.t.Helper()
	var hist historypb.History
	iter := r.c.GetWorkflowHistory(r.ctx, taskID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(r.t, err)
		hist.Events = append(hist.Events, ev)
	}
	return &hist
}

// versionMarkers are the change ids of the history's version markers, in order.
func versionMarkers(t *testing.T, hist *historypb.History) []string {
	t.Helper()
	var out []string
	for _, ev := range hist.GetEvents() {
		if m := ev.GetMarkerRecordedEventAttributes(); m.GetMarkerName() == "Version" {
			var change string
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["change-id"], &change))
			out = append(out, change)
		}
	}
	return out
}

// replay requires that hist replays on the workflow as it is now.
func replay(t *testing.T, hist *historypb.History) {
	t.Helper()
	replayer := worker.NewWorkflowReplayer()
	Register(replayer)
	require.NoError(t, replayer.ReplayWorkflowHistory(testLogger(t), hist), "the history replays")
}

// readHistory is the history in testdata/name.
func readHistory(t *testing.T, name string) *historypb.History {
	t.Helper()
	path := filepath.Join("testdata", name)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var hist historypb.History
	require.NoError(t, (temporalproto.CustomJSONUnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &hist), "reading %s", path)
	return &hist
}

// writeHistory writes hist to path as the JSON readHistory reads.
func writeHistory(t *testing.T, hist *historypb.History, path string) {
	t.Helper()
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
	t.Logf("wrote %d events to %s", len(hist.GetEvents()), path)
}

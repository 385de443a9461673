package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// The suggestions the CLI offers with a Bash request, as drover keys them.
var (
	sgNpmTest = task.Suggestion{Key: "1", Label: "Bash(npm test:*)",
		Raw: json.RawMessage(`{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"npm test:*"}],"behavior":"allow","destination":"session"}`)}
	sgNpm = task.Suggestion{Key: "2", Label: "Bash(npm:*)",
		Raw: json.RawMessage(`{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"npm:*"}],"behavior":"allow","destination":"session"}`)}
)

// toolAsk is a Bash request of turn, asked at since, as an attempt signals it (without a
// deadline, so that the task's approval timeout sets it).
func toolAsk(id string, turn int, since time.Time) task.PendingRequest {
	return task.PendingRequest{RequestID: id, Turn: turn, Kind: task.KindTool, Tool: "Bash", Summary: "npm test",
		Suggestions: []task.Suggestion{sgNpmTest, sgNpm}, Since: since}
}

// questionAsk is an AskUserQuestion request with a single-select and a multi-select question.
func questionAsk(id string, turn int, since time.Time) task.PendingRequest {
	return task.PendingRequest{RequestID: id, Turn: turn, Kind: task.KindQuestion, Tool: "AskUserQuestion", Summary: "Which database?",
		Questions: []task.Question{
			{Question: "Which database?", Header: "DB", Options: []string{"Postgres", "SQLite"}},
			{Question: "Which checks?", Options: []string{"lint", "test", "bench"}, MultiSelect: true},
		},
		Since: since}
}

// planAsk is an ExitPlanMode request.
func planAsk(id string, turn int, since time.Time) task.PendingRequest {
	return task.PendingRequest{RequestID: id, Turn: turn, Kind: task.KindPlan, Tool: "ExitPlanMode", Summary: "plan: add a cache", Since: since}
}

// ask signals a request as the turn's attempt does.
func ask(env *testsuite.TestWorkflowEnvironment, r task.PendingRequest) {
	env.SignalWorkflow(task.SignalPermissionAsked, r)
}

func decide(env *testsuite.TestWorkflowEnvironment, id string, d task.Decision) *update {
	return sendUpdate(env, task.UpdateDecide, id, d)
}

// approvalEnv is a test environment whose turns run for turn on the workflow clock and whose
// DeliverDecision succeeds; attrs sees the search attributes the workflow upserts.
func approvalEnv(t *testing.T, lim limits, turn time.Duration) (*testsuite.TestWorkflowEnvironment, *recorder, *attrWatch) {
	t.Helper()
	env := newEnv(t, lim)
	attrs := watchAttrs(env)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, completeTurn).After(turn)
	rec.mockDeliver(env, 0)
	env.OnActivity(task.ActivityRecordDeadline, mock.Anything, mock.Anything).Return(nil).Maybe()
	return env, rec, attrs
}

// supervised are params of a supervised task; its turn timeout is long, so that one attempt
// may wait for a person for hours.
func supervised() task.Params {
	p := params()
	p.Profile.PermissionMode = task.Supervised
	p.TurnTimeout = 100 * time.Hour
	return p
}

// awaitingAttrs is DroverAwaitingApproval and DroverAwaitingSince as they stood after an upsert.
type awaitingAttrs struct {
	At                    time.Time
	Awaiting, HasAwaiting bool
	Since                 time.Time
	HasSince              bool
}

func (a awaitingAttrs) same(b awaitingAttrs) bool {
	return a.Awaiting == b.Awaiting && a.HasAwaiting == b.HasAwaiting && a.Since.Equal(b.Since) && a.HasSince == b.HasSince
}

// attrWatch reads the workflow's search attributes after each of its upserts, as the server
// would index them (an unset attribute is absent).
type attrWatch struct {
	interceptor.WorkerInterceptorBase
	mu   sync.Mutex
	seen []awaitingAttrs
}

func watchAttrs(env *testsuite.TestWorkflowEnvironment) *attrWatch {
	w := &attrWatch{}
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{w}})
	return w
}

// changes are the states the two attributes went through, consecutive repeats dropped, each
// with the time it began.
func (w *attrWatch) changes() []awaitingAttrs {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []awaitingAttrs
	for _, s := range w.seen {
		if len(out) == 0 || !out[len(out)-1].same(s) {
			out = append(out, s)
		}
	}
	return out
}

func (w *attrWatch) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &attrInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, w: w}
}

type attrInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	w *attrWatch
}

func (i *attrInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&attrOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, w: i.w})
}

type attrOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	w *attrWatch
}

func (o *attrOutbound) UpsertTypedSearchAttributes(ctx workflow.Context, updates ...temporal.SearchAttributeUpdate) error {
	err := o.Next.UpsertTypedSearchAttributes(ctx, updates...)
	sa := o.Next.GetTypedSearchAttributes(ctx)
	s := awaitingAttrs{At: o.Next.Now(ctx)}
	s.Awaiting, s.HasAwaiting = sa.GetBool(awaitingKey)
	s.Since, s.HasSince = sa.GetTime(sinceKey)
	o.w.mu.Lock()
	o.w.seen = append(o.w.seen, s)
	o.w.mu.Unlock()
	return err
}

// waitingSince is the attributes' state of a task waiting since since, from at.
func waitingSince(at, since time.Time) awaitingAttrs {
	return awaitingAttrs{At: at, Awaiting: true, HasAwaiting: true, Since: since, HasSince: true}
}

// notWaiting is the attributes' state of a task that waited and waits no more, from at.
func notWaiting(at time.Time) awaitingAttrs {
	return awaitingAttrs{At: at, HasAwaiting: true}
}

// assertAttrs compares attribute states, times with Equal.
func assertAttrs(t *testing.T, want, got []awaitingAttrs, msg string) {
	t.Helper()
	ok := len(want) == len(got)
	for i := 0; ok && i < len(want); i++ {
		ok = want[i].same(got[i]) && want[i].At.Equal(got[i].At)
	}
	if !ok {
		t.Errorf("%s:\nwant %s\ngot  %s", msg, fmtAttrs(want), fmtAttrs(got))
	}
}

func fmtAttrs(as []awaitingAttrs) string {
	out := ""
	for _, a := range as {
		since := "unset"
		if a.HasSince {
			since = a.Since.UTC().Format(time.TimeOnly)
		}
		awaiting := "unset"
		if a.HasAwaiting {
			awaiting = fmt.Sprint(a.Awaiting)
		}
		out += fmt.Sprintf("[%s awaiting=%s since=%s] ", a.At.UTC().Format(time.TimeOnly), awaiting, since)
	}
	return out
}

// assertRequests compares waiting requests, times with Equal.
func assertRequests(t *testing.T, want, got []task.PendingRequest, msg string) {
	t.Helper()
	norm := func(rs []task.PendingRequest) []task.PendingRequest {
		out := make([]task.PendingRequest, len(rs))
		for i, r := range rs {
			r.Since, r.Deadline = r.Since.UTC(), r.Deadline.UTC()
			out[i] = r
		}
		return out
	}
	assert.Equal(t, norm(want), norm(got), msg)
}

// normRecords makes decision records comparable with Equal.
func normRecords(rs []task.DecisionRecord) []task.DecisionRecord {
	out := make([]task.DecisionRecord, len(rs))
	for i, r := range rs {
		r.At = r.At.UTC()
		out[i] = r
	}
	return out
}

// sortedByRequest orders records by request id: decisions taken at the same moment are
// delivered by activities that run side by side.
func sortedByRequest(rs []task.DecisionRecord) []task.DecisionRecord {
	out := slices.Clone(rs)
	slices.SortStableFunc(out, func(a, b task.DecisionRecord) int { return strings.Compare(a.RequestID, b.RequestID) })
	return out
}

func withDeadline(r task.PendingRequest, d time.Time) task.PendingRequest {
	r.Deadline = d
	return r
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func TestAwaitingRequestsAreShownAndSearchable(t *testing.T) {
	t.Parallel()
	env, rec, attrs := approvalEnv(t, defaultLimits, 2*time.Hour)
	start := env.Now()
	at := func(d time.Duration) time.Time { return start.Add(d) }
	r1, r2 := toolAsk("r1", 1, at(10*time.Minute)), questionAsk("r2", 1, at(20*time.Minute))
	var both, one, none task.State
	var first, second *update
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "run the tests") }, 0)
	env.RegisterDelayedCallback(func() { ask(env, r1) }, 10*time.Minute)
	env.RegisterDelayedCallback(func() { ask(env, r2) }, 20*time.Minute)
	env.RegisterDelayedCallback(func() { both = query(t, env) }, 25*time.Minute)
	env.RegisterDelayedCallback(func() {
		first = decide(env, "d1", task.Decision{RequestID: "r1", Allow: true, By: "ana"})
	}, 30*time.Minute)
	env.RegisterDelayedCallback(func() { one = query(t, env) }, 31*time.Minute)
	env.RegisterDelayedCallback(func() {
		second = decide(env, "d2", task.Decision{RequestID: "r2", Reason: "ask me tomorrow", By: "ana"})
	}, 40*time.Minute)
	env.RegisterDelayedCallback(func() { none = query(t, env) }, 41*time.Minute)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, 3*time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, supervised())
	result(t, env)

	assert.Equal(t, task.StatusRunning, both.Status, "a waiting request does not change the task's status")
	assertRequests(t, []task.PendingRequest{
		withDeadline(r1, at(10*time.Minute+task.DefaultApprovalTimeout)),
		withDeadline(r2, at(20*time.Minute+task.DefaultApprovalTimeout)),
	}, both.Awaiting, "both requests wait, oldest first, each with the default deadline")
	assertRequests(t, []task.PendingRequest{withDeadline(r2, at(20*time.Minute+task.DefaultApprovalTimeout))}, one.Awaiting,
		"the decided request is gone, the other waits")
	assert.Empty(t, none.Awaiting)
	assert.Equal(t, task.OutcomeAllowed, as[task.DecisionRecord](t, first).Outcome)
	assert.Equal(t, task.OutcomeDenied, as[task.DecisionRecord](t, second).Outcome)
	assert.Len(t, rec.delivered(), 2)

	changes := attrs.changes()
	require.NotEmpty(t, changes)
	assert.False(t, changes[0].HasAwaiting || changes[0].HasSince, "a task that never waited publishes neither attribute")
	assertAttrs(t, []awaitingAttrs{
		waitingSince(at(10*time.Minute), r1.Since),
		waitingSince(at(30*time.Minute), r2.Since), // the oldest waiting request is now r2
		notWaiting(at(40 * time.Minute)),           // and DroverAwaitingSince is unset
	}, changes[1:], "DroverAwaitingApproval and DroverAwaitingSince")
}

func TestDecisionIsRecordedDeliveredAndGranted(t *testing.T) {
	t.Parallel()
	env, rec, _ := approvalEnv(t, defaultLimits, time.Hour)
	start := env.Now()
	at := func(d time.Duration) time.Time { return start.Add(d) }
	var allowed, again, denied *update
	var during task.State
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p1", "run the tests")
		sendPrompt(env, "p2", "and again")
	}, 0)
	env.RegisterDelayedCallback(func() { ask(env, toolAsk("r1", 1, env.Now())) }, 10*time.Minute)
	env.RegisterDelayedCallback(func() {
		allowed = decide(env, "d1", task.Decision{RequestID: "r1", Allow: true, By: "ana", Reason: "tests only", Always: "1"})
	}, 20*time.Minute)
	env.RegisterDelayedCallback(func() { during = query(t, env) }, 21*time.Minute)
	// Turn 2 is asked the same again (its grant did not cover it, say) and someone grants
	// the same suggestion: it is remembered once. Then a denial.
	env.RegisterDelayedCallback(func() {
		ask(env, toolAsk("r2", 2, env.Now()))
		ask(env, toolAsk("r3", 2, env.Now()))
	}, 70*time.Minute)
	env.RegisterDelayedCallback(func() {
		again = decide(env, "d2", task.Decision{RequestID: "r2", Allow: true, Always: "1"})
		denied = decide(env, "d3", task.Decision{RequestID: "r3", Reason: "not on Fridays", By: "bo"})
	}, 80*time.Minute)
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p3", "once more")
		sendUpdate(env, task.UpdateClose, "close")
	}, 3*time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, supervised())
	st := result(t, env)

	want := task.DecisionRecord{TaskID: defaultTestTaskID, RequestID: "r1", Turn: 1, Kind: task.KindTool,
		Outcome: task.OutcomeAllowed, By: "ana", Reason: "tests only", At: at(20 * time.Minute), Grant: &sgNpmTest}
	got := as[task.DecisionRecord](t, allowed)
	assert.Equal(t, normRecords([]task.DecisionRecord{want}), normRecords([]task.DecisionRecord{got}), "the decision as recorded")
	wantAgain := task.DecisionRecord{TaskID: defaultTestTaskID, RequestID: "r2", Turn: 2, Kind: task.KindTool,
		Outcome: task.OutcomeAllowed, By: "unknown", At: at(80 * time.Minute), Grant: &sgNpmTest}
	wantDenied := task.DecisionRecord{TaskID: defaultTestTaskID, RequestID: "r3", Turn: 2, Kind: task.KindTool,
		Outcome: task.OutcomeDenied, By: "bo", Reason: "not on Fridays", At: at(80 * time.Minute)}
	assert.Equal(t, normRecords([]task.DecisionRecord{wantAgain, wantDenied}),
		normRecords([]task.DecisionRecord{as[task.DecisionRecord](t, again), as[task.DecisionRecord](t, denied)}))

	calls := rec.deliveryCalls()
	require.Len(t, calls, 3)
	assert.Equal(t, normRecords([]task.DecisionRecord{want, wantAgain, wantDenied}), normRecords(sortedByRequest(rec.delivered())),
		"DeliverDecision gets each decision as it was recorded")
	for _, c := range calls {
		assert.Equal(t, defaultTestTaskQueue, c.Queue, "any worker delivers a decision: it runs on the workflow's queue")
		assert.Equal(t, int32(1), c.Attempt)
	}
	assert.True(t, calls[0].At.Equal(at(20*time.Minute)), "the decision is delivered when it is taken")

	grant := task.Grant{Tool: "Bash", Suggestion: sgNpmTest}
	assert.Equal(t, []task.Grant{grant}, during.Grants, "the grant is the request's own suggestion")
	assert.Empty(t, during.Awaiting)
	assert.Equal(t, []task.Grant{grant}, st.Grants, "granting the same suggestion twice remembers it once")

	runs := rec.runCalls()
	require.Equal(t, []int{1, 2, 3}, turnsOf(runs))
	assert.Empty(t, runs[0].In.Grants, "nothing was granted before turn 1")
	assert.Equal(t, []task.Grant{grant}, runs[1].In.Grants, "the next turn gets the grant")
	assert.Equal(t, []task.Grant{grant}, runs[2].In.Grants)
	for _, r := range runs {
		assert.Equal(t, task.DefaultApprovalTimeout, r.In.ApprovalTimeout, "the turn knows how long its requests wait")
		assert.Equal(t, task.Supervised, r.In.Profile.PermissionMode)
	}
}

func TestDecisionsThatCannotBeRecordedAreRefused(t *testing.T) {
	t.Parallel()
	env, rec, _ := approvalEnv(t, defaultLimits, time.Hour)
	start := env.Now()
	at := func(d time.Duration) time.Time { return start.Add(d) }
	tool, q, bare := toolAsk("t1", 1, at(time.Minute)), questionAsk("q1", 1, at(time.Minute)), toolAsk("n1", 1, at(time.Minute))
	bare.Suggestions = nil
	type refusal struct {
		name    string
		d       task.Decision
		errType string
		says    string
		u       *update
	}
	refusals := []*refusal{
		{name: "unknown id", d: task.Decision{RequestID: "nope", Allow: true},
			errType: task.ErrTypeNotPending, says: `request "nope" is not pending in this task`},
		{name: "another task's request", d: task.Decision{RequestID: "0b6c1f9e-other-task", Allow: true},
			errType: task.ErrTypeNotPending, says: "is not pending in this task"},
		{name: "already decided", d: task.Decision{RequestID: "d1", Allow: true, By: "cy"},
			errType: task.ErrTypeNotPending, says: "request d1 is not pending: it was denied by bo at " + stamp(at(5*time.Minute))},
		{name: "always, not offered", d: task.Decision{RequestID: "t1", Allow: true, Always: "3"},
			errType: task.ErrTypeInvalidDecision, says: `request t1 offers no suggestion "3"; it offers 1 (Bash(npm test:*)), 2 (Bash(npm:*))`},
		{name: "always, nothing offered", d: task.Decision{RequestID: "n1", Allow: true, Always: "1"},
			errType: task.ErrTypeInvalidDecision, says: `offers no suggestion "1"; it offers nothing to grant for the rest of the task`},
		{name: "always with a denial", d: task.Decision{RequestID: "t1", Always: "1", Reason: "no"},
			errType: task.ErrTypeInvalidDecision, says: "goes with an approval, not a denial"},
		{name: "denial without a reason", d: task.Decision{RequestID: "t1"},
			errType: task.ErrTypeInvalidDecision, says: "a denial needs a reason"},
		{name: "answers to a tool request", d: task.Decision{RequestID: "t1", Allow: true, Answers: map[string][]string{"Which database?": {"SQLite"}}},
			errType: task.ErrTypeInvalidDecision, says: "answers go with approving a question"},
		{name: "answer that is not an option", d: task.Decision{RequestID: "q1", Allow: true,
			Answers: map[string][]string{"Which database?": {"MySQL"}, "Which checks?": {"lint"}}},
			errType: task.ErrTypeInvalidDecision, says: `"MySQL" is not an option of question "Which database?"`},
		{name: "missing answer", d: task.Decision{RequestID: "q1", Allow: true,
			Answers: map[string][]string{"Which database?": {"SQLite"}}},
			errType: task.ErrTypeInvalidDecision, says: `question "Which checks?" has no answer`},
		{name: "no answers at all", d: task.Decision{RequestID: "q1", Allow: true},
			errType: task.ErrTypeInvalidDecision, says: `question "Which database?" has no answer`},
		{name: "two answers to a single-select question", d: task.Decision{RequestID: "q1", Allow: true,
			Answers: map[string][]string{"Which database?": {"SQLite", "Postgres"}, "Which checks?": {"lint"}}},
			errType: task.ErrTypeInvalidDecision, says: `question "Which database?" takes one answer`},
		{name: "an answer to a question not asked", d: task.Decision{RequestID: "q1", Allow: true,
			Answers: map[string][]string{"Which database?": {"SQLite"}, "Which checks?": {"lint"}, "Which editor?": {"vi"}, "Which shell?": {"sh"}}},
			errType: task.ErrTypeInvalidDecision, says: `the answers name a question that was not asked; the questions are ["Which database?" "Which checks?"]`},
	}
	var afterRefusals task.State
	var answered, deniedBare *update
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "work") }, 0)
	env.RegisterDelayedCallback(func() {
		ask(env, tool)
		ask(env, q)
		ask(env, bare)
		ask(env, toolAsk("d1", 1, env.Now()))
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		decide(env, "first", task.Decision{RequestID: "d1", Reason: "not now", By: "bo"})
	}, 5*time.Minute)
	env.RegisterDelayedCallback(func() {
		for i, r := range refusals {
			r.u = decide(env, fmt.Sprintf("refused-%d", i), r.d)
		}
	}, 10*time.Minute)
	env.RegisterDelayedCallback(func() { afterRefusals = query(t, env) }, 11*time.Minute)
	env.RegisterDelayedCallback(func() {
		answered = decide(env, "answer", task.Decision{RequestID: "q1", Allow: true, By: "ana",
			Answers: map[string][]string{"Which database?": {"SQLite"}, "Which checks?": {"lint", "test"}}})
		deniedBare = decide(env, "deny-bare", task.Decision{RequestID: "n1", Reason: "no", By: "ana"})
	}, 20*time.Minute)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, 2*time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, supervised())
	result(t, env)

	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			rejectedWith(t, r.u, r.errType)
			if r.u.err != nil {
				assert.Contains(t, r.u.err.Error(), r.says)
			}
			assert.False(t, r.u.accepted, "a refused decision is not accepted")
		})
	}
	deadline := at(time.Minute + task.DefaultApprovalTimeout)
	assertRequests(t, []task.PendingRequest{withDeadline(tool, deadline), withDeadline(q, deadline), withDeadline(bare, deadline)},
		afterRefusals.Awaiting, "refused decisions leave their requests waiting")
	assert.Empty(t, afterRefusals.Grants, "no refused grant was recorded")

	rec1 := as[task.DecisionRecord](t, answered)
	assert.Equal(t, map[string][]string{"Which database?": {"SQLite"}, "Which checks?": {"lint", "test"}}, rec1.Answers)
	assert.Equal(t, task.OutcomeAllowed, rec1.Outcome)
	assert.Equal(t, task.KindQuestion, rec1.Kind)
	assert.Equal(t, task.OutcomeDenied, as[task.DecisionRecord](t, deniedBare).Outcome)
	got := sortedByRequest(rec.delivered())
	require.Len(t, got, 3, "only the decisions taken were delivered: d1, n1, q1")
	assert.Equal(t, []string{"d1", "n1", "q1"}, []string{got[0].RequestID, got[1].RequestID, got[2].RequestID})
	assert.Equal(t, rec1.Answers, got[2].Answers, "the answers reach the host")
}

func TestDecisionDeliveryIsRetriedUntilItLands(t *testing.T) {
	t.Parallel()
	env := newEnv(t, defaultLimits)
	rec := &recorder{}
	rec.mockHosts(env, hostA)
	rec.mockControl(env)
	rec.mockRunTurn(env, completeTurn).After(time.Hour)
	const failures = 5
	rec.mockDeliver(env, failures)
	start := env.Now()
	var decided, twice *update
	var doneAt time.Time
	var during task.State
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "work") }, 0)
	env.RegisterDelayedCallback(func() { ask(env, toolAsk("r1", 1, env.Now())) }, time.Minute)
	env.RegisterDelayedCallback(func() {
		decided = &update{}
		env.UpdateWorkflow(task.UpdateDecide, "d1", &testsuite.TestUpdateCallback{
			OnAccept: func() { decided.accepted = true },
			OnReject: func(err error) { decided.rejected, decided.err = true, err },
			OnComplete: func(v any, err error) {
				decided.completed, decided.value, decided.err = true, v, err
				doneAt = env.Now()
			},
		}, task.Decision{RequestID: "r1", Allow: true, By: "ana"})
	}, 10*time.Minute)
	// While the decision cannot be delivered, it is recorded all the same.
	env.RegisterDelayedCallback(func() {
		during = query(t, env)
		twice = decide(env, "d2", task.Decision{RequestID: "r1", Reason: "changed my mind", By: "bo"})
	}, 10*time.Minute+2*time.Second)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, 2*time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, supervised())
	result(t, env)

	rec1 := as[task.DecisionRecord](t, decided)
	calls := rec.deliveryCalls()
	require.Len(t, calls, failures+1, "DeliverDecision is retried until it succeeds")
	for i, c := range calls {
		assert.Equal(t, int32(i+1), c.Attempt)
		assert.Equal(t, i < failures, c.Failed)
		assert.Equal(t, normRecords([]task.DecisionRecord{rec1}), normRecords([]task.DecisionRecord{c.Rec}), "every attempt delivers the same record")
	}
	assert.True(t, rec1.At.Equal(start.Add(10*time.Minute)), "the decision is dated when it was taken, not when it landed")
	assert.True(t, doneAt.Equal(calls[failures].At), "the Update completes when the decision has landed (at %v, landed %v)", doneAt, calls[failures].At)
	assert.True(t, doneAt.After(start.Add(10*time.Minute+time.Second)), "and not before its retries")
	assert.Empty(t, during.Awaiting, "the request is decided while its delivery is retried")
	rejectedWith(t, twice, task.ErrTypeNotPending)
	assert.Contains(t, twice.err.Error(), "it was allowed by ana at "+stamp(start.Add(10*time.Minute)))
}

func TestUnansweredRequestExpiresAtItsDeadline(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		timeout time.Duration // Params.ApprovalTimeout
		signal  time.Duration // the deadline the attempt signals, after the ask; 0 for none
		want    time.Duration // when it expires, after the ask
	}{
		{name: "default timeout", want: task.DefaultApprovalTimeout},
		{name: "timeout from params", timeout: 90 * time.Minute, want: 90 * time.Minute},
		{name: "deadline from the attempt", timeout: 90 * time.Minute, signal: 45 * time.Minute, want: 45 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env, rec, attrs := approvalEnv(t, defaultLimits, tc.want+2*time.Hour)
			start := env.Now()
			asked := start.Add(10 * time.Minute)
			deadline := asked.Add(tc.want)
			var before, after task.State
			var late *update
			p := supervised()
			p.ApprovalTimeout = tc.timeout
			env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "work") }, 0)
			env.RegisterDelayedCallback(func() {
				r := toolAsk("r1", 1, env.Now())
				if tc.signal != 0 {
					r.Deadline = r.Since.Add(tc.signal)
				}
				ask(env, r)
			}, 10*time.Minute)
			env.RegisterDelayedCallback(func() { before = query(t, env) }, 10*time.Minute+tc.want-time.Second)
			env.RegisterDelayedCallback(func() {
				after = query(t, env)
				late = decide(env, "late", task.Decision{RequestID: "r1", Allow: true, By: "ana"})
			}, 10*time.Minute+tc.want+time.Second)
			env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, tc.want+3*time.Hour)
			env.ExecuteWorkflow(task.WorkflowName, p)
			result(t, env)

			require.Len(t, before.Awaiting, 1, "the request waits until its deadline")
			assert.True(t, before.Awaiting[0].Deadline.Equal(deadline), "deadline %v, want %v", before.Awaiting[0].Deadline, deadline)
			assert.Empty(t, after.Awaiting, "and no longer after it")
			calls := rec.deliveryCalls()
			require.Len(t, calls, 1, "the expiry is delivered once")
			got := calls[0].Rec
			assert.True(t, calls[0].At.Equal(deadline), "delivered at the deadline (%v), not at %v", deadline, calls[0].At)
			assert.Equal(t, task.OutcomeExpired, got.Outcome, "an expiry is never a person's denial")
			assert.Equal(t, "drover", got.By)
			assert.True(t, got.At.Equal(deadline))
			assert.Equal(t, fmt.Sprintf("nobody answered this request within %s, so it was denied; do not ask for it again in this turn", tc.want), got.Reason)
			assert.Equal(t, [3]any{defaultTestTaskID, "r1", 1}, [3]any{got.TaskID, got.RequestID, got.Turn})
			assert.Nil(t, got.Grant)
			rejectedWith(t, late, task.ErrTypeNotPending)
			assert.Contains(t, late.err.Error(), "it was expired by drover at "+stamp(deadline))
			assertAttrs(t, []awaitingAttrs{waitingSince(asked, asked), notWaiting(deadline)}, attrs.changes()[1:],
				"the task stops showing as waiting when the request expires")
			wantTimeout := tc.timeout
			if wantTimeout == 0 {
				wantTimeout = task.DefaultApprovalTimeout
			}
			assert.Equal(t, wantTimeout, rec.runCalls()[0].In.ApprovalTimeout)
		})
	}
}

func TestExtendedDeadlineMovesTheExpiry(t *testing.T) {
	t.Parallel()
	env, rec, _ := approvalEnv(t, defaultLimits, 4*time.Hour)
	start := env.Now()
	at := func(d time.Duration) time.Time { return start.Add(d) }
	p := supervised()
	p.ApprovalTimeout = time.Hour
	var past, now, unknown, decided, extended *update
	var during task.State
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "work") }, 0)
	env.RegisterDelayedCallback(func() {
		ask(env, toolAsk("r1", 1, env.Now()))
		ask(env, toolAsk("r2", 1, env.Now()))
		ask(env, toolAsk("r3", 1, env.Now()))
	}, 10*time.Minute)
	env.RegisterDelayedCallback(func() { decide(env, "d2", task.Decision{RequestID: "r2", Allow: true}) }, 15*time.Minute)
	// A deadline can be brought forward too.
	env.RegisterDelayedCallback(func() {
		sendUpdate(env, task.UpdateExtendDeadline, "e-sooner", task.ExtendDeadline{RequestID: "r3", Deadline: at(40 * time.Minute)})
	}, 20*time.Minute)
	env.RegisterDelayedCallback(func() {
		past = sendUpdate(env, task.UpdateExtendDeadline, "e-past", task.ExtendDeadline{RequestID: "r1", Deadline: at(29 * time.Minute)})
		now = sendUpdate(env, task.UpdateExtendDeadline, "e-now", task.ExtendDeadline{RequestID: "r1", Deadline: env.Now()})
		unknown = sendUpdate(env, task.UpdateExtendDeadline, "e-unknown", task.ExtendDeadline{RequestID: "nope", Deadline: at(3 * time.Hour)})
		decided = sendUpdate(env, task.UpdateExtendDeadline, "e-decided", task.ExtendDeadline{RequestID: "r2", Deadline: at(3 * time.Hour)})
		extended = sendUpdate(env, task.UpdateExtendDeadline, "e-ok", task.ExtendDeadline{RequestID: "r1", Deadline: at(3 * time.Hour)})
	}, 30*time.Minute)
	env.RegisterDelayedCallback(func() { during = query(t, env) }, 2*time.Hour)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, 5*time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, p)
	result(t, env)

	rejectedWith(t, past, task.ErrTypeInvalidDecision)
	assert.Contains(t, past.err.Error(), "the new deadline has passed already")
	rejectedWith(t, now, task.ErrTypeInvalidDecision)
	rejectedWith(t, unknown, task.ErrTypeNotPending)
	rejectedWith(t, decided, task.ErrTypeNotPending)
	moved := as[task.PendingRequest](t, extended)
	assert.True(t, moved.Deadline.Equal(at(3*time.Hour)), "the Update answers with the request as it now stands: %v", moved.Deadline)
	assert.True(t, moved.Since.Equal(at(10*time.Minute)))

	require.Len(t, during.Awaiting, 1, "past its first deadline, the request still waits")
	assert.True(t, during.Awaiting[0].Deadline.Equal(at(3*time.Hour)))
	delivered := rec.deliveryCalls()
	require.Len(t, delivered, 3, "r2's decision, r3's and r1's expiries")
	sooner := delivered[1]
	assert.Equal(t, [2]any{"r3", task.OutcomeExpired}, [2]any{sooner.Rec.RequestID, sooner.Rec.Outcome})
	assert.True(t, sooner.At.Equal(at(40*time.Minute)), "a deadline brought forward expires at once then, not at %v", sooner.At)
	exp := delivered[2]
	assert.Equal(t, "r1", exp.Rec.RequestID)
	assert.Equal(t, task.OutcomeExpired, exp.Rec.Outcome)
	assert.True(t, exp.At.Equal(at(3*time.Hour)), "it expires at its new deadline, not at %v", exp.At)
	assert.Contains(t, exp.Rec.Reason, "within 2h50m0s")
}

func TestReaskedRequestKeepsItsClock(t *testing.T) {
	t.Parallel()
	env, rec, attrs := approvalEnv(t, defaultLimits, 2*time.Hour)
	start := env.Now()
	at := func(d time.Duration) time.Time { return start.Add(d) }
	p := supervised()
	p.ApprovalTimeout = time.Hour
	reask := toolAsk("r1", 1, at(40*time.Minute))
	reask.Deadline = at(100 * time.Minute)
	reask.Reasked = true
	reask.Summary = "npm test -- --watch"
	var afterReask, afterExpiry, afterDecided task.State
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "work") }, 0)
	env.RegisterDelayedCallback(func() { ask(env, toolAsk("r1", 1, env.Now())) }, 10*time.Minute)
	// The turn was retried: the new attempt asks the same request again.
	env.RegisterDelayedCallback(func() { ask(env, reask) }, 40*time.Minute)
	env.RegisterDelayedCallback(func() { afterReask = query(t, env) }, 41*time.Minute)
	env.RegisterDelayedCallback(func() { ask(env, reask) }, 80*time.Minute)
	env.RegisterDelayedCallback(func() { afterExpiry = query(t, env) }, 81*time.Minute)
	env.RegisterDelayedCallback(func() { ask(env, toolAsk("r2", 1, env.Now())) }, 90*time.Minute)
	env.RegisterDelayedCallback(func() { decide(env, "d2", task.Decision{RequestID: "r2", Allow: true, By: "ana"}) }, 95*time.Minute)
	env.RegisterDelayedCallback(func() { ask(env, toolAsk("r2", 1, env.Now())) }, 100*time.Minute)
	env.RegisterDelayedCallback(func() { afterDecided = query(t, env) }, 101*time.Minute)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, 3*time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, p)
	result(t, env)

	want := reask
	want.Since, want.Deadline = at(10*time.Minute), at(70*time.Minute)
	assertRequests(t, []task.PendingRequest{want}, afterReask.Awaiting,
		"the re-ask replaces the request but keeps when it was first asked and its deadline")
	assert.Empty(t, afterExpiry.Awaiting, "a re-ask of an expired request is not waiting again")
	assert.Empty(t, afterDecided.Awaiting, "a re-ask of a decided request is not waiting again")
	var outcomes []string
	for _, d := range rec.delivered() {
		outcomes = append(outcomes, d.RequestID+" "+string(d.Outcome)+" "+d.At.Sub(start).String())
	}
	assert.Equal(t, []string{"r1 expired 1h10m0s", "r2 allowed 1h35m0s"}, outcomes,
		"r1 expires at its first deadline, once; r2 is decided once")
	assertAttrs(t, []awaitingAttrs{
		waitingSince(at(10*time.Minute), at(10*time.Minute)),
		notWaiting(at(70 * time.Minute)),
		waitingSince(at(90*time.Minute), at(90*time.Minute)),
		notWaiting(at(95 * time.Minute)),
	}, attrs.changes()[1:], "re-asks move neither attribute")
}

func TestWithdrawnRequestIsClosed(t *testing.T) {
	t.Parallel()
	env, rec, attrs := approvalEnv(t, defaultLimits, 2*time.Hour)
	start := env.Now()
	at := func(d time.Duration) time.Time { return start.Add(d) }
	var afterClose, afterUnknown task.State
	var late *update
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "work") }, 0)
	env.RegisterDelayedCallback(func() {
		ask(env, toolAsk("r1", 1, env.Now()))
		ask(env, toolAsk("r2", 1, env.Now()))
	}, 10*time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(task.SignalPermissionClosed, task.PermissionClosed{RequestID: "r1", Reason: "the agent withdrew the request"})
	}, 20*time.Minute)
	env.RegisterDelayedCallback(func() { afterClose = query(t, env) }, 21*time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(task.SignalPermissionClosed, task.PermissionClosed{RequestID: "nope", Reason: "?"})
	}, 25*time.Minute)
	env.RegisterDelayedCallback(func() {
		afterUnknown = query(t, env)
		late = decide(env, "late", task.Decision{RequestID: "r1", Allow: true})
	}, 30*time.Minute)
	env.RegisterDelayedCallback(func() { decide(env, "d2", task.Decision{RequestID: "r2", Allow: true}) }, 40*time.Minute)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, 3*time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, supervised())
	result(t, env)

	require.Len(t, afterClose.Awaiting, 1)
	assert.Equal(t, "r2", afterClose.Awaiting[0].RequestID, "the withdrawn request is gone, the other waits")
	require.Len(t, afterUnknown.Awaiting, 1, "closing an unknown request changes nothing")
	rejectedWith(t, late, task.ErrTypeNotPending)
	assert.Contains(t, late.err.Error(), "it was cancelled by drover at "+stamp(at(20*time.Minute)))
	delivered := rec.delivered()
	require.Len(t, delivered, 1, "a withdrawn request is not delivered: its attempt closed it")
	assert.Equal(t, "r2", delivered[0].RequestID)
	assertAttrs(t, []awaitingAttrs{
		waitingSince(at(10*time.Minute), at(10*time.Minute)),
		notWaiting(at(40 * time.Minute)),
	}, attrs.changes()[1:], "attributes")
}

func TestEndedTurnClosesItsRequests(t *testing.T) {
	t.Parallel()
	env, rec, attrs := approvalEnv(t, defaultLimits, time.Hour)
	start := env.Now()
	at := func(d time.Duration) time.Time { return start.Add(d) }
	var whileTurnRuns, afterTurn, afterLate, duringTurn2 task.State
	var closed, late *update
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "work") }, 0)
	env.RegisterDelayedCallback(func() { ask(env, toolAsk("r1", 1, env.Now())) }, 10*time.Minute)
	env.RegisterDelayedCallback(func() { whileTurnRuns = query(t, env) }, 59*time.Minute)
	env.RegisterDelayedCallback(func() { afterTurn = query(t, env) }, 61*time.Minute)
	// A signal from turn 1 that comes after the turn ended (a lost attempt's, or one sent as
	// the turn ended): nothing waits for its answer.
	env.RegisterDelayedCallback(func() { ask(env, toolAsk("r3", 1, env.Now())) }, 70*time.Minute)
	env.RegisterDelayedCallback(func() {
		afterLate = query(t, env)
		closed = decide(env, "d1", task.Decision{RequestID: "r1", Allow: true})
		late = decide(env, "d3", task.Decision{RequestID: "r3", Allow: true})
		sendPrompt(env, "p2", "more work")
	}, 80*time.Minute)
	env.RegisterDelayedCallback(func() {
		ask(env, toolAsk("r4", 2, env.Now()))
		ask(env, toolAsk("r5", 1, env.Now())) // turn 1 is over; turn 2 runs
	}, 90*time.Minute)
	env.RegisterDelayedCallback(func() { duringTurn2 = query(t, env) }, 100*time.Minute)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, 3*time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, supervised())
	st := result(t, env)

	require.Len(t, whileTurnRuns.Awaiting, 1)
	assert.Empty(t, afterTurn.Awaiting, "the turn's end closed its request")
	assert.Empty(t, afterLate.Awaiting, "a request of an ended turn is not taken in")
	rejectedWith(t, closed, task.ErrTypeNotPending)
	assert.Contains(t, closed.err.Error(), "it was cancelled by drover at "+stamp(at(time.Hour)))
	rejectedWith(t, late, task.ErrTypeNotPending)
	assert.Contains(t, late.err.Error(), `request "r3" is not pending in this task`)
	require.Len(t, duringTurn2.Awaiting, 1)
	assert.Equal(t, "r4", duringTurn2.Awaiting[0].RequestID)
	assert.Empty(t, st.Awaiting, "turn 2's request closed with it")
	assert.Empty(t, rec.delivered(), "closed requests are not delivered")
	assertAttrs(t, []awaitingAttrs{
		waitingSince(at(10*time.Minute), at(10*time.Minute)),
		notWaiting(at(time.Hour)),
		waitingSince(at(90*time.Minute), at(90*time.Minute)),
		notWaiting(at(140 * time.Minute)),
	}, attrs.changes()[1:], "attributes")
}

func TestCancelWhileARequestWaits(t *testing.T) {
	t.Parallel()
	env, rec, attrs := approvalEnv(t, defaultLimits, 10*time.Hour)
	start := env.Now()
	at := func(d time.Duration) time.Time { return start.Add(d) }
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "work") }, 0)
	env.RegisterDelayedCallback(func() {
		ask(env, toolAsk("r1", 1, env.Now()))
		ask(env, planAsk("r2", 1, env.Now()))
	}, 10*time.Minute)
	env.RegisterDelayedCallback(env.CancelWorkflow, 30*time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, supervised())

	require.True(t, env.IsWorkflowCompleted())
	var canceledErr *temporal.CanceledError
	require.True(t, errors.As(env.GetWorkflowError(), &canceledErr), "the workflow ends cancelled: %v", env.GetWorkflowError())
	st := query(t, env)
	assert.Equal(t, task.StatusCancelled, st.Status)
	assert.Empty(t, st.Awaiting, "cancelling closes every waiting request")
	assert.Equal(t, []controlCall{{In: task.InterruptTurnInput{TaskID: defaultTestTaskID, Turn: 1}, Queue: task.ControlQueue(hostA)}},
		rec.cancelCalls(), "the host is told to stop the waiting turn at once")
	assert.Len(t, rec.stopCalls(), 1)
	assert.Empty(t, rec.deliveryCalls(), "nothing is delivered for cancelled requests")
	assertAttrs(t, []awaitingAttrs{
		waitingSince(at(10*time.Minute), at(10*time.Minute)),
		notWaiting(at(30 * time.Minute)),
	}, attrs.changes()[1:], "a cancelled task does not show as waiting")
}

func TestPromptWhileARequestWaitsIsQueued(t *testing.T) {
	t.Parallel()
	env, rec, _ := approvalEnv(t, defaultLimits, time.Hour)
	start := env.Now()
	at := func(d time.Duration) time.Time { return start.Add(d) }
	r1 := toolAsk("r1", 1, at(10*time.Minute))
	var queued, decided *update
	var during task.State
	var canceled []string
	env.SetOnActivityCanceledListener(func(info *activity.Info) { canceled = append(canceled, info.ActivityType.Name) })
	env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "work") }, 0)
	env.RegisterDelayedCallback(func() { ask(env, r1) }, 10*time.Minute)
	env.RegisterDelayedCallback(func() { queued = sendPrompt(env, "p2", "and then this") }, 20*time.Minute)
	env.RegisterDelayedCallback(func() { during = query(t, env) }, 25*time.Minute)
	env.RegisterDelayedCallback(func() { decided = decide(env, "d1", task.Decision{RequestID: "r1", Allow: true}) }, 30*time.Minute)
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, 3*time.Hour)
	env.ExecuteWorkflow(task.WorkflowName, supervised())
	st := result(t, env)

	acc := as[task.PromptAccepted](t, queued)
	assert.Equal(t, task.PromptAccepted{Turn: 2, PromptUUID: PromptUUID("", 2), Queued: 1}, acc, "the prompt waits behind the running turn")
	assert.Equal(t, 1, during.RunningTurn)
	require.Len(t, during.Pending, 1)
	assert.Equal(t, 2, during.Pending[0].Turn)
	assertRequests(t, []task.PendingRequest{withDeadline(r1, r1.Since.Add(task.DefaultApprovalTimeout))}, during.Awaiting,
		"the request still waits, as it was")
	assert.Equal(t, task.OutcomeAllowed, as[task.DecisionRecord](t, decided).Outcome, "and can still be decided")
	calls := rec.runCalls()
	require.Equal(t, []int{1, 2}, turnsOf(calls))
	assert.True(t, calls[0].At.Equal(at(time.Hour)), "turn 1 ran to its end")
	assert.True(t, calls[1].At.Equal(at(2*time.Hour)), "turn 2 ran after it")
	assert.Empty(t, canceled, "no turn was cancelled")
	assert.Empty(t, rec.interruptCalls(), "no turn was interrupted")
	assert.Empty(t, rec.cancelCalls())
	assert.Equal(t, 2, st.Totals.Turns)
	assert.Zero(t, st.Totals.FailedTurns)
}

func TestApprovedPlanMovesTheTaskToItsNextMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		afterPlan task.PermissionMode
		allow     bool
		want      task.PermissionMode
	}{
		{name: "approved, default", allow: true, want: task.Autonomous},
		{name: "approved, supervised next", afterPlan: task.Supervised, allow: true, want: task.Supervised},
		{name: "denied", afterPlan: task.Supervised, want: task.Plan},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env, rec, _ := approvalEnv(t, defaultLimits, time.Hour)
			p := supervised()
			p.Profile.PermissionMode = task.Plan
			p.Profile.AfterPlan = tc.afterPlan
			var before, after task.State
			var decided *update
			env.RegisterDelayedCallback(func() { sendPrompt(env, "p1", "plan a cache") }, 0)
			env.RegisterDelayedCallback(func() { ask(env, planAsk("r1", 1, env.Now())) }, 10*time.Minute)
			env.RegisterDelayedCallback(func() { before = query(t, env) }, 15*time.Minute)
			env.RegisterDelayedCallback(func() {
				decided = decide(env, "d1", task.Decision{RequestID: "r1", Allow: tc.allow, Reason: "use Redis instead", By: "ana"})
			}, 20*time.Minute)
			env.RegisterDelayedCallback(func() {
				after = query(t, env)
				sendPrompt(env, "p2", "go on")
				sendUpdate(env, task.UpdateClose, "close")
			}, 30*time.Minute)
			env.ExecuteWorkflow(task.WorkflowName, p)
			st := result(t, env)

			assert.Equal(t, task.Plan, before.PermissionMode)
			got := as[task.DecisionRecord](t, decided)
			if tc.allow {
				assert.Equal(t, tc.want, got.NextMode, "the record names the next mode, for the waiting turn")
				assert.Equal(t, rec.delivered()[0].NextMode, tc.want)
			} else {
				assert.Empty(t, got.NextMode)
			}
			assert.Equal(t, tc.want, after.PermissionMode)
			assert.Equal(t, tc.want, st.PermissionMode)
			calls := rec.runCalls()
			require.Equal(t, []int{1, 2}, turnsOf(calls))
			assert.Equal(t, task.Plan, calls[0].In.Profile.PermissionMode)
			assert.Equal(t, tc.want, calls[1].In.Profile.PermissionMode, "the next turn runs in the new mode")
		})
	}
}

func TestPromptModeAppliesFromItsTurn(t *testing.T) {
	t.Parallel()
	env, rec, _ := approvalEnv(t, defaultLimits, time.Hour)
	var during task.State
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p1", "one")
		sendUpdate(env, task.UpdatePrompt, "p2", task.Prompt{Text: "two", Mode: task.Supervised})
		sendPrompt(env, "p3", "three")
		sendUpdate(env, task.UpdatePrompt, "p4", task.Prompt{Text: "four", Mode: task.Plan})
		sendUpdate(env, task.UpdateClose, "close")
	}, 0)
	env.RegisterDelayedCallback(func() { during = query(t, env) }, 30*time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, params())
	st := result(t, env)

	assert.Equal(t, task.Autonomous, during.PermissionMode, "a queued prompt's mode does not apply before its turn")
	var modes []task.PermissionMode
	for _, c := range rec.runCalls() {
		modes = append(modes, c.In.Profile.PermissionMode)
	}
	assert.Equal(t, []task.PermissionMode{task.Autonomous, task.Supervised, task.Supervised, task.Plan}, modes,
		"a prompt's mode holds from its turn on, until another prompt changes it")
	assert.Equal(t, task.Plan, st.PermissionMode)
}

func TestContinueAsNewCarriesApprovals(t *testing.T) {
	t.Parallel()
	lim := defaultLimits
	lim.maxTurnsPerRun = 1
	env, _, _ := approvalEnv(t, lim, time.Hour)
	start := env.Now()
	at := func(d time.Duration) time.Time { return start.Add(d) }
	env.RegisterDelayedCallback(func() {
		sendPrompt(env, "p1", "one")
		sendPrompt(env, "p2", "two")
	}, 0)
	env.RegisterDelayedCallback(func() {
		ask(env, toolAsk("r1", 1, env.Now()))
		ask(env, toolAsk("r2", 1, env.Now()))
	}, 10*time.Minute)
	env.RegisterDelayedCallback(func() {
		decide(env, "d1", task.Decision{RequestID: "r1", Allow: true, Always: "2", By: "ana"})
	}, 20*time.Minute)
	p := supervised()
	p.ApprovalTimeout = 2 * time.Hour
	env.ExecuteWorkflow(task.WorkflowName, p)
	next := continuedWith(t, env)

	grant := task.Grant{Tool: "Bash", Suggestion: sgNpm}
	c := next.Carry
	assert.Equal(t, []task.Grant{grant}, c.Grants, "grants travel to the next run")
	assert.Empty(t, c.Awaiting, "the ended turn's requests are closed, not carried")
	var decided []string
	for _, d := range c.Decided {
		decided = append(decided, d.RequestID+" "+string(d.Outcome)+" by "+d.By)
	}
	assert.Equal(t, []string{"r1 allowed by ana", "r2 cancelled by drover"}, decided, "decisions travel to the next run")

	// A run can start with requests still waiting (the carry allows it): they stay decidable,
	// keep their deadlines and show in the search attributes.
	env2, rec2, attrs2 := approvalEnv(t, lim, time.Hour)
	start2 := env2.Now()
	waiting := []task.PendingRequest{
		withDeadline(toolAsk("w1", 1, start2.Add(-20*time.Minute)), start2.Add(100*time.Minute)),
		withDeadline(questionAsk("w2", 1, start2.Add(-10*time.Minute)), start2.Add(30*time.Minute)),
	}
	c.Awaiting = waiting
	var first task.State
	var late, carried *update
	env2.RegisterDelayedCallback(func() { first = query(t, env2) }, time.Second)
	env2.RegisterDelayedCallback(func() {
		late = decide(env2, "d1-again", task.Decision{RequestID: "r1", Reason: "no", By: "bo"})
		carried = decide(env2, "dw1", task.Decision{RequestID: "w1", Allow: true, By: "bo"})
		ask(env2, toolAsk("r2", 1, env2.Now())) // a late re-ask of a request closed in the run before
	}, time.Minute)
	env2.ExecuteWorkflow(task.WorkflowName, next)
	next2 := continuedWith(t, env2)

	assertRequests(t, waiting, first.Awaiting, "the carried requests wait in the new run")
	assert.Equal(t, []task.Grant{grant}, first.Grants)
	runs := rec2.runCalls()
	require.Equal(t, []int{2}, turnsOf(runs))
	assert.Equal(t, []task.Grant{grant}, runs[0].In.Grants, "the next run's turns get the grants of the run before")
	rejectedWith(t, late, task.ErrTypeNotPending)
	assert.Contains(t, late.err.Error(), "request r1 is not pending: it was allowed by ana at "+stamp(at(20*time.Minute)))
	got := as[task.DecisionRecord](t, carried)
	assert.Equal(t, task.OutcomeAllowed, got.Outcome, "a request carried over can be decided")
	assert.True(t, got.At.Equal(start2.Add(time.Minute)))
	delivered := rec2.delivered()
	require.Len(t, delivered, 2)
	assert.Equal(t, "w1", delivered[0].RequestID)
	assert.Equal(t, [2]any{"w2", task.OutcomeExpired}, [2]any{delivered[1].RequestID, delivered[1].Outcome})
	assert.True(t, delivered[1].At.Equal(waiting[1].Deadline), "a carried request expires at its carried deadline")
	assert.Contains(t, delivered[1].Reason, "within 40m0s", "counted from when it was first asked")
	assert.Empty(t, next2.Carry.Awaiting)
	assert.Equal(t, []task.Grant{grant}, next2.Carry.Grants)
	assertAttrs(t, []awaitingAttrs{
		waitingSince(start2, waiting[0].Since),
		waitingSince(start2.Add(time.Minute), waiting[1].Since),
		notWaiting(waiting[1].Deadline),
	}, attrs2.changes(), "the new run publishes the requests it carries")
}

func TestCompletedTaskLeavesNothingWaiting(t *testing.T) {
	t.Parallel()
	env, rec, attrs := approvalEnv(t, defaultLimits, time.Hour)
	start := env.Now()
	p := supervised()
	p.Carry = &task.Carry{Turn: 1, Awaiting: []task.PendingRequest{
		withDeadline(toolAsk("w1", 1, start.Add(-time.Hour)), start.Add(23*time.Hour)),
	}}
	env.RegisterDelayedCallback(func() { sendUpdate(env, task.UpdateClose, "close") }, time.Minute)
	env.ExecuteWorkflow(task.WorkflowName, p)
	st := result(t, env)

	assert.Equal(t, task.StatusCompleted, st.Status)
	assert.Empty(t, st.Awaiting, "a task that ends closes what still waited")
	assert.Empty(t, rec.deliveryCalls())
	changes := attrs.changes()
	require.NotEmpty(t, changes)
	assert.True(t, changes[len(changes)-1].same(notWaiting(time.Time{})), "the ended task does not show as waiting: %s", fmtAttrs(changes))
}

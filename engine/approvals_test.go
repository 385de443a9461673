package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/testkit/fakecli"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// notifier records what the engine tells the workflow.
type notifier struct {
	mu     sync.Mutex
	asked  []task.PendingRequest
	closed []task.PermissionClosed
}

func (n *notifier) Asked(_ context.Context, _ string, r task.PendingRequest) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.asked = append(n.asked, r)
	return nil
}

func (n *notifier) Closed(_ context.Context, _ string, c task.PermissionClosed) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = append(n.closed, c)
	return nil
}

func (n *notifier) askedList() []task.PendingRequest {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]task.PendingRequest(nil), n.asked...)
}

// waitAsked waits until the notifier was told of n requests, and returns them.
func (n *notifier) waitAsked(t *testing.T, want int) []task.PendingRequest {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if asked := n.askedList(); len(asked) >= want {
			return asked
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the workflow was not told of %d request(s): %+v", want, n.askedList())
	return nil
}

// answers are what the scripted CLI got back from the host, by its request id.
type answers struct {
	mu  sync.Mutex
	got map[string]map[string]any
}

func (a *answers) put(id string, l fakecli.Line) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.got == nil {
		a.got = map[string]map[string]any{}
	}
	resp, _ := l.Raw["response"].(map[string]any)
	payload, _ := resp["response"].(map[string]any)
	a.got[id] = payload
}

func (a *answers) of(id string) map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.got[id]
}

// ask makes the scripted CLI ask about a tool call the way the real one does in a supervised
// session: the PreToolUse hook first, can_use_tool when the hook says ask. It records both
// answers under id+"/hook" and id.
func ask(c *fakecli.CLI, got *answers, id, tool string, input any) {
	in, _ := json.Marshal(input)
	l, _ := c.Request(id+"-hook", fmt.Sprintf(`{"subtype":"hook_callback","callback_id":"tool_approval","input":{"hook_event_name":"PreToolUse","tool_name":%q,"tool_input":%s,"permission_mode":"bypassPermissions"},"tool_use_id":%q}`,
		tool, in, "toolu_"+id))
	got.put(id+"/hook", l)
	hook, _ := got.of(id + "/hook")["hookSpecificOutput"].(map[string]any)
	if hook != nil && hook["permissionDecision"] != claudecode.DecisionAsk {
		return
	}
	l, _ = c.Request(id, fmt.Sprintf(`{"subtype":"can_use_tool","tool_name":%q,"input":%s,"tool_use_id":%q,"decision_reason":"a hook asked","decision_reason_type":"hook"}`,
		tool, in, "toolu_"+id))
	got.put(id, l)
}

func supervisedRig(t *testing.T, script func(c *fakecli.CLI), mutate ...func(*engine.Config)) (*rig, *notifier) {
	n := &notifier{}
	r := newRig(t, script, append(mutate, func(c *engine.Config) { c.Notifier = n })...)
	return r, n
}

func (r *rig) supervisedReq(turn, attempt int, mode task.PermissionMode) engine.Request {
	req := r.req(turn, attempt, "go")
	req.Profile.PermissionMode = mode
	return req
}

// waitPending waits for the task's n-th pending request and returns it.
func (r *rig) waitPending(n int) store.PermissionRequest {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		reqs, err := store.ListPendingPermissions(r.ctx, r.db, r.taskID, 0)
		if err == nil && len(reqs) >= n {
			return reqs[n-1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.t.Fatalf("no %d pending request(s)", n)
	return store.PermissionRequest{}
}

func (r *rig) decide(p store.PermissionRequest, outcome task.Outcome, mutate ...func(*task.DecisionRecord)) {
	r.t.Helper()
	rec := task.DecisionRecord{TaskID: r.taskID, RequestID: p.RequestID, Turn: p.Turn, Kind: p.Kind,
		Outcome: outcome, By: "tester", Reason: "because", At: time.Now()}
	for _, m := range mutate {
		m(&rec)
	}
	if err := r.eng.Deliver(r.ctx, rec); err != nil {
		r.t.Fatal(err)
	}
}

func TestSupervisedToolWaitsForAPerson(t *testing.T) {
	t.Parallel()
	got := &answers{}
	r, n := supervisedRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			ask(c, got, "a1", "Bash", map[string]any{"command": "make deploy"})
			ask(c, got, "a2", "Bash", map[string]any{"command": "make deploy"}) // granted by the first answer
			c.Reply("done")
		})
	})
	done := make(chan error)
	go func() {
		_, err := r.eng.RunTurn(r.ctx, r.supervisedReq(1, 1, task.Supervised))
		done <- err
	}()
	p := r.waitPending(1)
	if p.ToolName != "Bash" || p.Summary != "make deploy" || p.Status != task.OutcomePending {
		t.Fatalf("pending = %+v", p)
	}
	// The workflow is told once the request is recorded, a moment after the row appears.
	asked := n.waitAsked(r.t, 1)
	if len(asked) != 1 || asked[0].RequestID != p.RequestID || len(asked[0].Suggestions) == 0 {
		t.Fatalf("the workflow was told %+v", asked)
	}
	grant := asked[0].Suggestions[0] // allow exactly this command
	r.decide(p, task.OutcomeAllowed, func(d *task.DecisionRecord) { d.Grant = &grant })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if hook := got.of("a1/hook")["hookSpecificOutput"].(map[string]any); hook["permissionDecision"] != "ask" {
		t.Fatalf("first hook answer %+v, want ask", hook)
	}
	a1 := got.of("a1")
	if a1["behavior"] != "allow" || a1["updatedPermissions"] == nil {
		t.Fatalf("can_use_tool answer %+v, want allow with the granted permission", a1)
	}
	if hook := got.of("a2/hook")["hookSpecificOutput"].(map[string]any); hook["permissionDecision"] != "allow" {
		t.Fatalf("the granted call was asked again: %+v", hook)
	}
	var evs, decisions []events.AgentEvent
	for _, ev := range r.events() {
		switch ev.Type {
		case events.TypePermissionRequest:
			evs = append(evs, ev)
		case events.TypePermissionDecision:
			decisions = append(decisions, ev)
		}
	}
	if len(evs) != 1 || evs[0].PendingID != p.RequestID || evs[0].Permission == nil || evs[0].Permission.Deadline.IsZero() {
		t.Fatalf("permission events %+v", evs)
	}
	if len(decisions) != 1 || decisions[0].PendingID != p.RequestID || decisions[0].ToolName != "Bash" ||
		decisions[0].Decision == nil || decisions[0].Decision.Outcome != "allowed" ||
		decisions[0].Decision.By != "tester" || decisions[0].Decision.Grant != grant.Label {
		t.Fatalf("decision events %+v", decisions)
	}
	if row, _ := store.GetPermission(r.ctx, r.db, r.taskID, p.RequestID); row.Status != task.OutcomeAllowed || row.DecidedBy != "tester" {
		t.Fatalf("row = %+v", row)
	}
}

func TestDenialsAndExpiry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		outcome   task.Outcome
		interrupt bool
	}{{task.OutcomeDenied, false}, {task.OutcomeExpired, true}} {
		t.Run(string(tc.outcome), func(t *testing.T) {
			t.Parallel()
			got := &answers{}
			r, _ := supervisedRig(t, func(c *fakecli.CLI) {
				c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
					c.Init()
					ask(c, got, "a1", "Write", map[string]any{"file_path": "/w/x", "content": "x"})
					c.Reply("ok")
				})
			})
			done := make(chan error)
			go func() {
				_, err := r.eng.RunTurn(r.ctx, r.supervisedReq(1, 1, task.Supervised))
				done <- err
			}()
			r.decide(r.waitPending(1), tc.outcome, func(d *task.DecisionRecord) { d.Reason = "not now" })
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			a := got.of("a1")
			interrupt, _ := a["interrupt"].(bool)
			if a["behavior"] != "deny" || !strings.Contains(fmt.Sprint(a["message"]), "not now") || interrupt != tc.interrupt {
				t.Fatalf("answer %+v, want deny with the reason, interrupt %v", a, tc.interrupt)
			}
		})
	}
}

// firstAsksThenDies is the script of a CLI whose first launch asks about `make test`, then dies
// before anybody answers; every launch then runs turn (the first one too, were it to live on).
func firstAsksThenDies(turn func(c *fakecli.CLI)) func(c *fakecli.CLI) {
	var launches atomic.Int32
	return func(c *fakecli.CLI) {
		first := launches.Add(1) == 1
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			if first {
				c.Writef(`{"type":"control_request","request_id":"lost","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"make test"},"tool_use_id":"toolu_lost"}}`)
				time.Sleep(200 * time.Millisecond)
				c.Exit(&claudecode.ExitError{Code: -1})
			}
			turn(c)
		})
	}
}

// A retry of the turn asks again about the same call: it finds the earlier request, pending or
// decided, and the person is not asked twice.
func TestReaskAfterRetryFindsTheEarlierRequest(t *testing.T) {
	t.Parallel()
	got := &answers{}
	r, n := supervisedRig(t, firstAsksThenDies(func(c *fakecli.CLI) {
		ask(c, got, "again", "Bash", map[string]any{"command": "make test"})
		ask(c, got, "other", "Bash", map[string]any{"command": "make lint"})
		c.Reply("ok")
	}))
	if _, e := r.run(r.supervisedReq(1, 1, task.Supervised)); e == nil || e.Type != task.ErrTypeClaudeExited {
		t.Fatalf("attempt 1: %v", e)
	}
	first := r.waitPending(1)
	// Decided while no attempt runs: the retry's re-ask is answered at once.
	r.decide(first, task.OutcomeAllowed)
	done := make(chan error)
	go func() {
		_, err := r.eng.RunTurn(r.ctx, r.supervisedReq(1, 2, task.Supervised))
		done <- err
	}()
	second := r.waitPending(1) // "make lint": something the lost attempt never asked
	if second.RequestID == first.RequestID || !second.Reasked {
		t.Fatalf("the new request %+v is not labelled asked anew after a retry", second)
	}
	r.decide(second, task.OutcomeAllowed)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if a := got.of("again"); a["behavior"] != "allow" {
		t.Fatalf("the re-ask was not answered with the earlier decision: %+v", a)
	}
	for _, a := range n.askedList() {
		if a.RequestID == first.RequestID && a.Reasked {
			t.Fatalf("the re-asked request was labelled new: %+v", a)
		}
	}
	var reqEvents int
	for _, ev := range r.events() {
		if ev.Type == events.TypePermissionRequest {
			reqEvents++
		}
	}
	if reqEvents != 2 {
		t.Fatalf("%d permission_request events, want 2 (the re-ask is not a new request)", reqEvents)
	}
}

// A request an earlier attempt asked and the retry did not is closed when the turn ends: nothing
// will ask for it again, so it must not stay in the inbox.
func TestRequestsLeftByATurnAreClosed(t *testing.T) {
	t.Parallel()
	got := &answers{}
	r, _ := supervisedRig(t, firstAsksThenDies(func(c *fakecli.CLI) {
		ask(c, got, "other", "Bash", map[string]any{"command": "make lint"})
		c.Reply("ok")
	}))
	if _, e := r.run(r.supervisedReq(1, 1, task.Supervised)); e == nil {
		t.Fatal("attempt 1 did not fail")
	}
	left := r.waitPending(1)
	done := make(chan error)
	go func() {
		_, err := r.eng.RunTurn(r.ctx, r.supervisedReq(1, 2, task.Supervised))
		done <- err
	}()
	r.decide(r.waitPending(2), task.OutcomeAllowed)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if row, err := store.GetPermission(r.ctx, r.db, r.taskID, left.RequestID); err != nil || row.Status != task.OutcomeCancelled {
		t.Fatalf("the request the retry did not ask again: %+v, %v", row, err)
	}
	var cancelled bool
	for _, ev := range r.events() {
		cancelled = cancelled || (ev.Type == events.TypePermissionCancelled && ev.PendingID == left.RequestID)
	}
	if !cancelled {
		t.Fatal("no permission_cancelled event for the request the turn left")
	}
}

// An agent that asks again, in the same attempt, for what a person just denied (a plan presented
// again, a command retried) asks the person again: the earlier denial is not its answer.
func TestAskingAgainAfterADenialAsksAgain(t *testing.T) {
	t.Parallel()
	got := &answers{}
	r, _ := supervisedRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			ask(c, got, "first", "Bash", map[string]any{"command": "make deploy"})
			ask(c, got, "second", "Bash", map[string]any{"command": "make deploy"})
			c.Reply("deployed")
		})
	})
	done := make(chan error)
	go func() {
		_, err := r.eng.RunTurn(r.ctx, r.supervisedReq(1, 1, task.Supervised))
		done <- err
	}()
	first := r.waitPending(1)
	r.decide(first, task.OutcomeDenied, func(d *task.DecisionRecord) { d.Reason = "not before the release" })
	second := r.waitPending(1)
	if second.RequestID == first.RequestID || second.Reasked {
		t.Fatalf("the second ask: %+v", second)
	}
	r.decide(second, task.OutcomeAllowed)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if a := got.of("first"); a["behavior"] != "deny" {
		t.Fatalf("the first ask: %+v", a)
	}
	if a := got.of("second"); a["behavior"] != "allow" {
		t.Fatalf("the second ask got %+v, want the person's second answer", a)
	}
}

func TestWithdrawnRequestIsClosed(t *testing.T) {
	t.Parallel()
	r, n := supervisedRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			c.Writef(`{"type":"control_request","request_id":"w1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"sleep 1"},"tool_use_id":"toolu_w1"}}`)
			time.Sleep(300 * time.Millisecond)
			c.CancelRequest("w1")
			time.Sleep(100 * time.Millisecond)
			c.Reply("moved on")
		})
	})
	if _, err := r.run(r.supervisedReq(1, 1, task.Supervised)); err != nil {
		t.Fatal(err)
	}
	reqs, _ := store.ListTaskPermissions(r.ctx, r.db, r.taskID)
	if len(reqs) != 1 || reqs[0].Status != task.OutcomeCancelled {
		t.Fatalf("requests %+v", reqs)
	}
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if len(closed) != 1 || closed[0].RequestID != reqs[0].RequestID {
		t.Fatalf("the workflow heard %+v", closed)
	}
	var cancelled bool
	for _, ev := range r.events() {
		cancelled = cancelled || (ev.Type == events.TypePermissionCancelled && ev.PendingID == reqs[0].RequestID)
	}
	if !cancelled {
		t.Fatal("no permission_cancelled event")
	}
}

// A turn cancelled while its request waits: the CLI withdraws the request as it is interrupted,
// and the withdrawal reaches the attempt's log although the attempt is ending.
func TestCancelledTurnLogsTheWithdrawnRequest(t *testing.T) {
	t.Parallel()
	r, _ := supervisedRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			c.Writef(`{"type":"control_request","request_id":"w1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"make deploy"},"tool_use_id":"toolu_w1"}}`)
			<-c.Interrupted()
			time.Sleep(50 * time.Millisecond) // the attempt is on its way out
			c.CancelRequest("w1")
			c.Hang()
		})
	})
	done := make(chan *engine.Error)
	go func() {
		_, e := r.run(r.supervisedReq(1, 1, task.Supervised))
		done <- e
	}()
	p := r.waitPending(1)
	if !r.eng.CancelTurn(r.taskID, 1) {
		t.Fatal("no turn to cancel")
	}
	if e := <-done; e == nil || e.Type != task.ErrTypeCancelled {
		t.Fatalf("the cancelled attempt ended with %v", e)
	}
	if row, err := store.GetPermission(r.ctx, r.db, r.taskID, p.RequestID); err != nil || row.Status != task.OutcomeCancelled {
		t.Fatalf("the request: %+v, %v", row, err)
	}
	var cancelled bool
	for _, ev := range r.events() {
		cancelled = cancelled || (ev.Type == events.TypePermissionCancelled && ev.PendingID == p.RequestID)
	}
	if !cancelled {
		t.Fatal("no permission_cancelled event in the cancelled attempt's log")
	}
}

func TestPlanModeAsksForThePlanAndMovesOn(t *testing.T) {
	t.Parallel()
	got := &answers{}
	var modes []string
	r, _ := supervisedRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			ask(c, got, "write", "Write", map[string]any{"file_path": "/w/x", "content": "x"})
			l, _ := c.Request("plan", `{"subtype":"can_use_tool","tool_name":"ExitPlanMode","input":{"plan":"# Do it\nstep 1","planFilePath":"/p.md"},"tool_use_id":"toolu_plan","requires_user_interaction":true}`)
			got.put("plan", l)
			ask(c, got, "after", "Bash", map[string]any{"command": "make"})
			modes = c.Modes()
			c.Reply("planned and done")
		})
	})
	done := make(chan error)
	go func() {
		_, err := r.eng.RunTurn(r.ctx, r.supervisedReq(1, 1, task.Plan))
		done <- err
	}()
	p := r.waitPending(1)
	if p.Kind != task.KindPlan || !strings.Contains(p.Summary, "Do it") {
		t.Fatalf("pending = %+v", p)
	}
	r.decide(p, task.OutcomeAllowed, func(d *task.DecisionRecord) { d.NextMode = task.Autonomous })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(modes) == 0 || modes[0] != claudecode.PermissionPlan {
		t.Fatalf("the CLI was not put in plan mode: %v", modes)
	}
	if a := got.of("write"); a["behavior"] != "deny" {
		t.Fatalf("a change in plan mode was not denied: %+v", a)
	}
	if a := got.of("plan"); a["behavior"] != "allow" {
		t.Fatalf("the approved plan: %+v", a)
	}
	hook, _ := got.of("after/hook")["hookSpecificOutput"].(map[string]any)
	if hook != nil && hook["permissionDecision"] == "ask" {
		t.Fatal("after the plan's approval the task (now autonomous) still asks")
	}
}

func TestQuestionsGetThePersonsAnswers(t *testing.T) {
	t.Parallel()
	got := &answers{}
	r, n := supervisedRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			l, _ := c.Request("q", `{"subtype":"can_use_tool","tool_name":"AskUserQuestion","input":{"questions":[{"question":"Which database?","header":"DB","multiSelect":false,"options":[{"label":"Postgres"},{"label":"SQLite"}]}]},"tool_use_id":"toolu_q","requires_user_interaction":true}`)
			got.put("q", l)
			c.Reply("ok")
		})
	})
	done := make(chan error)
	go func() {
		_, err := r.eng.RunTurn(r.ctx, r.supervisedReq(1, 1, task.Supervised))
		done <- err
	}()
	p := r.waitPending(1)
	asked := n.waitAsked(r.t, 1)
	if len(asked) != 1 || len(asked[0].Questions) != 1 || strings.Join(asked[0].Questions[0].Options, ",") != "Postgres,SQLite" || len(asked[0].Suggestions) != 0 {
		t.Fatalf("the workflow was told %+v", asked)
	}
	r.decide(p, task.OutcomeAllowed, func(d *task.DecisionRecord) {
		d.Answers = map[string][]string{"Which database?": {"Postgres"}}
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	in, _ := got.of("q")["updatedInput"].(map[string]any)
	if ans, _ := in["answers"].(map[string]any); ans["Which database?"] != "Postgres" {
		t.Fatalf("the CLI got %+v", got.of("q"))
	}
}

func TestStopHookAsksToCommitOnce(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed: it is what the Stop hook asks")
	}
	got := &answers{}
	r, _ := supervisedRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			for i, active := range []bool{false, true} {
				l, _ := c.Request(fmt.Sprint("stop", i), fmt.Sprintf(`{"subtype":"hook_callback","callback_id":"stop_check","input":{"hook_event_name":"Stop","cwd":%q,"stop_hook_active":%t}}`, c.Cmd.Dir, active))
				got.put(fmt.Sprint("stop", i), l)
			}
			c.Reply("ok")
		})
	})
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", r.workspace}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@e")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(r.workspace, "new.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.run(r.supervisedReq(1, 1, task.Supervised)); err != nil {
		t.Fatal(err)
	}
	if s := got.of("stop0"); s["decision"] != "block" || !strings.Contains(fmt.Sprint(s["reason"]), "new.txt") {
		t.Fatalf("first Stop hook: %+v, want block naming the change", s)
	}
	if s := got.of("stop1"); s["decision"] != "approve" {
		t.Fatalf("second Stop hook: %+v, want approve (never loop)", s)
	}
}

// loggedNotifier is a notifier that looks, each time it is told of a request, whether the task's
// log already holds the request's permission_request event.
type loggedNotifier struct {
	notifier
	db      store.DB
	missing atomic.Int32
}

func (n *loggedNotifier) Asked(ctx context.Context, taskID string, r task.PendingRequest) error {
	evs, err := store.ListEvents(ctx, n.db, taskID, 0, 1000)
	if err != nil {
		return err
	}
	found := false
	for _, ev := range evs {
		found = found || (ev.Type == string(events.TypePermissionRequest) && strings.Contains(string(ev.Payload), r.RequestID))
	}
	if !found {
		n.missing.Add(1)
	}
	return n.notifier.Asked(ctx, taskID, r)
}

// When the workflow hears of a request, its permission_request event is stored already: whoever
// sees the request waiting (the task's state, the page) finds it in the log, however slow the
// writer.
func TestRequestEventIsLoggedBeforeTheTaskHears(t *testing.T) {
	t.Parallel()
	n := &loggedNotifier{}
	r := newRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			ask(c, &answers{}, "a1", "Bash", map[string]any{"command": "make deploy"})
			c.Reply("done")
		})
	}, func(c *engine.Config) { c.Notifier, n.db = n, c.DB })
	done := make(chan error)
	go func() {
		_, err := r.eng.RunTurn(r.ctx, r.supervisedReq(1, 1, task.Supervised))
		done <- err
	}()
	p := r.waitPending(1)
	n.waitAsked(r.t, 1)
	r.decide(p, task.OutcomeAllowed)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m := n.missing.Load(); m != 0 {
		t.Fatalf("the workflow heard of %d request(s) before their event was in the log", m)
	}
}

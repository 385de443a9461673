package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// writePlan is a step that writes plan into the plan file the CLI's plan-mode reminder names.
func writePlan(plan string) func(*fa.Request) fa.Response {
	return func(r *fa.Request) fa.Response {
		return fa.Reply(fa.Text("Writing the plan."), fa.UseWrite(fa.PlanFilePath(r), plan))
	}
}

// resultOf returns the first tool result among the main requests after the first n whose
// content holds text.
func (e *env) resultOf(n int, text string) (fa.ToolResult, bool) {
	for _, tr := range e.toolResultsSince(n) {
		if strings.Contains(tr.Content, text) {
			return tr, true
		}
	}
	return fa.ToolResult{}, false
}

// A plan task plans without changing anything and asks a person to approve its plan. Denied with
// a reason, the agent stays in plan mode (it can present a plan again: the CLI refuses
// ExitPlanMode outside plan mode) and the model reads the reason. Approved, the task goes on in
// the profile's after_plan mode, in the same turn and the next: autonomous, the next tools run
// unasked; supervised (a second task), they are asked.
func TestPlanModeEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	const plan = "# Add the report\n\n1. Write report.txt.\n2. Check it.\n"
	const why = "Reviewer: add a step that checks the file."
	early := filepath.Join(e.workspace, "early.txt")
	after := filepath.Join(e.workspace, "after-plan.txt")
	later := filepath.Join(e.workspace, "later.txt")
	e.script(
		writePlan(plan),                        // plan mode: writing the plan file is not asked
		say(fa.UseWrite(early, "too early\n")), // a change while planning: denied, nobody asked
		say(fa.UseExitPlanMode("")),            // the plan, to a person: denied with a reason
		say(fa.UseExitPlanMode("")),            // presented again: approved
		say(fa.UseBash("echo after > "+after)), // autonomous now: runs unasked
		say(fa.Text("Planned and done.")),
		say(fa.UseBash("echo later > "+later)), // turn 2: still autonomous
		say(fa.Text("Turn two done.")),
	)
	id := e.taskID("plan-auto")
	p := e.params()
	p.Profile.PermissionMode, p.Profile.AfterPlan = task.Plan, task.Autonomous
	if _, err := e.tc.Start(e.ctx, id, p, task.Prompt{Text: "plan the report, then write it"}, ""); err != nil {
		t.Fatal(err)
	}
	first := e.waitAsked(id, "Add the report")
	if first.Kind != task.KindPlan || first.Tool != "ExitPlanMode" || len(first.Suggestions) != 0 {
		t.Errorf("the plan's request: %+v", first)
	}
	if _, err := os.Stat(early); err == nil {
		t.Error("a file was written while planning")
	}
	if tr, ok := e.resultOf(0, "plan mode"); !ok || !tr.IsError {
		t.Errorf("the model was not told that nothing changes while planning: %+v", e.toolResultsSince(0))
	}
	var shown bool
	for _, ev := range e.permissionRequests(id) {
		shown = shown || (ev.Agent.PendingID == first.RequestID && ev.Agent.Permission != nil && ev.Agent.Permission.Plan == plan)
	}
	if !shown {
		t.Error("the permission_request event does not show the plan")
	}
	mark := len(e.fake.MainRequests())
	e.mustDrover("task", "deny", id, "--reason", why)
	if second := e.waitAsked(id, "Add the report"); second.RequestID == first.RequestID {
		t.Fatalf("the denied plan still waits: %+v", second)
	}
	if tr, ok := e.resultOf(mark, why); !ok || !tr.IsError {
		t.Errorf("the model did not read the reviewer's reason: %+v", e.toolResultsSince(mark))
	}
	if st, _ := e.tc.State(e.ctx, id); st.PermissionMode != task.Plan {
		t.Errorf("after the denial the task runs in %q, want plan", st.PermissionMode)
	}
	mark = len(e.fake.MainRequests())
	if out := e.mustDrover("task", "approve", id, "--wait", "1m"); !strings.Contains(out, "continues in autonomous mode") {
		t.Errorf("drover task approve said %q", out)
	}
	st := e.waitTurns(id, 1)
	if tr, ok := e.resultOf(mark, "approved your plan"); !ok || !strings.Contains(tr.Content, "Write report.txt") {
		t.Errorf("the approval's tool result: %+v", e.toolResultsSince(mark))
	}
	if b, err := os.ReadFile(after); err != nil || strings.TrimSpace(string(b)) != "after" {
		t.Errorf("after the approval the command did not run: %q, %v", b, err)
	}
	if st.PermissionMode != task.Autonomous {
		t.Errorf("after the approval the task runs in %q", st.PermissionMode)
	}
	if out := e.mustDrover("task", "show", id); !strings.Contains(out, "mode        autonomous") {
		t.Errorf("drover task show:\n%s", out)
	}
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "and one more thing"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(id, 2)
	if _, err := os.Stat(later); err != nil {
		t.Errorf("turn 2's command did not run: %v", err)
	}
	if rows := e.requestRows(id); len(rows) != 2 || rows[0].Status != task.OutcomeDenied || rows[1].Status != task.OutcomeAllowed {
		t.Errorf("request rows: %+v", rows)
	}

	// After a plan, supervised: the next tools are asked, in this turn and the next.
	made := filepath.Join(e.workspace, "supervised.txt")
	e.script(
		writePlan(plan),
		say(fa.UseExitPlanMode("")),
		say(fa.UseBash("echo one > "+made)),
		say(fa.Text("Done under supervision.")),
		say(fa.UseBash("echo two >> "+made)),
		say(fa.Text("Turn two done.")),
	)
	sup := e.taskID("plan-supervised")
	p.Profile.AfterPlan = task.Supervised
	if _, err := e.tc.Start(e.ctx, sup, p, task.Prompt{Text: "plan, then work under supervision"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitAsked(sup, "Add the report")
	if out := e.mustDrover("task", "approve", sup, "--wait", "1m"); !strings.Contains(out, "continues in supervised mode") {
		t.Errorf("drover task approve said %q", out)
	}
	tool := e.waitAsked(sup, "echo one")
	if tool.Kind != task.KindTool {
		t.Errorf("after the plan: %+v", tool)
	}
	if _, err := os.Stat(made); err == nil {
		t.Error("the command ran before it was approved")
	}
	e.mustDrover("task", "approve", sup, tool.RequestID)
	if st := e.waitTurns(sup, 1); st.PermissionMode != task.Supervised {
		t.Errorf("after the plan the task runs in %q", st.PermissionMode)
	}
	if _, err := e.tc.Prompt(e.ctx, sup, task.Prompt{Text: "again"}, ""); err != nil {
		t.Fatal(err)
	}
	e.mustDrover("task", "approve", sup, e.waitAsked(sup, "echo two").RequestID)
	e.waitTurns(sup, 2)
	if n := lines(t, made); n != 2 {
		t.Errorf("%d commands ran after approvals, want 2", n)
	}
}

// The agent asks the person a question with options: the pending request shows the questions
// and options (the workflow's state, the permission_request event), an answer that is not one of
// the options is refused, and the chosen options, given through drover task approve --answer,
// reach the model as the tool's result.
func TestQuestionAnsweredWithOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	e.script(
		say(fa.UseAskUserQuestion(
			fa.AskQuestion{Question: "Which database?", Header: "DB", Options: []string{"Postgres", "SQLite"}},
			fa.AskQuestion{Question: "Which features?", Header: "Features", MultiSelect: true, Options: []string{"Auth", "Search", "Billing"}},
		)),
		say(fa.Text("Postgres with auth and search it is.")),
	)
	id := e.taskID("question")
	if _, err := e.tc.Start(e.ctx, id, e.supervisedParams(), task.Prompt{Text: "set up the app"}, ""); err != nil {
		t.Fatal(err)
	}
	q := e.waitAsked(id, "Which database?")
	if q.Kind != task.KindQuestion || len(q.Questions) != 2 ||
		strings.Join(q.Questions[0].Options, ",") != "Postgres,SQLite" || !q.Questions[1].MultiSelect ||
		strings.Join(q.Questions[1].Options, ",") != "Auth,Search,Billing" {
		t.Fatalf("the pending question: %+v", q)
	}
	evs := e.permissionRequests(id)
	if len(evs) != 1 || evs[0].Agent.Permission == nil || len(evs[0].Agent.Permission.Questions) != 2 ||
		len(evs[0].Agent.Permission.Questions[1].Options) != 3 {
		t.Fatalf("the permission_request event: %+v", evs)
	}
	if out, err := e.droverCLI("task", "approve", id, q.RequestID, "--answer", "Which database?=MySQL",
		"--answer", "Which features?=Auth"); err == nil || !strings.Contains(out, "not an option") {
		t.Errorf("an answer that is not an option: %v\n%s", err, out)
	}
	if row := e.row(id, q.RequestID); row.Status != task.OutcomePending {
		t.Fatalf("the refused answer changed the request: %s", row.Status)
	}
	mark := len(e.fake.MainRequests())
	e.mustDrover("task", "approve", id, q.RequestID, "--answer", "Which database?=Postgres",
		"--answer", "Which features?=Auth", "--answer", "Which features?=Search")
	e.waitTurns(id, 1)
	tr, ok := e.resultOf(mark, `"Which database?"="Postgres"`)
	if !ok || tr.IsError || !strings.Contains(tr.Content, `"Which features?"="Auth, Search"`) {
		t.Errorf("the model read %+v", e.toolResultsSince(mark))
	}
}

// "Allow always": approving a request with one of its suggestions (--always KEY) spares the same
// command later in the task, in this turn and the next (no new request, and the command runs);
// a different command is still asked.
func TestAllowAlways(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	marker := filepath.Join(e.workspace, "always.txt")
	same := "echo again >> " + marker
	e.script(
		say(fa.UseBash(same)),
		say(fa.UseBash(same)), // granted: not asked
		say(fa.UseBash("echo other")),
		say(fa.Text("Both done.")),
		say(fa.UseBash(same)), // turn 2: still granted
		say(fa.Text("Again done.")),
	)
	id := e.taskID("always")
	if _, err := e.tc.Start(e.ctx, id, e.supervisedParams(), task.Prompt{Text: "append twice"}, ""); err != nil {
		t.Fatal(err)
	}
	r := e.waitAsked(id, same)
	if len(r.Suggestions) == 0 || r.Suggestions[0].Key != "1" || !strings.Contains(r.Suggestions[0].Label, same) {
		t.Fatalf("the request offers %+v", r.Suggestions)
	}
	if out, err := e.droverCLI("task", "approve", id, r.RequestID, "--always", "9"); err == nil || !strings.Contains(out, "offers no suggestion") {
		t.Errorf("a suggestion the request does not offer: %v\n%s", err, out)
	}
	out := e.mustDrover("task", "approve", id, r.RequestID, "--always", "1", "--wait", "1m")
	if !strings.Contains(out, "granted for the rest of the task: "+r.Suggestions[0].Label) {
		t.Errorf("drover task approve --always said %q", out)
	}
	other := e.waitAsked(id, "echo other")
	if n := lines(t, marker); n != 2 {
		t.Errorf("the granted command ran %d times before the other was asked, want 2", n)
	}
	e.mustDrover("task", "approve", id, other.RequestID)
	st := e.waitTurns(id, 1)
	if len(st.Grants) != 1 || st.Grants[0].Tool != "Bash" {
		t.Errorf("grants: %+v", st.Grants)
	}
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "once more"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(id, 2)
	if n := lines(t, marker); n != 3 {
		t.Errorf("the granted command ran %d times, want 3", n)
	}
	if rows := e.requestRows(id); len(rows) != 2 {
		t.Errorf("%d requests, want 2 (the granted command asked once)", len(rows))
	}
}

// A request nobody answers by its deadline (ApprovalTimeout 6 s) is denied by drover with an
// interrupt: the turn ends interrupted, the model is not called again in it, and the row says
// expired, decided by drover. A deadline extended before it passes holds the request open.
func TestApprovalDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	late := filepath.Join(e.workspace, "late.txt")
	extended := filepath.Join(e.workspace, "extended.txt")
	e.script(
		say(fa.UseBash("echo late > "+late)),
		say(fa.UseBash("echo extended > "+extended)), // turn 2
		say(fa.Text("Ran in time.")),
	)
	id := e.taskID("deadline")
	p := e.supervisedParams()
	// Long enough for the test to see the second request and extend it on a loaded machine.
	const deadline = 6 * time.Second
	p.ApprovalTimeout = deadline
	if _, err := e.tc.Start(e.ctx, id, p, task.Prompt{Text: "run it, if anybody lets you"}, ""); err != nil {
		t.Fatal(err)
	}
	r := e.waitAsked(id, "echo late")
	if got := r.Deadline.Sub(r.Since); got < deadline-100*time.Millisecond || got > deadline+100*time.Millisecond {
		t.Errorf("deadline %s after the ask, want %s", got, deadline)
	}
	st := e.waitTurns(id, 1)
	row := e.row(id, r.RequestID)
	if row.Status != task.OutcomeExpired || row.DecidedBy != "drover" || !strings.Contains(row.DecisionReason, "nobody answered") {
		t.Errorf("the expired request's row: %s by %q (%q)", row.Status, row.DecidedBy, row.DecisionReason)
	}
	turn, err := store.GetTurn(e.ctx, e.db(), id, 1)
	if err != nil {
		t.Fatal(err)
	}
	if turn.Status != task.TurnInterrupted || st.Totals.FailedTurns != 0 {
		t.Errorf("turn 1: %s, state %+v", turn.Status, st)
	}
	if n := len(e.fake.MainRequests()); n != 1 {
		t.Errorf("the model was called %d times in the expired turn, want once", n)
	}
	if _, err := os.Stat(late); err == nil {
		t.Error("the expired command ran")
	}

	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "try again"}, ""); err != nil {
		t.Fatal(err)
	}
	r = e.waitAsked(id, "echo extended")
	moved := time.Now().Add(time.Minute).UTC().Truncate(time.Second)
	ext, err := e.tc.ExtendDeadline(e.ctx, id, r.RequestID, moved)
	if err != nil || !ext.Deadline.Equal(moved) {
		t.Fatalf("extending the deadline: %+v, %v", ext, err)
	}
	time.Sleep(time.Until(r.Deadline.Add(2 * time.Second)))
	if row := e.row(id, r.RequestID); row.Status != task.OutcomePending || !row.Deadline.Equal(moved) {
		t.Errorf("past its first deadline the extended request is %s, deadline %s (want pending, %s)", row.Status, row.Deadline, moved)
	}
	if aw := e.waitAwaiting(id, 1); !aw[0].Deadline.Equal(moved) {
		t.Errorf("the workflow's deadline: %s, want %s", aw[0].Deadline, moved)
	}
	e.mustDrover("task", "approve", id, r.RequestID)
	e.waitTurns(id, 2)
	if _, err := os.Stat(extended); err != nil {
		t.Errorf("the command approved after its first deadline did not run: %v", err)
	}
}

// A prompt sent while a request waits is queued behind the turn: the request stays pending and
// listed (the workflow's state, drover task pending), and once it is approved the turn ends and
// the queued prompt runs as the next turn.
func TestPromptWhileRequestWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	marker := filepath.Join(e.workspace, "first.txt")
	e.script(
		say(fa.UseBash("echo first > "+marker)),
		say(fa.Text("First done.")),
		say(fa.Text("Second prompt answered.")),
	)
	id := e.taskID("queued")
	if _, err := e.tc.Start(e.ctx, id, e.supervisedParams(), task.Prompt{Text: "first prompt"}, ""); err != nil {
		t.Fatal(err)
	}
	r := e.waitAsked(id, "echo first")
	acc, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "second prompt"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if acc.Turn != 2 || acc.Queued != 1 {
		t.Errorf("the prompt was accepted as %+v, want turn 2 behind the running one", acc)
	}
	time.Sleep(time.Second)
	st, err := e.tc.State(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Awaiting) != 1 || st.Awaiting[0].RequestID != r.RequestID || len(st.Pending) != 1 || st.RunningTurn != 1 {
		t.Errorf("with a prompt queued: awaiting %+v, pending %+v, running %d", st.Awaiting, st.Pending, st.RunningTurn)
	}
	if rows := e.pendingOf(id); len(rows) != 1 || rows[0].RequestID != r.RequestID || e.row(id, r.RequestID).Status != task.OutcomePending {
		t.Errorf("drover task pending: %+v", rows)
	}
	if n := len(e.fake.MainRequests()); n != 1 {
		t.Errorf("the queued prompt reached the model early: %d requests", n)
	}
	e.mustDrover("task", "approve", id)
	e.waitTurns(id, 2)
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the approved command did not run: %v", err)
	}
	reqs := e.fake.MainRequests()
	last := reqs[len(reqs)-1]
	if last.LastUserText() != "second prompt" || last.PromptCount("second prompt") != 1 || len(last.ToolResults()) != 1 {
		t.Errorf("the second turn sent %q (prompt %d times, %d tool results before it)", last.LastUserText(), last.PromptCount("second prompt"), len(last.ToolResults()))
	}
}

// drover's Stop hook: in a git work tree with an uncommitted file, an agent about to end its turn
// is asked once to commit it or say why not (the model reads "Stop hook feedback" naming the
// file), and the turn then ends: the hook never loops. Outside a git work tree nothing is asked.
func TestStopHookAsksToCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	e.script(
		say(fa.Text("Nothing to do here.")),
		say(fa.Text("All done.")),
		say(fa.Text("notes.txt stays uncommitted: it is a scratch file.")),
	)
	id := e.taskID("stop-hook")
	if _, err := e.tc.Start(e.ctx, id, e.supervisedParams(), task.Prompt{Text: "outside git"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(id, 1)
	for _, r := range e.fake.MainRequests() {
		if strings.Contains(string(r.Body), "Stop hook feedback") {
			t.Fatal("outside a git work tree the agent was asked to commit")
		}
	}
	if n := len(e.fake.MainRequests()); n != 1 {
		t.Fatalf("outside git the turn called the model %d times, want once", n)
	}

	git := exec.Command("git", "-C", e.workspace, "init", "-q")
	if out, err := git.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(e.workspace, "notes.txt"), []byte("scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "inside git"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(id, 2)
	reqs := e.fake.MainRequests()
	if len(reqs) != 3 {
		t.Fatalf("the turn in git called the model %d times, want twice", len(reqs)-1)
	}
	fed := reqs[2].LastUserText()
	if !strings.Contains(fed, "Stop hook feedback") || !strings.Contains(fed, "notes.txt") {
		t.Errorf("the model's second request in the turn ends with %q", fed)
	}
	turn, err := store.GetTurn(e.ctx, e.db(), id, 2)
	if err != nil {
		t.Fatal(err)
	}
	if turn.Status != task.TurnCompleted {
		t.Errorf("turn 2: %s", turn.Status)
	}
	if !hasText(turnEvents(e.events(id), 2, 0), "stays uncommitted") {
		t.Error("the agent's answer to the hook is not in the log")
	}
}

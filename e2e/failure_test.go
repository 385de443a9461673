package e2e

import (
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// The model API fails every request of a turn: the turn's attempts all fail,
// the task says why and stays usable for the next prompt.
func TestPersistentAPIErrorLeavesTaskUsable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	var failing atomic.Bool
	var failures atomic.Int32
	failing.Store(true)
	e.setResponder(func(r *fa.Request) (fa.Response, bool) {
		if r.Class != fa.ClassMain {
			return fa.Response{}, false
		}
		if failing.Load() {
			failures.Add(1)
			return fa.Fail(529, "overloaded_error", 0), true
		}
		return fa.Reply(fa.Text("recovered: " + r.LastUserText())), true
	})
	id := e.taskID("api-down")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "doomed prompt"}, ""); err != nil {
		t.Fatal(err)
	}
	st := e.waitTurns(id, 1)
	if st.Totals.FailedTurns != 1 || st.Status != task.StatusIdle {
		t.Fatalf("after the failing turn: %+v", st)
	}
	if !strings.Contains(st.LastError, "529") && !strings.Contains(strings.ToLower(st.LastError), "overloaded") {
		t.Errorf("last error does not say what failed: %q", st.LastError)
	}
	if got := failures.Load(); got < 3 {
		t.Errorf("the API saw %d failing requests, want one per attempt (3)", got)
	}
	var errorEvents int
	for _, ev := range e.events(id) {
		if ev.Agent.Type == events.TypeError && ev.Agent.Error != nil && ev.Agent.Error.Kind == events.ErrorAPI {
			errorEvents++
		}
	}
	if errorEvents < 3 {
		t.Errorf("api_error events in the log = %d, want one per attempt", errorEvents)
	}
	rec, err := store.GetTurn(e.ctx, e.db(), id, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Attempts != 3 || rec.CostUSD != 0 || rec.Status != task.TurnFailed || rec.Error == "" {
		t.Errorf("turn 1 record: status %s attempts %d cost %.6f error %q, want failed after 3 attempts",
			rec.Status, rec.Attempts, rec.CostUSD, rec.Error)
	}

	// The API comes back: the next prompt works, in a conversation that does
	// not carry the failed turn.
	failing.Store(false)
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "second chance"}, ""); err != nil {
		t.Fatal(err)
	}
	st = e.waitTurns(id, 2)
	if st.Totals.FailedTurns != 1 || st.Totals.CostUSD <= 0 {
		t.Fatalf("after the good turn: %+v", st)
	}
	reqs := e.fake.MainRequests()
	last := reqs[len(reqs)-1]
	var all strings.Builder
	for _, m := range last.Messages {
		all.WriteString(m.Text())
	}
	if !strings.Contains(all.String(), "second chance") {
		t.Errorf("the good turn's request lacks its prompt")
	}
}

// Cancelling a task stops its running turn and leaves no claude process.
func TestCancelLeavesNoProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	release := make(chan struct{})
	defer close(release)
	e.fake.Enqueue(fa.Reply(fa.Text("working on it"), fa.Text("more")).WithHold(1, release))
	id := e.taskID("cancel-me")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "a long job"}, ""); err != nil {
		t.Fatal(err)
	}
	var pid int
	e.waitFor("the CLI to run the turn", func() bool {
		pid = e.executorPID(id)
		return alive(pid) && len(e.fake.MainRequests()) > 0
	})
	if err := e.tc.Cancel(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the claude process to end", func() bool { return !alive(pid) })
	// Nothing of its process group survives it (tools' children included).
	e.waitFor("the claude process group to be gone", func() bool { return syscall.Kill(-pid, 0) != nil })
	desc, err := e.tc.Temporal.DescribeWorkflow(e.ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("the workflow to close", func() bool {
		desc, err = e.tc.Temporal.DescribeWorkflow(e.ctx, id, "")
		return err == nil && desc.RawResponse.GetWorkflowExecutionInfo().GetCloseTime() != nil
	})
	if s := desc.RawResponse.GetWorkflowExecutionInfo().GetStatus().String(); !strings.Contains(strings.ToUpper(s), "CANCEL") {
		t.Errorf("workflow status %s, want canceled", s)
	}
	x, err := store.GetExecutor(e.ctx, e.db(), id)
	if err != nil {
		t.Fatal(err)
	}
	if x.PID != 0 || x.Status == store.ExecutorRunning {
		t.Errorf("executor row after cancel: status %s pid %d", x.Status, x.PID)
	}
}

// A CLI that goes silent (here: the model's answer never comes) is stopped
// after the stall timeout, and the turn is retried from where it began.
func TestStalledCLIIsRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-"+e.queue, "--stall-timeout", "3s")
	never := make(chan struct{})
	defer close(never)
	e.fake.Enqueue(
		fa.Reply(fa.Text("this answer never finishes")).WithHold(0, never),
		fa.Reply(fa.Text("second attempt answers")),
	)
	id := e.taskID("stalled")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "are you there?"}, ""); err != nil {
		t.Fatal(err)
	}
	st := e.waitTurns(id, 1)
	if st.Totals.FailedTurns != 0 {
		t.Fatalf("state: %+v", st)
	}
	rec, err := store.GetTurn(e.ctx, e.db(), id, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != task.TurnCompleted || rec.Attempts != 2 {
		t.Errorf("turn record: status %s attempts %d, want completed on the second attempt", rec.Status, rec.Attempts)
	}
	var retry bool
	for _, ev := range e.events(id) {
		retry = retry || ev.Agent.Type == events.TypeTurnRetry
	}
	if !retry {
		t.Error("no turn_retry event for the stalled attempt")
	}
}

// Postgres drops every connection of the worker in the middle of a turn (as a
// restart would): the turn still completes, its events all arrive in order,
// and it is committed once.
func TestDatabaseConnectionsDroppedMidTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	release := make(chan struct{})
	e.fake.Enqueue(fa.Reply(fa.Text("before the drop"), fa.UseBash("echo after"), fa.Text("unused")).WithHold(1, release),
		fa.Reply(fa.Text("done after the drop")))
	id := e.taskID("pg-drop")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "keep going"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the first output", func() bool {
		_, ok := streamed(e.events(id), 0, "before the drop")
		return ok
	})
	var dropped int
	err := e.db().QueryRow(e.ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&dropped)
	if err != nil {
		t.Fatal(err)
	}
	if dropped == 0 {
		t.Fatal("the worker held no connection to drop")
	}
	close(release)
	st := e.waitTurns(id, 1)
	if st.Totals.FailedTurns != 0 {
		t.Fatalf("state: %+v", st)
	}
	evs := e.events(id)
	var tools, completes int
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i+1, ev.Seq)
		}
		switch ev.Agent.Type {
		case events.TypeToolUpdate:
			tools++
		case events.TypeComplete:
			completes++
		}
	}
	if tools != 1 || completes != 1 {
		t.Errorf("after the drop: %d tool updates, %d completes; want 1 and 1", tools, completes)
	}
	rec, err := store.GetTurn(e.ctx, e.db(), id, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != task.TurnCompleted || !near(rec.CostUSD, st.Totals.CostUSD) {
		t.Errorf("turn record %s cost %.6f, workflow %.6f", rec.Status, rec.CostUSD, st.Totals.CostUSD)
	}
}

// The task's record names a message its transcript does not have: no way to resume the session
// there works, and none that would continue from an earlier point is taken. The task needs
// attention (drover task show says so) and nothing reaches the API; once a person repaired the
// record, drover task resolve --retry runs the prompt in the same session, with the old
// conversation.
func TestRejectedResumeNeedsAttentionThenRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// No process is kept between turns: every turn resumes from the record.
	e.startWorker("host-"+e.queue, "--keep-alive", "-1s")
	e.fake.Enqueue(fa.Reply(fa.Text("first")), fa.Reply(fa.Text("second")))
	id := e.taskID("bad-resume")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "one"}, ""); err != nil {
		t.Fatal(err)
	}
	first := e.waitTurns(id, 1)
	if _, err := e.db().Exec(e.ctx, `UPDATE executors_running SET last_message_uuid = $2 WHERE task_id = $1`,
		id, "00000000-0000-4000-8000-00000000dead"); err != nil {
		t.Fatal(err)
	}
	before := len(e.fake.MainRequests())
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "two"}, ""); err != nil {
		t.Fatal(err)
	}
	st := e.waitStatus(id, task.StatusNeedsAttention)
	if st.Attention == nil || !strings.Contains(st.Attention.Error, "No message found") || st.SessionID != first.SessionID {
		t.Fatalf("needs attention: %+v", st)
	}
	if n := len(e.fake.MainRequests()); n != before {
		t.Fatalf("the API received %d requests while the session could not be resumed", n-before)
	}
	e.waitFor("the read side to show the task needs attention", func() bool {
		out, err := e.droverCLI("task", "show", id)
		return err == nil && strings.Contains(out, "NEEDS ATTENTION") && strings.Contains(out, "drover task resolve "+id+" --retry")
	})

	// A person repairs the record and retries.
	if _, err := e.db().Exec(e.ctx, `UPDATE executors_running SET last_message_uuid = $2 WHERE task_id = $1`,
		id, first.LastMessageUUID); err != nil {
		t.Fatal(err)
	}
	out := e.mustDrover("task", "resolve", id, "--retry")
	if !strings.Contains(out, "the waiting prompt runs as turn 3") {
		t.Errorf("drover task resolve said %q", out)
	}
	st = e.waitTurns(id, 3)
	if st.SessionID != first.SessionID || st.Attention != nil {
		t.Fatalf("after the retry: %+v", st)
	}
	reqs := e.fake.MainRequests()
	var said strings.Builder
	for _, m := range reqs[len(reqs)-1].Messages {
		said.WriteString(m.Text() + "\n")
	}
	for _, want := range []string{"one", "first", "two"} {
		if !strings.Contains(said.String(), want) {
			t.Errorf("the conversation of the retried prompt lacks %q: %s", want, said.String())
		}
	}
}

// The committed message is in the transcript but off the chain the CLI resumes (another branch
// from an earlier message was written after it, as a truncating resume does): the CLI refuses it,
// and the attempt rebuilds the transcript along the committed chain and resumes there, in the
// same session, with the whole conversation and nothing of the other branch; the log says so.
func TestResumeOffTheMainChainFallsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.startWorker("host-"+e.queue, "--keep-alive", "-1s")
	e.fake.Enqueue(fa.Reply(fa.Text("first")), fa.Reply(fa.Text("second")))
	id := e.taskID("branch")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "one"}, ""); err != nil {
		t.Fatal(err)
	}
	first := e.waitTurns(id, 1)
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "two"}, ""); err != nil {
		t.Fatal(err)
	}
	second := e.waitTurns(id, 2)
	w.stop()
	// A branch from turn 1's answer, written by the CLI itself, after turn 2; the mirror is gone,
	// so the host's transcript is what the CLI reads.
	e.fake.Enqueue(fa.Reply(fa.Text("branch answer")))
	side := exec.Command(suite.claudeBin, "-p", "side branch prompt", "--output-format", "text",
		"--resume", first.SessionID, "--resume-session-at", first.LastMessageUUID)
	side.Dir = e.workspace
	side.Env = setEnv(e.workerEnv("side", "info"), "CLAUDE_CONFIG_DIR="+e.configDir)
	if out, err := side.CombinedOutput(); err != nil {
		t.Fatalf("the side branch: %v\n%s", err, out)
	}
	if _, err := e.db().Exec(e.ctx, `DELETE FROM session_mirrors`); err != nil {
		t.Fatal(err)
	}
	e.startWorker("host-"+e.queue, "--keep-alive", "-1s")
	e.fake.Enqueue(fa.Reply(fa.Text("third")))
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "three"}, ""); err != nil {
		t.Fatal(err)
	}
	st := e.waitTurns(id, 3)
	if st.Totals.FailedTurns != 0 || st.SessionID != second.SessionID || st.Status != task.StatusIdle {
		t.Fatalf("after the refused resume: %+v", st)
	}
	reqs := e.fake.MainRequests()
	var said strings.Builder
	for _, m := range reqs[len(reqs)-1].Messages {
		said.WriteString(m.Text() + "\n")
	}
	for _, want := range []string{"one", "first", "two", "second", "three"} {
		if !strings.Contains(said.String(), want) {
			t.Errorf("the conversation turn 3 sent lacks %q: %s", want, said.String())
		}
	}
	if strings.Contains(said.String(), "side branch") || strings.Contains(said.String(), "branch answer") {
		t.Errorf("the conversation turn 3 sent holds the other branch: %s", said.String())
	}
	var fellBack []string
	for _, ev := range e.events(id) {
		if ev.Agent.Type == events.TypeError && ev.Agent.Error != nil && ev.Agent.Error.Kind == events.ErrorResumeRejected {
			fellBack = append(fellBack, ev.Agent.Error.Message)
		}
	}
	t.Logf("resume steps logged: %q", fellBack)
	if len(fellBack) == 0 {
		t.Error("the log does not say the resume fell back (did the CLI take the committed message off its chain?)")
	}
}

// When no way to resume the session works (its transcript and its mirror are gone), the task
// needs attention: nothing reaches the API, no new session starts, until a person chooses; then a
// new session starts seeded with a summary of the old one.
func TestUnresumableSessionNeedsAttention(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-"+e.queue, "--keep-alive", "-1s")
	e.fake.Enqueue(fa.Reply(fa.Text("the answer is forty-two")), fa.Reply(fa.Text("fresh start")))
	id := e.taskID("lost-session")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "what is the answer?"}, ""); err != nil {
		t.Fatal(err)
	}
	first := e.waitTurns(id, 1)
	if _, err := e.db().Exec(e.ctx, `DELETE FROM session_mirrors`); err != nil {
		t.Fatal(err)
	}
	for _, f := range transcriptFiles(e.configDir, first.SessionID) {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	before := len(e.fake.MainRequests())
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "and doubled?"}, ""); err != nil {
		t.Fatal(err)
	}
	var st task.State
	e.waitFor("the task to need attention", func() bool {
		var err error
		st, err = e.tc.State(e.ctx, id)
		return err == nil && st.Status == task.StatusNeedsAttention
	})
	if st.Attention == nil || st.SessionID != first.SessionID || len(st.Pending) != 1 {
		t.Fatalf("needs attention: %+v", st)
	}
	if n := len(e.fake.MainRequests()); n != before {
		t.Fatalf("the API received %d requests while the session could not be resumed", n-before)
	}
	tc := *e.tc
	tc.DB = e.db()
	turn, err := tc.Resolve(e.ctx, id, task.AttentionChoice{Choice: task.ResolveNewSession})
	if err != nil {
		t.Fatal(err)
	}
	st = e.waitTurns(id, turn)
	if st.SessionID == "" || st.SessionID == first.SessionID || st.Attention != nil {
		t.Fatalf("after the choice: %+v", st)
	}
	reqs := e.fake.MainRequests()
	var said strings.Builder
	for _, m := range reqs[len(reqs)-1].Messages {
		said.WriteString(m.Text() + "\n")
	}
	for _, want := range []string{"what is the answer?", "the answer is forty-two", "and doubled?"} {
		if !strings.Contains(said.String(), want) {
			t.Errorf("the new session's first request lacks %q: %s", want, said.String())
		}
	}
}

package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/devserver"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/testtools"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/worker"
)

// The worker is SIGKILLed while a supervised task's request waits for a person. Its CLI dies with
// it; the restarted worker retries the turn from its committed point, the CLI asks again for
// the same call, and the re-ask finds the request already recorded: same id, still pending, one
// row, one permission_request event. The person decides while no worker runs at all (drover
// task approve says the decision is recorded but has not reached the agent), and when a worker
// comes back the decision applies: the tool runs once (the workspace's witness). In the next
// turn the retried model asks for a different command: that one is asked anew and labelled as
// asked again after a retry, in the log and in drover task pending.
func TestApprovalSurvivesWorkerKill(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := "host-" + e.queue
	w := e.startWorker(host)
	marker := filepath.Join(e.workspace, "ran.txt")
	cmd := "echo ran | tee -a " + marker
	served := e.script(
		say(fa.Text("I will run it."), fa.UseBash(cmd)), // attempt 1, lost with its worker
		say(fa.Text("I will run it."), fa.UseBash(cmd)), // attempt 2: the same call, asked again
		say(fa.Text("I will run it."), fa.UseBash(cmd)), // attempt 3, after the decision
		say(fa.Text("It ran.")),
		say(fa.UseBash("echo first-choice")),  // turn 2, attempt 1
		say(fa.UseBash("echo second-choice")), // turn 2, attempt 2: something else
		say(fa.Text("Second choice done.")),
	)
	id := e.taskID("kill-approval")
	p := e.supervisedParams()
	p.MaxAttempts = 5
	if _, err := e.tc.Start(e.ctx, id, p, task.Prompt{Text: "run the command"}, ""); err != nil {
		t.Fatal(err)
	}
	first := e.waitAsked(id, "echo ran")
	before := e.row(id, first.RequestID)
	if before.Status != task.OutcomePending || before.Attempt != 1 {
		t.Fatalf("the request's row before the kill: %+v", before)
	}

	killed := time.Now()
	w.kill()
	e.waitWithin(reapBound, "the CLI to die with its worker", func() bool { return len(taggedProcesses(host)) == 0 })
	t.Logf("SIGKILL to no process of the host left: %s", time.Since(killed).Round(time.Millisecond))
	restarted := time.Now()
	w = e.startWorker(host)
	e.waitFor("the retried attempt to ask again", func() bool {
		r := e.row(id, first.RequestID)
		return r.Attempt == 2 && served() == 2
	})
	t.Logf("worker start to the retry's re-ask: %s", time.Since(restarted).Round(time.Millisecond))
	again := e.row(id, first.RequestID)
	if again.Status != task.OutcomePending || again.CLIRequestID == before.CLIRequestID {
		t.Errorf("the re-ask: status %s, CLI request %s (before: %s)", again.Status, again.CLIRequestID, before.CLIRequestID)
	}
	if rows := e.requestRows(id); len(rows) != 1 {
		t.Errorf("%d request rows after the re-ask, want 1", len(rows))
	}
	if evs := e.permissionRequests(id); len(evs) != 1 || evs[0].Agent.PendingID != first.RequestID {
		t.Errorf("permission_request events after the re-ask: %d", len(evs))
	}
	if aw := e.waitAwaiting(id, 1); aw[0].RequestID != first.RequestID || !aw[0].Since.Equal(first.Since) || aw[0].Reasked {
		t.Errorf("the workflow's waiting request after the re-ask: %+v, before %+v", aw[0], first)
	}
	if n := lines(t, marker); n != 0 {
		t.Fatalf("the command ran %d times before anybody approved it", n)
	}

	// Nobody runs: the decision is recorded, and waits for a worker.
	w.kill()
	decided := time.Now()
	out := e.mustDrover("task", "approve", id, first.RequestID, "--by", "carol", "--reason", "fine")
	t.Logf("drover task approve with no worker (%s): %s", time.Since(decided).Round(time.Millisecond), strings.TrimSpace(out))
	if !strings.Contains(out, "recorded") || !strings.Contains(out, "the task's worker applies it") {
		t.Errorf("drover task approve with no worker said %q", out)
	}
	e.startWorker(host)
	st := e.waitTurns(id, 1)
	if n := lines(t, marker); n != 1 {
		t.Errorf("the approved command ran %d times, want once", n)
	}
	final := e.row(id, first.RequestID)
	if final.Status != task.OutcomeAllowed || final.DecidedBy != "carol" || final.Attempt != 3 {
		t.Errorf("the request's row: %s by %q, last asked by attempt %d (want allowed, carol, 3)", final.Status, final.DecidedBy, final.Attempt)
	}
	if rows, evs := e.requestRows(id), e.permissionRequests(id); len(rows) != 1 || len(evs) != 1 {
		t.Errorf("%d rows and %d permission_request events, want one of each", len(rows), len(evs))
	}
	if st.Totals.FailedTurns != 0 {
		t.Errorf("state: %+v", st)
	}

	// Turn 2: the retry asks for something else.
	mark := len(e.fake.MainRequests())
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "now choose"}, ""); err != nil {
		t.Fatal(err)
	}
	r1 := e.waitAsked(id, "first-choice")
	w.kill()
	e.startWorker(host)
	r2 := e.waitAsked(id, "second-choice")
	if r2.RequestID == r1.RequestID || !r2.Reasked {
		t.Errorf("the different request after the retry: %+v (the first: %s)", r2, r1.RequestID)
	}
	var reaskedEvent bool
	for _, ev := range e.permissionRequests(id) {
		if ev.Agent.PendingID == r2.RequestID {
			reaskedEvent = ev.Agent.Permission != nil && ev.Agent.Permission.Reasked && ev.Attempt == 2
		}
	}
	if !reaskedEvent {
		t.Error("the permission_request event of the new request is not marked as asked again")
	}
	var inbox bool
	for _, row := range e.pendingOf(id) {
		if row.RequestID == r2.RequestID {
			inbox = row.Reasked && row.Tool == "Bash" && strings.Contains(row.Summary, "second-choice")
		}
	}
	if text := e.mustDrover("task", "pending", "--task", id); !inbox || !strings.Contains(text, "(asked again after a retry) echo second-choice") {
		t.Errorf("drover task pending does not show the new request as asked again:\n%s", text)
	}
	// The one the retry no longer asks still waits in the task's view until the turn ends: two
	// wait, so a decision must name one.
	if out, err := e.droverCLI("task", "approve", id); err == nil || !strings.Contains(out, "2 requests waiting; name one") {
		t.Errorf("approving without a request while two wait: %v\n%s", err, out)
	}
	e.mustDrover("task", "approve", id, r2.RequestID)
	e.waitTurns(id, 2)
	var sawSecond bool
	for _, tr := range e.toolResultsSince(mark) {
		sawSecond = sawSecond || strings.Contains(tr.Content, "second-choice")
	}
	if !sawSecond {
		t.Error("the model did not get the approved command's output")
	}
	// Nothing of the turn waits any more: not the request the retry no longer asked either.
	if rows := e.pendingOf(id); len(rows) != 0 {
		t.Errorf("after the turn, drover task pending still lists %+v", rows)
	}
	if r := e.row(id, r1.RequestID); r.Status != task.OutcomeCancelled {
		t.Errorf("the request the retry did not ask again: %s, want cancelled", r.Status)
	}
}

// The Temporal server is killed while a supervised task's request waits, and started again on
// its database: the waiting CLI is left alone meanwhile, and a decision given after the restart
// (drover task approve without a request id: the task's only waiting one) reaches it. The tool
// runs once, and the turn ends without failing.
func TestApprovalSurvivesTemporalRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bin, err := testtools.TemporalBin()
	if err != nil {
		t.Fatal(err)
	}
	cfg := devserver.Config{Bin: bin, Headless: true, DBFile: filepath.Join(t.TempDir(), "temporal.db"),
		SearchAttributes: searchAttributes()}
	srv, err := devserver.Start(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	e.temporal = srv.Address()
	c, err := worker.Dial(e.ctx, srv.Address(), srv.Namespace(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e.tc = &taskclient.Client{Temporal: c, TaskQueue: e.queue}
	host := "host-" + e.queue
	e.startWorker(host)

	marker := filepath.Join(e.workspace, "ran.txt")
	e.script(
		say(fa.UseBash("echo ran | tee -a "+marker)),
		say(fa.Text("It ran after the restart.")),
	)
	id := e.taskID("temporal-approval")
	if _, err := e.tc.Start(e.ctx, id, e.supervisedParams(), task.Prompt{Text: "run it"}, ""); err != nil {
		t.Fatal(err)
	}
	r := e.waitAsked(id, "echo ran")
	cli := cliProcessOf(host)

	// The server is killed right after it recorded a heartbeat of the waiting attempt, so that
	// the outage starts with the whole heartbeat timeout ahead of it, however slow the machine.
	e.waitFreshHeartbeat(id)
	srv.Kill()
	down := time.Now()
	cfg.Port = portOf(t, e.temporal)
	// Down for a moment: the running attempt misses heartbeats. The SDK sends a heartbeat at most
	// every 8 s of the 10 s heartbeat timeout and the server holds a fresh one when it goes down:
	// a short outage (with the restart's own seconds) stays inside the timeout.
	time.Sleep(time.Second)
	srv, err = devserver.Start(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	t.Logf("Temporal down for %s", time.Since(down).Round(time.Millisecond))

	aw := e.waitAwaiting(id, 1)
	if aw[0].RequestID != r.RequestID {
		t.Fatalf("after the restart the task waits for %+v, want %s", aw[0], r.RequestID)
	}
	out := e.mustDrover("task", "approve", id, "--by", "dora", "--wait", "1m")
	if !strings.Contains(out, r.RequestID+" allowed by dora") {
		t.Errorf("drover task approve said %q", out)
	}
	st := e.waitTurns(id, 1)
	if n := lines(t, marker); n != 1 {
		t.Errorf("the approved command ran %d times, want once", n)
	}
	if row := e.row(id, r.RequestID); row.Status != task.OutcomeAllowed || row.DecidedBy != "dora" {
		t.Errorf("the request's row: %s by %q", row.Status, row.DecidedBy)
	}
	if st.Totals.FailedTurns != 0 || len(e.requestRows(id)) != 1 {
		t.Errorf("state %+v, %d request rows", st, len(e.requestRows(id)))
	}
	turn, err := store.GetTurn(e.ctx, e.db(), id, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the turn ended after %d attempt(s); the CLI that asked (pid %d) is the one that ran the tool: %v",
		turn.Attempts, cli, turn.Attempts == 1 && e.row(id, r.RequestID).Attempt == 1)
}

// A task cancelled while its request waits leaves no claude process behind (the host's process
// tag), and the request shows as cancelled: its row, a permission_cancelled event, and the
// workflow's final state with nothing waiting. The tool never ran.
func TestCancelWhileRequestWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := "host-" + e.queue
	e.startWorker(host)
	marker := filepath.Join(e.workspace, "ran.txt")
	e.script(say(fa.UseBash("echo ran | tee -a " + marker)))
	id := e.taskID("cancel-approval")
	if _, err := e.tc.Start(e.ctx, id, e.supervisedParams(), task.Prompt{Text: "run it"}, ""); err != nil {
		t.Fatal(err)
	}
	r := e.waitAsked(id, "echo ran")
	if cliProcessOf(host) == 0 {
		t.Fatal("no claude process runs while the request waits")
	}
	cancelled := time.Now()
	if err := e.tc.Cancel(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	e.waitWithin(reapBound, "every process of the CLI's tree to end", func() bool { return len(taggedProcesses(host)) == 0 })
	t.Logf("cancel to no claude process: %s", time.Since(cancelled).Round(time.Millisecond))
	var st task.State
	e.waitFor("the task to end cancelled", func() bool {
		var err error
		st, err = e.tc.State(e.ctx, id)
		return err == nil && st.Status == task.StatusCancelled
	})
	if len(st.Awaiting) != 0 {
		t.Errorf("the cancelled task still waits for %+v", st.Awaiting)
	}
	if row := e.row(id, r.RequestID); row.Status != task.OutcomeCancelled || row.DecidedBy != "drover" {
		t.Errorf("the request's row: %s by %q", row.Status, row.DecidedBy)
	}
	var withdrawn bool
	for _, ev := range e.events(id) {
		withdrawn = withdrawn || (ev.Agent.Type == events.TypePermissionCancelled && ev.Agent.PendingID == r.RequestID)
	}
	if !withdrawn {
		for _, ev := range e.events(id) {
			t.Logf("%d t%d.%d %s %s", ev.Seq, ev.Turn, ev.Attempt, ev.Agent.Type, ev.Agent.PendingID)
		}
		t.Error("no permission_cancelled event for the request")
	}
	if rows := e.pendingOf(id); len(rows) != 0 {
		t.Errorf("drover task pending lists %+v", rows)
	}
	if n := lines(t, marker); n != 0 {
		t.Errorf("the command ran %d times", n)
	}
	if len(taggedProcesses(host)) != 0 {
		t.Error("a process of the host came back")
	}
}

// waitFreshHeartbeat waits until Temporal records a heartbeat of the task's running RunTurn
// after the call began: its record is then at most a poll interval old.
func (e *env) waitFreshHeartbeat(taskID string) {
	e.t.Helper()
	since := time.Now()
	e.waitFor("a fresh heartbeat of the running turn", func() bool {
		d, err := e.tc.Temporal.DescribeWorkflow(e.ctx, taskID, "")
		if err != nil || d.RawResponse == nil {
			return false
		}
		for _, a := range d.RawResponse.GetPendingActivities() {
			if a.GetActivityType().GetName() == task.ActivityRunTurn && a.GetLastHeartbeatTime().AsTime().After(since) {
				return true
			}
		}
		return false
	})
}

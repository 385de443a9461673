package e2e

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// A decision recorded while no worker runs is never dropped, however long the worker stays away:
// the worker is SIGKILLed while a request waits, the request is approved over the API with no
// worker, and the worker stays away past every timeout on the way (the lost attempt's heartbeat,
// the time a host has to take a turn up, the request's own deadline, shortened to 20 s), so that
// the workflow hears of the decision and of the deadline at once. When the worker is back, the retried turn's identical request takes the recorded
// decision: the tool runs once, its result reaches the API, no second request waits for a
// person, and the log says who decided it.
func TestRecordedDecisionSurvivesALongAbsence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := "host-" + e.queue
	w := e.startWorker(host)
	ran := filepath.Join(e.workspace, "ran.txt")
	cmd := "echo ran-after-absence | tee -a " + ran
	e.setResponder(func(r *fa.Request) (fa.Response, bool) {
		if r.Class != fa.ClassMain || len(r.Messages) == 0 {
			return fa.Response{}, false
		}
		if trs := r.Messages[len(r.Messages)-1].ToolResults(); len(trs) > 0 {
			return fa.Reply(fa.Text("It ran.")), true
		}
		return fa.Reply(fa.Text("I will run it."), fa.UseBash(cmd)), true
	})
	id := e.taskID("away")
	p := e.supervisedParams()
	p.MaxAttempts = 5
	p.ApprovalTimeout = 20 * time.Second // shorter than the absence below
	if _, err := e.tc.Start(e.ctx, id, p, task.Prompt{Text: "run the command"}, ""); err != nil {
		t.Fatal(err)
	}
	asked := e.waitAsked(id, "echo ran-after-absence")

	w.kill()
	killed := time.Now()
	e.waitWithin(reapBound, "the CLI to die with its worker", func() bool { return len(taggedProcesses(host)) == 0 })
	mark := len(e.fake.MainRequests())
	out := e.mustDrover("task", "approve", id, asked.RequestID, "--by", "erin")
	if !strings.Contains(out, "the task's worker applies it") {
		t.Fatalf("drover task approve with no worker said %q", out)
	}
	// Away past every timeout: the lost attempt's heartbeat (its retry waits on the host's queue),
	// the request's deadline, and the time a turn's host has to take it up (30 s).
	deadline := e.row(id, asked.RequestID).Deadline
	e.waitFor("every timeout on the way to pass", func() bool {
		if time.Now().Before(deadline) || time.Since(killed) < 35*time.Second {
			return false
		}
		d, err := e.tc.Temporal.DescribeWorkflow(e.ctx, id, "")
		return err == nil && slices.ContainsFunc(d.RawResponse.GetPendingActivities(), func(a *workflowpb.PendingActivityInfo) bool {
			return a.GetActivityType().GetName() == task.ActivityRunTurn && a.GetAttempt() >= 2 &&
				strings.Contains(a.GetLastFailure().GetMessage(), "Heartbeat")
		})
	})
	if n := lines(t, ran); n != 0 {
		t.Fatalf("the command ran %d times with no worker", n)
	}

	e.startWorker(host)
	st := e.waitTurns(id, 1)
	if st.Totals.FailedTurns != 0 {
		t.Fatalf("the turn failed: %s", st.LastError)
	}
	if n := lines(t, ran); n != 1 {
		t.Errorf("the approved command ran %d times, want once", n)
	}
	if _, ok := e.resultOf(mark, "ran-after-absence"); !ok {
		t.Errorf("the API was not sent the approved command's output: %+v", e.toolResultsSince(mark))
	}
	rows, err := store.ListTaskPermissions(e.ctx, e.db(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].RequestID != asked.RequestID || rows[0].Status != task.OutcomeAllowed || rows[0].DecidedBy != "erin" {
		t.Errorf("permission requests after the absence: %+v; want the one, allowed by erin", rows)
	}
	var said bool
	for _, ev := range e.events(id) {
		if ev.Agent.Type == events.TypePermissionRequest && ev.Attempt > 1 {
			t.Errorf("the retried turn asked a person again: %s", ev.Payload)
		}
		if ev.Attempt > 1 && strings.Contains(string(ev.Payload), asked.RequestID) && strings.Contains(string(ev.Payload), "erin") {
			said = true
		}
	}
	if !said {
		t.Error("the retried turn's log does not say it took erin's recorded decision")
	}
	if t.Failed() {
		it := e.tc.Temporal.GetWorkflowHistory(e.ctx, id, "", false, 0)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				break
			}
			t.Logf("history: %s %s %.300v", ev.GetEventTime().AsTime().Format("15:04:05.000"), ev.GetEventType(), ev.GetAttributes())
		}
	}
}

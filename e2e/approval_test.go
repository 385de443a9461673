package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/taskview"
)

// supervisedParams are the world's params in supervised mode.
func (w world) supervisedParams() task.Params {
	p := w.params()
	p.Profile.PermissionMode = task.Supervised
	return p
}

// waitAwaiting waits until the task has n requests waiting for a person and returns them.
func (e *env) waitAwaiting(taskID string, n int) []task.PendingRequest {
	e.t.Helper()
	var st task.State
	e.waitFor("the task to wait for a person", func() bool {
		var err error
		st, err = e.tc.State(e.ctx, taskID)
		return err == nil && len(st.Awaiting) == n
	})
	return st.Awaiting
}

// A supervised task asks before each tool that changes something; an approval lets the tool
// run, a denial gives the agent the reason. The witnesses are the workspace (did the tool run?)
// and the conversation the model receives (what did it read?).
func TestSupervisedApproveAndDeny(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	id := e.taskID("supervised")
	marker := filepath.Join(e.workspace, "approved.txt")
	e.fake.Enqueue(
		fa.Reply(fa.Text("I will write the marker."), fa.UseBash("echo approved > "+marker)),
		fa.Reply(fa.Text("Marker written.")),
		fa.Reply(fa.UseBash("rm -rf "+e.workspace)),
		fa.Reply(fa.Text("Understood, I will not delete it.")),
	)
	if _, err := e.tc.Start(e.ctx, id, e.supervisedParams(), task.Prompt{Text: "write the marker"}, ""); err != nil {
		t.Fatal(err)
	}
	reqs := e.waitAwaiting(id, 1)
	r := reqs[0]
	if r.Tool != "Bash" || !strings.Contains(r.Summary, "echo approved") || r.Kind != task.KindTool || len(r.Suggestions) == 0 {
		t.Fatalf("pending request = %+v", r)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the tool ran before anybody approved it")
	}
	row, err := store.GetPermission(e.ctx, e.db(), id, r.RequestID)
	if err != nil || row.Status != task.OutcomePending || row.ToolName != "Bash" {
		t.Fatalf("request row = %+v, %v", row, err)
	}
	rec, delivered, err := e.decider().Decide(e.ctx, id, task.Decision{RequestID: r.RequestID, Allow: true, By: "alice"}, 30*time.Second)
	if err != nil || !delivered || rec.Outcome != task.OutcomeAllowed || rec.By != "alice" {
		t.Fatalf("decision: %+v delivered %v, %v", rec, delivered, err)
	}
	e.waitTurns(id, 1)
	if b, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(b)) != "approved" {
		t.Fatalf("the approved tool did not run: %q, %v", b, err)
	}

	// A decision on a request that is no longer pending is refused and changes nothing.
	_, _, err = e.decider().Decide(e.ctx, id, task.Decision{RequestID: r.RequestID, Allow: false, Reason: "too late"}, time.Second)
	var np *taskclient.NotPendingError
	if !errors.As(err, &np) || np.Status != task.OutcomeAllowed || np.By != "alice" {
		t.Fatalf("a second decision on the same request: %v", err)
	}

	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "clean up"}, ""); err != nil {
		t.Fatal(err)
	}
	r = e.waitAwaiting(id, 1)[0]
	const why = "never delete the workspace"
	if _, _, err := e.decider().Decide(e.ctx, id, task.Decision{RequestID: r.RequestID, Allow: false, Reason: why, By: "bob"}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(id, 2)
	if _, err := os.Stat(e.workspace); err != nil {
		t.Fatalf("the denied command ran: %v", err)
	}
	reqs2 := e.fake.MainRequests()
	last := reqs2[len(reqs2)-1]
	var sawReason bool
	for _, tr := range last.ToolResults() {
		sawReason = sawReason || (tr.IsError && strings.Contains(tr.Content, why))
	}
	if !sawReason {
		t.Fatalf("the model did not read the reason of the denial: %+v", last.ToolResults())
	}
	var asked, updates int
	var decided []string
	for _, ev := range e.events(id) {
		switch ev.Agent.Type {
		case events.TypePermissionRequest:
			asked++
		case events.TypeToolUpdate:
			updates++
		case events.TypePermissionDecision:
			if d := ev.Agent.Decision; d != nil {
				decided = append(decided, d.Outcome+" by "+d.By+": "+d.Reason)
			}
		}
	}
	if asked != 2 || updates < 2 {
		t.Fatalf("log: %d permission requests, %d tool updates", asked, updates)
	}
	if len(decided) != 2 || decided[0] != "allowed by alice: " || decided[1] != "denied by bob: "+why {
		t.Fatalf("log: decisions %q", decided)
	}
	st := e.waitTurns(id, 2)
	if len(st.Awaiting) != 0 || st.PermissionMode != task.Supervised {
		t.Fatalf("state: %+v", st)
	}
}

// decider decides as drover task approve|deny and the HTTP API do: through Postgres and a signal.
func (e *env) decider() *taskclient.Decider {
	return &taskclient.Decider{Temporal: e.tc.Temporal, View: taskview.New(e.db())}
}

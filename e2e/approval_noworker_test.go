package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/taskerr"
	"github.com/drover-run/drover/taskview"
)

// A decision needs no running worker. A supervised task's request waits; its only worker is
// killed and stays down for the whole decision: drover task approve TASK (no request id) finds
// the request in Postgres, records the decision there and tells the task, and returns saying the
// task's worker applies it. A second decision on the same request is refused with a message a
// person can act on (approving the task again names who decided it), and changes nothing. A worker comes back and the tool runs: the
// file it writes exists, and the fake Messages API was sent its result. In the next turn a
// denial through the library (taskclient.Decider), again with no worker, reaches the model as
// the tool's error, and the tool never runs.
func TestDecisionWithoutWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := "host-" + e.queue
	w := e.startWorker(host)
	ran := filepath.Join(e.workspace, "ran.txt")
	denied := filepath.Join(e.workspace, "denied.txt")
	cmd, cmd2 := "echo ran-approved | tee -a "+ran, "echo never | tee -a "+denied
	// The model answers by what it was last sent, so that a retried request of the CLI's gets the
	// same answer: the prompt of each turn asks for its command, a tool result ends the turn.
	e.setResponder(func(r *fa.Request) (fa.Response, bool) {
		if r.Class != fa.ClassMain || len(r.Messages) == 0 {
			return fa.Response{}, false
		}
		last := r.Messages[len(r.Messages)-1]
		if trs := last.ToolResults(); len(trs) > 0 {
			if trs[0].IsError {
				return fa.Reply(fa.Text("Understood, I did not run it.")), true
			}
			return fa.Reply(fa.Text("It ran.")), true
		}
		if strings.Contains(last.Text(), "and now this") {
			return fa.Reply(fa.UseBash(cmd2)), true
		}
		return fa.Reply(fa.Text("I will run it."), fa.UseBash(cmd)), true
	})
	id := e.taskID("noworker")
	p := e.supervisedParams()
	p.MaxAttempts = 5
	if _, err := e.tc.Start(e.ctx, id, p, task.Prompt{Text: "run the command"}, ""); err != nil {
		t.Fatal(err)
	}
	first := e.waitAsked(id, "echo ran-approved")

	w.kill()
	e.waitWithin(reapBound, "the CLI to die with its worker", func() bool { return len(taggedProcesses(host)) == 0 })
	mark := len(e.fake.MainRequests())
	decided := time.Now()
	out := e.mustDrover("task", "approve", id, "--by", "carol")
	t.Logf("drover task approve with no worker (%s): %s", time.Since(decided).Round(time.Millisecond), strings.TrimSpace(out))
	if !strings.Contains(out, "approve of request "+first.RequestID+" recorded") || !strings.Contains(out, "the task's worker applies it") {
		t.Errorf("drover task approve with no worker said %q", out)
	}
	row := e.row(id, first.RequestID)
	var recorded task.Decision
	if row.Status != task.OutcomePending || row.RequestedBy != "carol" || json.Unmarshal(row.Requested, &recorded) != nil || !recorded.Allow {
		t.Fatalf("the request's row after the decision: %s, recorded %s by %q", row.Status, row.Requested, row.RequestedBy)
	}

	// A second decision on the same request: refused, plainly, and nothing changes.
	out, err := e.droverCLI("task", "deny", id, first.RequestID, "--reason", "no", "--by", "dave")
	if err == nil || !strings.Contains(out, `request "`+first.RequestID+`" is not waiting for a decision in task `+id) ||
		!strings.Contains(out, "run drover task pending "+id) || strings.Contains(out, "type:") {
		t.Errorf("a second decision: %v\n%s", err, out)
	}
	out, err = e.droverCLI("task", "deny", id, first.RequestID, "--reason", "no", "-o", "json")
	var refused struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err == nil || json.Unmarshal([]byte(firstJSON(out)), &refused) != nil || refused.Error.Code != taskerr.CodeAlreadyDecided {
		t.Errorf("a second decision with -o json: %v\n%s", err, out)
	}
	if out, err := e.droverCLI("task", "approve", id); err == nil || !strings.Contains(out, "has no request waiting for a decision") ||
		!strings.Contains(out, "request "+first.RequestID+" (Bash) was already decided by carol at ") {
		t.Errorf("approving the task again: %v\n%s", err, out)
	}
	if again := e.row(id, first.RequestID); again.Status != task.OutcomePending || string(again.Requested) != string(row.Requested) ||
		again.RequestedBy != "carol" || !again.RequestedAt.Equal(row.RequestedAt) {
		t.Errorf("the refused decisions changed the request: %+v", again)
	}
	if rows := e.pendingOf(id); len(rows) != 0 {
		t.Errorf("a decided request is still listed as waiting: %+v", rows)
	}
	if shown := e.mustDrover("task", "show", id); !strings.Contains(shown, "request "+first.RequestID) ||
		!strings.Contains(shown, "approved by carol; applies when the task's worker runs") {
		t.Errorf("drover task show with no worker:\n%s", shown)
	}
	if n := lines(t, ran); n != 0 {
		t.Fatalf("the command ran %d times before a worker came back", n)
	}

	w = e.startWorker(host)
	e.waitTurns(id, 1)
	if n := lines(t, ran); n != 1 {
		t.Errorf("the approved command ran %d times, want once", n)
	}
	if _, ok := e.resultOf(mark, "ran-approved"); !ok {
		t.Errorf("the model was not sent the approved command's output: %+v", e.toolResultsSince(mark))
	}
	if final := e.row(id, first.RequestID); final.Status != task.OutcomeAllowed || final.DecidedBy != "carol" {
		t.Errorf("the request's row: %s by %q, want allowed by carol", final.Status, final.DecidedBy)
	}

	// Turn 2: a denial through the library, with no worker either.
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "and now this"}, ""); err != nil {
		t.Fatal(err)
	}
	second := e.waitAsked(id, "echo never")
	w.kill()
	e.waitWithin(reapBound, "the CLI to die with its worker", func() bool { return len(taggedProcesses(host)) == 0 })
	mark = len(e.fake.MainRequests())
	dc := &taskclient.Decider{Temporal: e.tc.Temporal, View: taskview.New(e.db())}
	const why = "not on this machine, please"
	if _, applied, err := dc.Decide(e.ctx, id, task.Decision{Allow: false, Reason: why, By: "lib"}, 0); err != nil || applied {
		t.Fatalf("the library's denial with no worker: applied %v, %v", applied, err)
	}
	// The first request, long decided: refused, and its row stays as it was.
	_, _, err = dc.Decide(e.ctx, id, task.Decision{RequestID: first.RequestID, Allow: false, Reason: "late", By: "lib"}, 0)
	var np *taskclient.NotPendingError
	if !errors.As(err, &np) || taskerr.Code(err) != taskerr.CodeNotPending || !strings.Contains(err.Error(), "it was allowed by carol") {
		t.Errorf("a decision on a request decided long ago: %v", err)
	}
	if r := e.row(id, first.RequestID); r.Status != task.OutcomeAllowed || r.DecidedBy != "carol" {
		t.Errorf("the refused decision changed the first request: %s by %q", r.Status, r.DecidedBy)
	}

	e.startWorker(host)
	e.waitTurns(id, 2)
	if tr, ok := e.resultOf(mark, why); !ok || !tr.IsError {
		t.Errorf("the model did not read the denial's reason: %+v", e.toolResultsSince(mark))
	}
	if _, err := os.Stat(denied); !os.IsNotExist(err) {
		t.Errorf("the denied command ran: %v", err)
	}
	if r := e.row(id, second.RequestID); r.Status != task.OutcomeDenied || r.DecidedBy != "lib" || r.DecisionReason != why {
		t.Errorf("the denied request's row: %s by %q (%q)", r.Status, r.DecidedBy, r.DecisionReason)
	}
}

// firstJSON is the JSON object out holds, from its first brace to its last (droverCLI returns
// standard output and standard error together on failure).
func firstJSON(out string) string {
	if i := strings.Index(out, "{"); i >= 0 {
		return out[i : strings.LastIndex(out, "}")+1]
	}
	return ""
}

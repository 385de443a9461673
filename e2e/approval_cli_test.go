package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
)

// The approval commands through the real drover binary: drover task pending lists what waits
// (task, request, tool, summary, since), as text and as JSON; drover task watch shows a waiting
// request plainly, with the command lines that answer it; drover task deny and approve answer
// it, refusing what cannot be (a denial without a reason, a request that does not wait).
func TestApprovalCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	const why = "not on a Friday"
	e.script(
		say(fa.Text("First I will deploy."), fa.UseBash("make deploy-now")),
		say(fa.UseBash("echo safer")),
		say(fa.Text("Deployed the safer way.")),
	)
	id := e.taskID("cli")
	asked := time.Now()
	if _, err := e.tc.Start(e.ctx, id, e.supervisedParams(), task.Prompt{Text: "deploy"}, ""); err != nil {
		t.Fatal(err)
	}
	r := e.waitAsked(id, "make deploy-now")

	text := e.mustDrover("task", "pending")
	t.Logf("drover task pending:\n%s", text)
	for _, want := range []string{"TASK", "REQUEST", "TOOL", "WAITING SINCE", "WHAT", id, r.RequestID, "Bash", "make deploy-now",
		"drover task approve TASK REQUEST"} {
		if !strings.Contains(text, want) {
			t.Errorf("drover task pending does not show %q", want)
		}
	}
	var rows []pendingJSON
	out := e.mustDrover("task", "pending", "--output", "json")
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rows) != 1 || rows[0].TaskID != id || rows[0].RequestID != r.RequestID || rows[0].Tool != "Bash" ||
		rows[0].Summary != "make deploy-now" || rows[0].Kind != "tool" || rows[0].Turn != 1 ||
		rows[0].Since.Before(asked.Add(-time.Second)) || rows[0].Since.After(time.Now()) || !rows[0].Deadline.After(rows[0].Since) ||
		!strings.Contains(string(rows[0].Input), "make deploy-now") {
		t.Errorf("drover task pending --output json: %s", out)
	}

	watched := e.mustDrover("task", "watch", id, "--follow=false")
	t.Logf("drover task watch:\n%s", watched)
	for _, want := range []string{
		"WAITS FOR YOU: may Bash run make deploy-now?",
		"request " + r.RequestID + "; denied at ",
		"approve: drover task approve " + id + " " + r.RequestID + "\n",
		"always:  drover task approve " + id + " " + r.RequestID + " --always 1   (allow Bash(make deploy-now)",
		"deny:    drover task deny " + id + " " + r.RequestID + " --reason ",
	} {
		if !strings.Contains(watched, want) {
			t.Errorf("drover task watch does not show %q", want)
		}
	}

	if out, err := e.droverCLI("task", "deny", id); err == nil || !strings.Contains(out, "--reason: a denial needs a reason") {
		t.Errorf("a denial without a reason: %v\n%s", err, out)
	}
	if out, err := e.droverCLI("task", "approve", id, "no-such-request"); err == nil || !strings.Contains(out, `has no permission request "no-such-request"; run drover task pending `+id) {
		t.Errorf("approving a request that does not wait: %v\n%s", err, out)
	}
	if row := e.row(id, r.RequestID); row.Status != task.OutcomePending {
		t.Fatalf("refused commands changed the request: %s", row.Status)
	}
	mark := len(e.fake.MainRequests())
	out = e.mustDrover("task", "deny", id, r.RequestID, "--reason", why, "--by", "erin", "--wait", "1m")
	if !strings.Contains(out, "request "+r.RequestID+" denied by erin") {
		t.Errorf("drover task deny said %q", out)
	}
	next := e.waitAsked(id, "echo safer")
	if tr, ok := e.resultOf(mark, why); !ok || !tr.IsError {
		t.Errorf("the model did not read the reason: %+v", e.toolResultsSince(mark))
	}
	var decided struct {
		TaskID    string              `json:"task_id"`
		RequestID string              `json:"request_id"`
		Delivered bool                `json:"delivered"`
		Decision  task.DecisionRecord `json:"decision"`
	}
	out = e.mustDrover("task", "approve", id, "--output", "json", "--by", "frank", "--wait", "1m")
	if err := json.Unmarshal([]byte(out), &decided); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if decided.RequestID != next.RequestID || !decided.Delivered || decided.Decision.Outcome != task.OutcomeAllowed || decided.Decision.By != "frank" {
		t.Errorf("drover task approve --output json: %s", out)
	}
	e.waitTurns(id, 1)
	if text := e.mustDrover("task", "pending"); !strings.Contains(text, "nothing waits") {
		t.Errorf("drover task pending after the turn:\n%s", text)
	}
	if row := e.row(id, r.RequestID); row.Status != task.OutcomeDenied || row.DecidedBy != "erin" || row.DecisionReason != why {
		t.Errorf("the denied request's row: %s by %q (%q)", row.Status, row.DecidedBy, row.DecisionReason)
	}
}

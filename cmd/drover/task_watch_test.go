package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/taskview"
)

func render(t *testing.T, a events.AgentEvent) string {
	t.Helper()
	payload, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	renderEvent(&b, "t1", taskview.Event{Seq: 7, Turn: 2, Attempt: 1, Type: string(a.Type), Event: payload})
	return b.String()
}

// A waiting request is shown plainly: what is asked, the request, its deadline, and the command
// lines that answer it, ready to paste.
func TestWatchShowsHowToAnswerARequest(t *testing.T) {
	deadline := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	out := render(t, events.AgentEvent{Type: events.TypePermissionRequest, PendingID: "r1", ToolName: "Bash",
		ToolTitle: "Run a shell command", Permission: &events.Permission{Summary: "make deploy", Reasked: true, Deadline: deadline,
			AllowAlways: json.RawMessage(`[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"make deploy"}],"behavior":"allow","destination":"session"},{"type":"addRules","rules":[{"toolName":"Bash"}],"behavior":"allow","destination":"session"}]`)}})
	for _, want := range []string{
		"WAITS FOR YOU: may Bash run make deploy?",
		"request r1 (asked again after a retry of the turn); denied at " + deadline.Local().Format(time.DateTime),
		"approve: drover task approve t1 r1\n",
		"always:  drover task approve t1 r1 --always 1   (allow Bash(make deploy), for the rest of the task)",
		"always:  drover task approve t1 r1 --always 2   (allow every Bash call, for the rest of the task)",
		"deny:    drover task deny t1 r1 --reason 'why, for the agent'",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}

	out = render(t, events.AgentEvent{Type: events.TypePermissionRequest, PendingID: "q1", ToolName: "AskUserQuestion",
		Permission: &events.Permission{Summary: "Which database?", Questions: []events.Question{
			{Question: "Which database?", Options: []events.QuestionOption{{Label: "Postgres"}, {Label: "SQLite"}}},
			{Question: "Which features?", MultiSelect: true, Options: []events.QuestionOption{{Label: "Auth"}, {Label: "Search"}}},
		}}})
	for _, want := range []string{
		"WAITS FOR YOU: the agent asks Which database?",
		"question: Which database? (choose one: Postgres, SQLite)",
		"question: Which features? (choose one or more: Auth, Search)",
		"answer:  drover task approve t1 q1 --answer 'Which database?=Postgres' --answer 'Which features?=Auth'",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "--always") {
		t.Errorf("a question offers allow always:\n%s", out)
	}

	out = render(t, events.AgentEvent{Type: events.TypePermissionRequest, PendingID: "p1", ToolName: "ExitPlanMode",
		Permission: &events.Permission{Plan: "# Plan\n1. Do it.\n"}})
	for _, want := range []string{"the agent presents a plan", "plan:\n", "  # Plan\n", "  1. Do it.\n", "approve: drover task approve t1 p1"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"abc": "abc", "a b": "'a b'", "it's": `'it'\''s'`, "": "''", "Q?=A": "'Q?=A'"} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// A decision shows who answered, how, and what it grants from now on.
func TestWatchShowsTheDecision(t *testing.T) {
	out := render(t, events.AgentEvent{Type: events.TypePermissionDecision, PendingID: "r1", ToolName: "Bash",
		Decision: &events.Decision{Outcome: "allowed", By: "ana", Reason: "ok\nfor now", Grant: "Bash(make deploy)"}})
	if want := "request r1 (Bash) allowed by ana: ok for now; always allowed from now on: Bash(make deploy)"; !strings.Contains(out, want) {
		t.Errorf("missing %q in\n%s", want, out)
	}
	out = render(t, events.AgentEvent{Type: events.TypePermissionDecision, PendingID: "p1", ToolName: "ExitPlanMode",
		Decision: &events.Decision{Outcome: "expired", Reason: "nobody answered"}})
	if want := "request p1 (ExitPlanMode) expired: nobody answered"; !strings.Contains(out, want) {
		t.Errorf("missing %q in\n%s", want, out)
	}
}

// A cancel and a budget change are shown with who made them, and the budget as it now stands.
func TestWatchShowsWhoCancelledAndChangedTheBudget(t *testing.T) {
	for _, c := range []struct {
		ev   events.AgentEvent
		want string
	}{
		{events.AgentEvent{Type: events.TypeCancelRequested, By: "ana"}, "cancel requested by ana"},
		{events.AgentEvent{Type: events.TypeCancelRequested}, "cancel requested\n"},
		{events.AgentEvent{Type: events.TypeBudgetChanged, By: "ops", BudgetSet: &events.BudgetSet{MaxCostUSD: 7, MaxTurns: 40, MaxDurationMS: 90_000}},
			"budget changed by ops: $7.0000, 40 turns, 1m30s"},
		{events.AgentEvent{Type: events.TypeBudgetChanged, By: "ops", BudgetSet: &events.BudgetSet{}}, "budget changed by ops: none"},
	} {
		if out := render(t, c.ev); !strings.Contains(out, c.want) {
			t.Errorf("%+v: missing %q in\n%s", c.ev, c.want, out)
		}
	}
}

package offlinemodel

import (
	"encoding/json"
	"testing"
)

func TestPlanFilePath(t *testing.T) {
	t.Parallel()
	var r Request
	body := `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>\nPlan mode is active.\nNo plan file exists yet. You should create your plan at /c/plans/fix-it-calm-otter.md using the Write tool.\n</system-reminder>"},{"type":"text","text":"Fix it."}]}]}`
	if err := r.parseBody([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if got := PlanFilePath(&r); got != "/c/plans/fix-it-calm-otter.md" {
		t.Errorf("PlanFilePath = %q", got)
	}
	var plain Request
	if err := plain.parseBody([]byte(`{"messages":[{"role":"user","content":"Fix it."}]}`)); err != nil {
		t.Fatal(err)
	}
	if got := PlanFilePath(&plain); got != "" {
		t.Errorf("PlanFilePath without plan mode = %q", got)
	}
}

func TestUsePlanAndQuestionBlocks(t *testing.T) {
	t.Parallel()
	if b := UseExitPlanMode(""); b.Name != "ExitPlanMode" || len(b.Input.(map[string]any)) != 0 {
		t.Errorf("UseExitPlanMode(\"\") = %+v", b)
	}
	b := UseAskUserQuestion(AskQuestion{Question: "Which?", Header: "Pick", MultiSelect: true, Options: []string{"A", "B"}})
	got, _ := json.Marshal(b.Input)
	want := `{"questions":[{"header":"Pick","multiSelect":true,"options":[{"description":"Choose A.","label":"A"},{"description":"Choose B.","label":"B"}],"question":"Which?"}]}`
	if b.Name != "AskUserQuestion" || string(got) != want {
		t.Errorf("UseAskUserQuestion = %s %s", b.Name, got)
	}
}

package activities

import (
	"testing"

	"github.com/drover-run/drover/task"
)

func TestValidateInput(t *testing.T) {
	good := task.RunTurnInput{TaskID: "t", Turn: 1, Prompt: task.Prompt{Text: "hi"},
		PromptUUID: "0b6a4b4e-4f3e-4c57-9d3c-1e0b7f3a9a11", Workspace: "/tmp"}
	if err := validateInput(good); err != nil {
		t.Fatalf("a good input was refused: %v", err)
	}
	for name, mutate := range map[string]func(*task.RunTurnInput){
		"no task":         func(in *task.RunTurnInput) { in.TaskID = "" },
		"turn zero":       func(in *task.RunTurnInput) { in.Turn = 0 },
		"blank prompt":    func(in *task.RunTurnInput) { in.Prompt.Text = " \n" },
		"bad uuid":        func(in *task.RunTurnInput) { in.PromptUUID = "nope" },
		"unknown mode":    func(in *task.RunTurnInput) { in.Profile.PermissionMode = "yolo" },
		"supervised mode": func(in *task.RunTurnInput) { in.Profile.PermissionMode = task.Supervised },
		"plan mode":       func(in *task.RunTurnInput) { in.Profile.PermissionMode = task.Plan },
	} {
		in := good
		mutate(&in)
		if err := validateInput(in); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

package realcli

import (
	"strings"
	"testing"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/clitest"
)

// tasks returns the system task frames of one subtype in msgs.
func tasks(msgs []claudecode.Message, subtype string) []*claudecode.SystemTask {
	var out []*claudecode.SystemTask
	for _, s := range ofType[*claudecode.SystemTask](msgs) {
		if s.Subtype == subtype {
			out = append(out, s)
		}
	}
	return out
}

// TestAgentForeground: an Agent call with run_in_background=false runs the subagent inside the
// turn. Its prompt, its tool calls and their results come on stdout with parent_tool_use_id set to
// the Agent call (its own text blocks do not, without --forward-subagent-text); task_started and
// task_notification bracket it; the subagent's last text is the Agent tool_result the model gets.
func TestAgentForeground(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{Command: claudecode.Command{PermissionMode: claudecode.PermissionBypass}})
	const id = "toolu_drover_agent_fg"
	agent := offlinemodel.UseAgent("Check the marker", "SUBAGENT-TASK: run the sub marker and report.", "general-purpose")
	agent.ID = id
	h.Fake.Enqueue(offlinemodel.Reply(offlinemodel.Text("Delegating."), agent), offlinemodel.Reply(offlinemodel.Text("Main done.")))
	h.Fake.EnqueueSubagent(
		offlinemodel.Reply(offlinemodel.Text("Running the sub marker."), offlinemodel.ToolUseID("toolu_drover_sub_bash", "Bash", map[string]any{"command": "echo drover-sub-$((2*21))"})),
		offlinemodel.Reply(offlinemodel.Text("Subagent report: drover-sub-42.")),
	)
	msgs := h.RunTurn(ctx, "Delegate the marker check.")
	if res := result(t, msgs); res.IsError || res.Result != "Main done." {
		t.Fatalf("result: is_error %v result %q\n%s", res.IsError, res.Result, h.Dump())
	}

	var prompt, subCall, subResult bool
	for _, m := range msgs {
		switch v := m.(type) {
		case *claudecode.UserMessage:
			if v.ParentToolUseID != id {
				continue
			}
			if v.AgentID == "" {
				t.Errorf("subagent user frame without agent_id")
			}
			prompt = prompt || strings.Contains(v.Message.Content.String(), "SUBAGENT-TASK")
			for _, b := range v.Message.Content.Blocks {
				subResult = subResult || (b.ToolUseID == "toolu_drover_sub_bash" && strings.TrimSpace(b.Content.String()) == "drover-sub-42")
			}
		case *claudecode.AssistantMessage:
			for _, b := range v.Message.Content {
				if b.Type == claudecode.BlockText && (strings.Contains(b.Text, "sub marker") || strings.Contains(b.Text, "Subagent report")) {
					t.Errorf("subagent text forwarded (parent %q): %q", v.ParentToolUseID, b.Text)
				}
				subCall = subCall || (v.ParentToolUseID == id && b.ID == "toolu_drover_sub_bash")
			}
		}
	}
	if !prompt || !subCall || !subResult {
		t.Errorf("subagent frames with parent_tool_use_id: prompt %v, tool call %v, tool result %v\n%s", prompt, subCall, subResult, h.Dump())
	}
	started, done := tasks(msgs, claudecode.SubtypeTaskStarted), tasks(msgs, claudecode.SubtypeTaskNotification)
	if len(started) != 1 || started[0].ToolUseID != id || len(done) != 1 || done[0].ToolUseID != id || done[0].Status != "completed" {
		t.Errorf("task frames: started %+v, notification %+v", started, done)
	}
	subs := h.Fake.RequestsOf(offlinemodel.ClassSubagent)
	if len(subs) != 2 || !strings.Contains(subs[0].LastUserText(), "SUBAGENT-TASK") {
		t.Errorf("%d subagent requests", len(subs))
	}
	main := h.Fake.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests, want 2", len(main))
	}
	if trs := main[1].ToolResults(); len(trs) != 1 || trs[0].ToolUseID != id || !strings.Contains(trs[0].Content, "Subagent report: drover-sub-42.") {
		t.Errorf("Agent tool result the model got: %+v", trs)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "agent-foreground")
}

// TestAgentBackground: an Agent call without run_in_background runs in the background on the
// pinned CLI: the tool_result ("Async agent launched …") comes at once and the turn ends; when the
// subagent finishes, the CLI starts a turn of its own (no prompt from us) whose result has an
// origin of kind task-notification. The subagent's text comes with parent_tool_use_id.
func TestAgentBackground(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{Command: claudecode.Command{PermissionMode: claudecode.PermissionBypass}})
	const id = "toolu_drover_agent_bg"
	agent := offlinemodel.ToolUseID(id, "Agent", map[string]any{"description": "Check the marker", "prompt": "SUBAGENT-TASK: report.", "subagent_type": "general-purpose"})
	h.Fake.Enqueue(offlinemodel.Reply(agent), offlinemodel.Reply(offlinemodel.Text("Launched it.")), offlinemodel.Reply(offlinemodel.Text("The agent finished.")))
	// The subagent answers only once our turn is over, so that its completion cannot join that turn.
	release := make(chan struct{})
	h.Fake.EnqueueSubagent(offlinemodel.Reply(offlinemodel.Text("Background report: drover-bg.")).WithHold(0, release))

	first := h.RunTurn(ctx, "Delegate in the background.")
	r1 := result(t, first)
	close(release)
	if r1.IsError || r1.Result != "Launched it." {
		t.Fatalf("result: is_error %v result %q\n%s", r1.IsError, r1.Result, h.Dump())
	}
	launched := false
	for _, tr := range toolResultFrames(first) {
		launched = launched || (tr.ToolUseID == id && strings.HasPrefix(tr.Content.String(), "Async agent launched"))
	}
	if !launched {
		t.Errorf("no immediate 'Async agent launched' tool_result\n%s", h.Dump())
	}
	if n := len(tasks(first, claudecode.SubtypeTaskNotification)); n != 0 {
		t.Errorf("task_notification before the subagent was released")
	}

	second := h.UntilResult(ctx) // a turn the CLI starts by itself
	r2 := result(t, second)
	if r2.IsError || r2.Result != "The agent finished." {
		t.Fatalf("second result: is_error %v result %q", r2.IsError, r2.Result)
	}
	origin := clitest.Object(r2.Raw())["origin"]
	if o, _ := origin.(map[string]any); o["kind"] != "task-notification" {
		t.Errorf("second result origin %v, want kind task-notification", origin)
	}
	if o := clitest.Object(r1.Raw())["origin"]; o != nil {
		t.Errorf("our turn's result has an origin: %v", o)
	}
	done := tasks(second, claudecode.SubtypeTaskNotification)
	if len(done) != 1 || done[0].ToolUseID != id || done[0].Status != "completed" || done[0].Summary != "Background report: drover-bg." {
		t.Errorf("task_notification %+v", done)
	}
	var forwarded bool
	for _, a := range ofType[*claudecode.AssistantMessage](second) {
		forwarded = forwarded || (a.ParentToolUseID == id && a.Message.Content[0].Text == "Background report: drover-bg.")
	}
	if !forwarded {
		t.Errorf("the subagent's text did not come with parent_tool_use_id")
	}
	main := h.Fake.MainRequests()
	if len(main) != 3 {
		t.Fatalf("%d main requests, want 3", len(main))
	}
	if !strings.Contains(main[2].LastUserText(), "Background report: drover-bg.") {
		t.Errorf("the notification turn does not carry the report: %.300q", main[2].LastUserText())
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "agent-background")
}

// TestAgentOtherModel: a subagent that runs on another model than the main session. The result's
// modelUsage then holds two models, each with its own context window; the main session's window
// is the main model's (streamjson labels it), never the subagent model's.
func TestAgentOtherModel(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{Command: claudecode.Command{PermissionMode: claudecode.PermissionBypass}})
	agent := offlinemodel.ToolUseID("toolu_drover_agent_model", "Agent", map[string]any{
		"description": "Quick look", "prompt": "SUBAGENT-TASK: say hello.", "subagent_type": "general-purpose",
		"model": "haiku", "run_in_background": false,
	})
	h.Fake.Enqueue(offlinemodel.Reply(offlinemodel.Text("Asking a smaller model."), agent), offlinemodel.Reply(offlinemodel.Text("Main done.")))
	h.Fake.EnqueueSubagent(offlinemodel.Reply(offlinemodel.Text("Hello from the subagent.")))
	msgs := h.RunTurn(ctx, "Ask a subagent on another model.")
	res := result(t, msgs)
	if res.IsError || len(res.ModelUsage) < 2 {
		t.Fatalf("result: is_error %v, %d models in modelUsage\n%s", res.IsError, len(res.ModelUsage), h.Dump())
	}
	var initModel string
	for _, m := range ofType[*claudecode.SystemInit](msgs) {
		initModel = m.Model
	}
	main, ok := res.ModelUsage[initModel]
	if !ok || main.ContextWindow <= 0 {
		t.Fatalf("the main model %q has no context window in modelUsage: %+v", initModel, res.ModelUsage)
	}
	for name, u := range res.ModelUsage {
		if name != initModel && u.ContextWindow == main.ContextWindow {
			t.Logf("model %s has the same window as the main model (%d)", name, u.ContextWindow)
		}
	}
	for _, r := range h.Fake.RequestsOf(offlinemodel.ClassSubagent) {
		if !strings.Contains(r.Model, "haiku") {
			t.Errorf("a subagent request asked for model %q, want a haiku", r.Model)
		}
	}
	record(t, h, "agent-other-model")
}

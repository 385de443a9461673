package realcli

import (
	"testing"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/clitest"
	"github.com/drover-run/drover/internal/fakeanthropic"
)

func describe(t *testing.T, msgs []claudecode.Message) {
	for _, m := range msgs {
		switch v := m.(type) {
		case *claudecode.AssistantMessage:
			t.Logf("assistant parent=%q block=%s", v.ParentToolUseID, v.Message.Content[0].Type)
		case *claudecode.UserMessage:
			t.Logf("user parent=%q agent=%q text=%.80q", v.ParentToolUseID, v.AgentID, v.Message.Content.String())
		case *claudecode.SystemTask:
			t.Logf("system/%s task=%s tool_use=%s status=%s", v.Subtype, v.TaskID, v.ToolUseID, v.Status)
		case *claudecode.ResultMessage:
			t.Logf("result %s %q", v.Subtype, v.Result)
		case *claudecode.Unknown:
			t.Logf("unknown %s/%s", v.MessageType, v.Subtype)
		default:
			t.Logf("%T", m)
		}
	}
}

func TestAgentForeground(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{Command: claudecode.Command{PermissionMode: claudecode.PermissionBypass}})
	agent := fakeanthropic.UseAgent("Check the marker", "SUBAGENT-TASK: run the sub marker and report.", "general-purpose")
	agent.ID = "toolu_drover_agent_fg"
	h.Fake.Enqueue(fakeanthropic.Reply(fakeanthropic.Text("Delegating."), agent), fakeanthropic.Reply(fakeanthropic.Text("Main done.")))
	h.Fake.EnqueueSubagent(
		fakeanthropic.Reply(fakeanthropic.Text("Running the sub marker."), fakeanthropic.ToolUseID("toolu_drover_sub_bash", "Bash", map[string]any{"command": "echo drover-sub-$((2*21))"})),
		fakeanthropic.Reply(fakeanthropic.Text("Subagent report: drover-sub-42.")),
	)
	msgs := h.RunTurn(ctx, "Delegate the marker check.")
	describe(t, msgs)
	record(t, h, "agent-foreground")
}

func TestAgentBackground(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{Command: claudecode.Command{PermissionMode: claudecode.PermissionBypass}})
	agent := fakeanthropic.ToolUseID("toolu_drover_agent_bg", "Agent", map[string]any{"description": "Check the marker", "prompt": "SUBAGENT-TASK: report.", "subagent_type": "general-purpose"})
	h.Fake.Enqueue(fakeanthropic.Reply(agent), fakeanthropic.Reply(fakeanthropic.Text("Launched it.")), fakeanthropic.Reply(fakeanthropic.Text("The agent finished.")))
	h.Fake.EnqueueSubagent(fakeanthropic.Reply(fakeanthropic.Text("Background report: drover-bg.")))
	msgs := h.RunTurn(ctx, "Delegate in the background.")
	describe(t, msgs)
	t.Log("---- waiting for a second result")
	more := h.UntilResult(ctx)
	describe(t, more)
	for i, r := range h.Fake.MainRequests() {
		t.Logf("main %d: %s last=%.200q", i, roles(r), r.LastUserText())
	}
	record(t, h, "agent-background")
}

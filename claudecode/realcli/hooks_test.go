package realcli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/clitest"
)

// hookHandler answers PreToolUse hooks with decision, Stop hooks with approve, and allows every
// can_use_tool.
func hookHandler(decision, reason string) claudecode.Handler {
	return claudecode.HandlerFunc(func(_ context.Context, req *claudecode.ControlRequest) (any, error) {
		switch {
		case req.CanUseTool != nil:
			return claudecode.AllowTool(nil, req.CanUseTool.ToolUseID), nil
		case req.HookCallback != nil && req.HookCallback.Input.HookEventName == "PreToolUse":
			return claudecode.PreToolUseDecision(decision, reason), nil
		case req.HookCallback != nil && req.HookCallback.Input.HookEventName == "Stop":
			return claudecode.StopApprove(""), nil
		}
		return claudecode.HookOutput{}, nil
	})
}

// bashHooks registers a PreToolUse hook on Bash.
var bashHooks = claudecode.InitializeRequest{Hooks: map[string][]claudecode.HookMatcher{
	"PreToolUse": {{Matcher: "^Bash$", HookCallbackIDs: []string{"tool_approval"}}},
}}

// isHook matches the hook_callback of one event.
func isHook(event string) func(claudecode.Message) bool {
	return func(m claudecode.Message) bool {
		r, ok := m.(*claudecode.ControlRequest)
		return ok && r.HookCallback != nil && r.HookCallback.Input.HookEventName == event
	}
}

func isCanUseTool(m claudecode.Message) bool {
	r, ok := m.(*claudecode.ControlRequest)
	return ok && r.CanUseTool != nil
}

func isResult(m claudecode.Message) bool {
	_, ok := m.(*claudecode.ResultMessage)
	return ok
}

// runHookedBash registers bashHooks, runs one turn in which the model calls Bash with bashMarker
// and returns the turn's messages.
func runHookedBash(t *testing.T, h *clitest.Harness, id string) []claudecode.Message {
	t.Helper()
	ctx := testContext(t)
	resp, err := h.Initialize(ctx, bashHooks)
	if err != nil {
		t.Fatalf("initialize: %v\n%s", err, h.Dump())
	}
	if len(resp.Commands) == 0 {
		t.Errorf("initialize answered no slash commands")
	}
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.ToolUseID(id, "Bash", map[string]any{"command": bashMarker})),
		offlinemodel.Reply(offlinemodel.Text("Done with the hook.")),
	)
	msgs := h.RunTurn(ctx, "Run the marker command.")
	if res := result(t, msgs); res.IsError || res.Result != "Done with the hook." {
		t.Fatalf("result: is_error=%v result=%q\n%s", res.IsError, res.Result, h.Dump())
	}
	hooks := ofType[*claudecode.ControlRequest](msgs)
	var pre *claudecode.HookCallback
	for _, r := range hooks {
		if r.HookCallback != nil && r.HookCallback.Input.HookEventName == "PreToolUse" {
			if pre != nil {
				t.Errorf("more than one PreToolUse hook_callback")
			}
			pre = r.HookCallback
		}
	}
	if pre == nil {
		t.Fatalf("no PreToolUse hook_callback\n%s", h.Dump())
	}
	if pre.CallbackID != "tool_approval" || pre.ToolUseID != id || pre.Input.ToolName != "Bash" ||
		inputField(pre.Input.ToolInput, "command") != bashMarker {
		t.Errorf("hook_callback: callback %q tool_use_id %q tool %q input %s", pre.CallbackID, pre.ToolUseID, pre.Input.ToolName, pre.Input.ToolInput)
	}
	if res := result(t, msgs); pre.Input.SessionID != res.SessionID || pre.Input.CWD != h.WorkDir {
		t.Errorf("hook input: session %q cwd %q", pre.Input.SessionID, pre.Input.CWD)
	}
	return msgs
}

// fakeToolResult returns the one tool result of the fake's second main request.
func fakeToolResult(t *testing.T, h *clitest.Harness) offlinemodel.ToolResult {
	t.Helper()
	main := h.Fake.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests, want 2", len(main))
	}
	trs := main[1].ToolResults()
	if len(trs) != 1 {
		t.Fatalf("tool results the fake received: %+v", trs)
	}
	return trs[0]
}

// TestHookAllow: a PreToolUse hook registered through initialize that answers allow lets the
// command run without any can_use_tool, even in the default permission mode.
func TestHookAllow(t *testing.T) {
	t.Parallel()
	h := start(t, clitest.Options{Command: permissionCommand, Handler: hookHandler(claudecode.DecisionAllow, "drover test allows it")})
	msgs := runHookedBash(t, h, "toolu_drover_hook_allow")
	if n := len(controlRequests(msgs, claudecode.RequestCanUseTool)); n != 0 {
		t.Errorf("%d can_use_tool after a hook allow, want 0", n)
	}
	if tr := fakeToolResult(t, h); tr.IsError || strings.TrimSpace(tr.Content) != "drover-bash-42" {
		t.Errorf("tool result: %+v", tr)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "hook-allow")
}

// TestHookDeny: a PreToolUse deny becomes an error tool_result carrying our reason; the command
// does not run and nothing asks through can_use_tool.
func TestHookDeny(t *testing.T) {
	t.Parallel()
	const why = "drover test hook: no shell"
	h := start(t, clitest.Options{Command: permissionCommand, Handler: hookHandler(claudecode.DecisionDeny, why)})
	msgs := runHookedBash(t, h, "toolu_drover_hook_deny")
	if n := len(controlRequests(msgs, claudecode.RequestCanUseTool)); n != 0 {
		t.Errorf("%d can_use_tool after a hook deny, want 0", n)
	}
	if tr := fakeToolResult(t, h); !tr.IsError || !strings.Contains(tr.Content, why) {
		t.Errorf("tool result: %+v", tr)
	}
	if _, err := os.Stat(filepath.Join(h.WorkDir, "made-by-bash")); !os.IsNotExist(err) {
		t.Errorf("the denied command ran: %v", err)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "hook-deny")
}

// TestHookAsk: a PreToolUse ask is followed by a can_use_tool for the same call, even under
// bypassPermissions (drover's supervised mode); allowing it runs the command.
func TestHookAsk(t *testing.T) {
	t.Parallel()
	h := start(t, clitest.Options{
		Command: claudecode.Command{PermissionMode: claudecode.PermissionBypass, PermissionPromptToolStdio: true},
		Handler: hookHandler(claudecode.DecisionAsk, "drover test wants a human"),
	})
	msgs := runHookedBash(t, h, "toolu_drover_hook_ask")
	hook, ask := index(msgs, isHook("PreToolUse")), index(msgs, isCanUseTool)
	if ask < 0 || hook > ask {
		t.Fatalf("hook_callback at %d, can_use_tool at %d: want the hook first, then can_use_tool\n%s", hook, ask, h.Dump())
	}
	if c := msgs[ask].(*claudecode.ControlRequest).CanUseTool; c.ToolUseID != "toolu_drover_hook_ask" || c.ToolName != "Bash" {
		t.Errorf("can_use_tool for %q %q", c.ToolName, c.ToolUseID)
	}
	if tr := fakeToolResult(t, h); tr.IsError || strings.TrimSpace(tr.Content) != "drover-bash-42" {
		t.Errorf("tool result: %+v", tr)
	}
	if inits := ofType[*claudecode.SystemInit](msgs); len(inits) != 1 || inits[0].PermissionMode != claudecode.PermissionBypass {
		t.Errorf("system/init permission mode: %+v", inits)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "hook-ask")
}

// TestStopHook: a Stop hook registered through initialize is called once the model is done, before
// the result.
func TestStopHook(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{Handler: hookHandler("", "")})
	if _, err := h.Initialize(ctx, claudecode.InitializeRequest{Hooks: map[string][]claudecode.HookMatcher{
		"Stop": {{HookCallbackIDs: []string{"stop_check"}}},
	}}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	h.Fake.Enqueue(offlinemodel.Reply(offlinemodel.Text("All done.")))
	msgs := h.RunTurn(ctx, "Finish up.")
	res := result(t, msgs)
	if res.IsError || res.Result != "All done." {
		t.Fatalf("result: is_error=%v result=%q", res.IsError, res.Result)
	}
	stop := index(msgs, isHook("Stop"))
	if stop < 0 || stop > index(msgs, isResult) {
		t.Fatalf("Stop hook_callback at %d, result at %d\n%s", stop, index(msgs, isResult), h.Dump())
	}
	cb := msgs[stop].(*claudecode.ControlRequest).HookCallback
	if cb.CallbackID != "stop_check" || cb.Input.SessionID != res.SessionID || cb.Input.StopHookActive {
		t.Errorf("Stop hook: callback %q session %q stop_hook_active %v", cb.CallbackID, cb.Input.SessionID, cb.Input.StopHookActive)
	}
	if !strings.HasPrefix(cb.Input.TranscriptPath, filepath.Join(h.ConfigDir, "projects")) {
		t.Errorf("transcript_path %q is not under CLAUDE_CONFIG_DIR/projects", cb.Input.TranscriptPath)
	}
	if n := len(h.Fake.MainRequests()); n != 1 {
		t.Errorf("%d main requests, want 1", n)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "stop-hook")
}

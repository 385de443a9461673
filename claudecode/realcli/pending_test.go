package realcli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/clitest"
)

// pendingHandler is supervisedHandler whose can_use_tool answers wait for the request's context
// to end and report its cause.
func pendingHandler(causes chan<- error) claudecode.Handler {
	return claudecode.HandlerFunc(func(ctx context.Context, req *claudecode.ControlRequest) (any, error) {
		if req.CanUseTool == nil {
			return supervisedHandler(allowRequest).HandleControl(ctx, req)
		}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, context.Cause(ctx)
	})
}

// stdoutKinds names the stdout lines of the current process from the one holding marker on, for
// order checks: the type, with the subtype of control requests and the first text of user frames.
func stdoutKinds(h *clitest.Harness, marker string) []string {
	var out []string
	for _, l := range h.Stdout() {
		if len(out) == 0 && !bytes.Contains(l, []byte(marker)) {
			continue
		}
		o := clitest.Object(l)
		kind, _ := o["type"].(string)
		switch kind {
		case claudecode.TypeControlRequest:
			r, _ := o["request"].(map[string]any)
			kind += "/" + r["subtype"].(string)
		case claudecode.TypeUser:
			m, _ := claudecode.Decode(l)
			if u, ok := m.(*claudecode.UserMessage); ok {
				text := u.Message.Content.String()
				if len(u.Message.Content.Blocks) > 0 && u.Message.Content.Blocks[0].Type == claudecode.BlockToolResult {
					text = "tool_result"
				}
				kind += "/" + text
			}
		}
		out = append(out, kind)
	}
	return out
}

// TestPermissionCancelledAndLateAnswer: an interrupt while a supervised can_use_tool waits. The
// CLI withdraws the request, answers our interrupt, writes the rejection tool result and the
// interrupt note, and ends the turn: can_use_tool → control_cancel_request → control_response →
// user(tool_result) → user("[Request interrupted by user for tool use]") → result
// (error_during_execution). An answer written after the withdrawal (Client.Answer) is ignored:
// the tool never runs and the next turn is as if it had never been written.
func TestPermissionCancelledAndLateAnswer(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	causes := make(chan error, 1)
	h := start(t, clitest.Options{Command: supervisedCommand, Handler: pendingHandler(causes)})
	if _, err := h.Initialize(ctx, claudecode.InitializeRequest{Hooks: claudecode.SupervisedHooks(toolCallback, "")}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_pending_late", "Bash", map[string]any{"command": bashMarker})),
		offlinemodel.Reply(offlinemodel.Text("After the interrupt.")),
	)
	h.Send(ctx, claudecode.Prompt{Text: "Run the marker command."})
	msgs, err := h.ReadUntil(ctx, isCanUseTool)
	if err != nil {
		t.Fatalf("waiting for can_use_tool: %v\n%s", err, h.Dump())
	}
	ask := msgs[len(msgs)-1].(*claudecode.ControlRequest)
	if err := h.Interrupt(ctx); err != nil {
		t.Fatalf("interrupt: %v", err)
	}
	msgs = append(msgs, h.UntilResult(ctx)...)
	if res := result(t, msgs); !res.IsError || res.Subtype != claudecode.SubtypeErrorDuringExec {
		t.Errorf("result: subtype %q is_error %v", res.Subtype, res.IsError)
	}
	want := []string{
		"control_request/can_use_tool", "control_cancel_request", "control_response", "user/tool_result",
		"user/[Request interrupted by user for tool use]", "result",
	}
	if got := stdoutKinds(h, `"subtype":"can_use_tool"`); strings.Join(got, " → ") != strings.Join(want, " → ") {
		t.Errorf("frames from can_use_tool on:\n got %v\nwant %v", got, want)
	}
	if cause := <-causes; !errors.Is(cause, claudecode.ErrRequestCancelled) {
		t.Errorf("handler context cause %v", cause)
	}

	if err := h.Answer(ask.RequestID, claudecode.AllowTool(nil, ask.CanUseTool.ToolUseID)); err != nil {
		t.Fatalf("late answer: %v", err)
	}
	next := h.RunTurn(ctx, "Never mind.")
	if res := result(t, next); res.IsError || res.Result != "After the interrupt." {
		t.Errorf("next turn: is_error %v result %q", res.IsError, res.Result)
	}
	if n := len(toolResultFrames(next)); n != 0 {
		t.Errorf("%d tool results after the late answer", n)
	}
	if _, err := os.Stat(filepath.Join(h.WorkDir, "made-by-bash")); !os.IsNotExist(err) {
		t.Errorf("the command ran after a late answer: %v", err)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "permission-late-answer")
}

// TestPermissionPendingAtEOF: closing the CLI's stdin while a can_use_tool waits denies the call:
// the model gets the error result "Tool permission request failed: AbortError: Tool permission
// stream closed before response received", is called again, and the turn ends with a normal
// result before the process exits 0.
func TestPermissionPendingAtEOF(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	causes := make(chan error, 1)
	h := start(t, clitest.Options{Command: supervisedCommand, Handler: pendingHandler(causes)})
	if _, err := h.Initialize(ctx, claudecode.InitializeRequest{Hooks: claudecode.SupervisedHooks(toolCallback, "")}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_pending_eof", "Bash", map[string]any{"command": bashMarker})),
		offlinemodel.Reply(offlinemodel.Text("The shell was refused.")),
	)
	h.Send(ctx, claudecode.Prompt{Text: "Run the marker command."})
	msgs, err := h.ReadUntil(ctx, isCanUseTool)
	if err != nil {
		t.Fatalf("waiting for can_use_tool: %v\n%s", err, h.Dump())
	}
	if err := h.Process().Client().CloseInput(); err != nil {
		t.Fatalf("closing stdin: %v", err)
	}
	msgs = append(msgs, h.UntilResult(ctx)...)
	if res := result(t, msgs); res.IsError || res.Result != "The shell was refused." {
		t.Errorf("result: is_error %v result %q", res.IsError, res.Result)
	}
	trs := toolResultFrames(msgs)
	const refused = "Tool permission request failed: AbortError: Tool permission stream closed before response received"
	if len(trs) != 1 || !trs[0].IsError || trs[0].Content.String() != refused {
		t.Errorf("tool result: %+v", trs)
	}
	if n := len(h.Fake.MainRequests()); n != 2 {
		t.Errorf("%d main requests, want 2", n)
	}
	if _, err := os.Stat(filepath.Join(h.WorkDir, "made-by-bash")); !os.IsNotExist(err) {
		t.Errorf("the command ran: %v", err)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	if cause := <-causes; !errors.Is(cause, claudecode.ErrStreamEnded) {
		t.Errorf("handler context cause %v, want the end of the stream", cause)
	}
	record(t, h, "permission-eof")
}

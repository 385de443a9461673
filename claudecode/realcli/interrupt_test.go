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

// TestInterruptWhileStreaming: an interrupt while the API answer is still streaming ends the turn
// with error_during_execution (aborted_streaming); the rest of the answer never shows, and the
// process takes the next prompt, whose history carries the interruption.
func TestInterruptWhileStreaming(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{Command: claudecode.Command{IncludePartialMessages: true}})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.Text("First block, streamed."), offlinemodel.Text("Second block, never sent.")).WithHold(1, release),
		offlinemodel.Reply(offlinemodel.Text("After the interrupt.")),
	)
	h.Send(ctx, claudecode.Prompt{Text: "Tell me a long story."})
	first, err := h.ReadUntil(ctx, func(m claudecode.Message) bool {
		a, ok := m.(*claudecode.AssistantMessage)
		return ok && len(a.Message.Content) > 0 && a.Message.Content[0].Text == "First block, streamed."
	})
	if err != nil {
		t.Fatalf("waiting for the first block: %v\n%s", err, h.Dump())
	}
	if err := h.Interrupt(ctx); err != nil {
		t.Fatalf("interrupt: %v", err)
	}
	msgs := append(first, h.UntilResult(ctx)...)
	res := result(t, msgs)
	if !res.IsError || res.Subtype != claudecode.SubtypeErrorDuringExec || res.TerminalReason != "aborted_streaming" {
		t.Errorf("result: subtype %q is_error %v terminal_reason %q, want error_during_execution/aborted_streaming",
			res.Subtype, res.IsError, res.TerminalReason)
	}
	for _, b := range assistantBlocks(msgs) {
		if strings.Contains(b.Text, "never sent") {
			t.Errorf("the held block arrived")
		}
	}
	for _, e := range ofType[*claudecode.StreamEvent](msgs) {
		if e.Event.Delta != nil && strings.Contains(e.Event.Delta.Text, "never sent") {
			t.Errorf("a delta of the held block arrived")
		}
	}
	if len(ofType[*claudecode.StreamEvent](first)) == 0 {
		t.Errorf("no stream_event before the interrupt, with --include-partial-messages")
	}

	next := result(t, h.RunTurn(ctx, "Go on."))
	if next.IsError || next.Result != "After the interrupt." {
		t.Errorf("turn after the interrupt: is_error %v result %q", next.IsError, next.Result)
	}
	main := h.Fake.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests, want 2", len(main))
	}
	hist := main[1]
	if !strings.Contains(hist.LastUserText(), "[Request interrupted by user]") {
		t.Errorf("the next request's last user message lacks the interrupt note: %q (%s)", hist.LastUserText(), roles(hist))
	}
	var kept bool
	for _, m := range hist.Messages {
		kept = kept || (m.Role == "assistant" && strings.Contains(m.Text(), "First block, streamed."))
	}
	t.Logf("history after the interrupt: %s (first block kept: %v)", roles(hist), kept)
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "interrupt-streaming")
}

// TestInterruptWhilePermissionPending: an interrupt while a can_use_tool waits for us makes the CLI
// withdraw that request (control_cancel_request with its id); the handler sees its context end
// with ErrRequestCancelled, no answer is written, the tool never runs, and the turn ends with
// error_during_execution.
func TestInterruptWhilePermissionPending(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	causes := make(chan error, 1)
	h := start(t, clitest.Options{
		Command: permissionCommand,
		Handler: claudecode.HandlerFunc(func(ctx context.Context, req *claudecode.ControlRequest) (any, error) {
			if req.CanUseTool == nil {
				return claudecode.HookOutput{}, nil
			}
			<-ctx.Done() // a human who never answers
			causes <- context.Cause(ctx)
			return nil, context.Cause(ctx)
		}),
	})
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.ToolUseID("toolu_drover_pending", "Bash", map[string]any{"command": bashMarker})),
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
	res := result(t, msgs)
	if !res.IsError || res.Subtype != claudecode.SubtypeErrorDuringExec {
		t.Errorf("result: subtype %q is_error %v, want error_during_execution", res.Subtype, res.IsError)
	}
	t.Logf("result terminal_reason %q, errors %q", res.TerminalReason, res.Errors)
	cancels := ofType[*claudecode.ControlCancelRequest](msgs)
	if len(cancels) != 1 || cancels[0].RequestID != ask.RequestID {
		t.Fatalf("control_cancel_request %+v, want one for %q\n%s", cancels, ask.RequestID, h.Dump())
	}
	if c := index(msgs, func(m claudecode.Message) bool { _, ok := m.(*claudecode.ControlCancelRequest); return ok }); c > index(msgs, isResult) {
		t.Errorf("control_cancel_request after the result")
	}
	select {
	case cause := <-causes:
		if !errors.Is(cause, claudecode.ErrRequestCancelled) {
			t.Errorf("handler context cause %v, want ErrRequestCancelled", cause)
		}
	case <-ctx.Done():
		t.Fatalf("the handler's context never ended")
	}
	for _, l := range h.Stdin() {
		if bytes.Contains(l, []byte(`"control_response"`)) && bytes.Contains(l, []byte(ask.RequestID)) {
			t.Errorf("an answer to the withdrawn request was written: %s", l)
		}
	}
	if _, err := os.Stat(filepath.Join(h.WorkDir, "made-by-bash")); !os.IsNotExist(err) {
		t.Errorf("the pending command ran: %v", err)
	}
	if n := len(h.Fake.MainRequests()); n != 1 {
		t.Errorf("%d main requests, want 1", n)
	}
	next := result(t, h.RunTurn(ctx, "Never mind."))
	if next.IsError || next.Result != "After the interrupt." {
		t.Errorf("turn after the interrupt: is_error %v result %q", next.IsError, next.Result)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "interrupt-permission")
}

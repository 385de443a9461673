package realcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/clitest"
)

// startStop starts a session whose Stop hook (with timeout seconds, 0 for the CLI's default) is
// answered by answer.
func startStop(t *testing.T, timeout float64, answer func(context.Context, *claudecode.HookInput) (any, error)) *clitest.Harness {
	t.Helper()
	h := start(t, clitest.Options{Handler: claudecode.HandlerFunc(func(ctx context.Context, req *claudecode.ControlRequest) (any, error) {
		if req.HookCallback != nil && req.HookCallback.Input.HookEventName == claudecode.HookStop {
			return answer(ctx, &req.HookCallback.Input)
		}
		return claudecode.HookOutput{}, nil
	})})
	if _, err := h.Initialize(testContext(t), claudecode.InitializeRequest{Hooks: map[string][]claudecode.HookMatcher{
		claudecode.HookStop: {{HookCallbackIDs: []string{stopCallback}, Timeout: timeout}},
	}}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return h
}

// systemFrames returns the objects of the system frames of one subtype in msgs.
func systemFrames(msgs []claudecode.Message, subtype string) []map[string]any {
	var out []map[string]any
	for _, m := range msgs {
		if o := clitest.Object(m.Raw()); o["type"] == claudecode.TypeSystem && o["subtype"] == subtype {
			out = append(out, o)
		}
	}
	return out
}

// feedback returns the texts of the synthetic "Stop hook feedback" user frames in msgs.
func feedback(msgs []claudecode.Message) []string {
	var out []string
	for _, u := range ofType[*claudecode.UserMessage](msgs) {
		if s := u.Message.Content.String(); strings.HasPrefix(s, "Stop hook feedback:\n") && clitest.Object(u.Raw())["isSynthetic"] == true {
			out = append(out, strings.TrimPrefix(s, "Stop hook feedback:\n"))
		}
	}
	return out
}

// TestStopHookBlock: a Stop hook's block keeps the agent going in the same turn: the CLI writes the
// reason as a synthetic user message ("Stop hook feedback:\n<reason>"), calls the model again,
// and asks the Stop hook again with stop_hook_active set; an approve then ends the turn with the
// last text as its result. The hook sees the text the agent would stop on.
func TestStopHookBlock(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const why = "There are uncommitted changes in the work tree: commit them first."
	h := startStop(t, 0, func(_ context.Context, in *claudecode.HookInput) (any, error) {
		if in.StopHookActive {
			return claudecode.StopApprove(""), nil
		}
		return claudecode.StopBlock(why), nil
	})
	h.Fake.Enqueue(offlinemodel.Reply(offlinemodel.Text("Finished, I think.")), offlinemodel.Reply(offlinemodel.Text("Committed, now finished.")))
	msgs := h.RunTurn(ctx, "Finish up.")
	if res := result(t, msgs); res.IsError || res.Result != "Committed, now finished." || res.TerminalReason != "completed" {
		t.Fatalf("result: is_error %v result %q terminal %q\n%s", res.IsError, res.Result, res.TerminalReason, h.Dump())
	}
	stops := hookCallbacks(msgs, claudecode.HookStop)
	if len(stops) != 2 || stops[0].HookCallback.Input.StopHookActive || !stops[1].HookCallback.Input.StopHookActive {
		t.Fatalf("%d Stop hooks, want 2, the second with stop_hook_active", len(stops))
	}
	if in := stops[0].HookCallback.Input; in.LastAssistantMessage != "Finished, I think." {
		t.Errorf("last_assistant_message %q", in.LastAssistantMessage)
	}
	if fb := feedback(msgs); len(fb) != 1 || fb[0] != why {
		t.Errorf("feedback frames %q", fb)
	}
	if n := systemFrames(msgs, claudecode.SubtypeNotification); len(n) != 1 || n[0]["key"] != "stop-hook-error" {
		t.Errorf("notifications %v", n)
	}
	main := h.Fake.MainRequests()
	if len(main) != 2 || !strings.Contains(main[1].LastUserText(), why) {
		t.Errorf("%d main requests; the second's last user text %.300q", len(main), main[len(main)-1].LastUserText())
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "stop-block")
}

// TestStopHookBlockCap: a Stop hook that always blocks is overridden after 9 blocks in a row: a
// system/informational warning, then a result with an empty result text. The turn does end.
func TestStopHookBlockCap(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := startStop(t, 0, func(context.Context, *claudecode.HookInput) (any, error) {
		return claudecode.StopBlock("Keep going."), nil
	})
	for i := range 12 {
		h.Fake.Enqueue(offlinemodel.Reply(offlinemodel.Text(fmt.Sprintf("Attempt %d.", i+1))))
	}
	msgs := h.RunTurn(ctx, "Never stop.")
	res := result(t, msgs)
	if res.IsError || res.Subtype != claudecode.SubtypeSuccess || res.Result != "" {
		t.Errorf("result: subtype %q is_error %v result %q, want success with an empty text", res.Subtype, res.IsError, res.Result)
	}
	stops, main := len(hookCallbacks(msgs, claudecode.HookStop)), len(h.Fake.MainRequests())
	if stops != 9 || main != 9 || len(feedback(msgs)) != 9 {
		t.Errorf("%d Stop hooks, %d main requests, %d feedback frames; want 9 each", stops, main, len(feedback(msgs)))
	}
	var warned bool
	for _, o := range systemFrames(msgs, "informational") {
		s, _ := o["content"].(string)
		warned = warned || strings.Contains(s, "blocked the turn from ending 9 consecutive times")
	}
	if !warned {
		t.Errorf("no block-cap warning\n%s", h.Dump())
	}
	var capped bool
	for _, o := range systemFrames(msgs, claudecode.SubtypeNotification) {
		capped = capped || o["key"] == "stop-hook-block-cap"
	}
	if !capped {
		t.Errorf("no stop-hook-block-cap notification")
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "stop-block-cap")
}

// TestStopHookAnswers: one turn per answer. approve and {} end the turn as usual; an error answer
// and an invalid one are treated as empty, with a warning (system/informational, tag
// hook_callback_failed);
// continue:false (StopHalt) ends the turn at once with terminal_reason stop_hook_prevented and
// the last text as result; continue:false with a block writes the feedback but still ends the
// turn, with an empty result text, and the feedback reaches the model with the next prompt. Every
// turn has its result.
func TestStopHookAnswers(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	halt := claudecode.StopHalt("drover halts here")
	haltBlock := claudecode.StopHalt("drover halts here")
	haltBlock.Decision, haltBlock.Reason = claudecode.StopDecisionBlock, "Feedback for later."
	invalid := json.RawMessage(`{"decision":"deny","reason":"not a Stop decision"}`)
	answers := []any{claudecode.StopApprove(""), claudecode.HookOutput{}, errors.New("drover could not check"), invalid, halt, haltBlock, claudecode.StopApprove("")}
	var turn atomic.Int32
	h := startStop(t, 0, func(context.Context, *claudecode.HookInput) (any, error) {
		a := answers[turn.Load()]
		if err, ok := a.(error); ok {
			return nil, err
		}
		return a, nil
	})
	for i := range answers {
		h.Fake.Enqueue(offlinemodel.Reply(offlinemodel.Text(fmt.Sprintf("Reply %d.", i+1))))
	}
	type want struct {
		result, terminal string
		warned, fed      bool
	}
	wants := []want{
		{"Reply 1.", "completed", false, false},
		{"Reply 2.", "completed", false, false},
		{"Reply 3.", "completed", true, false},
		{"Reply 4.", "completed", true, false},
		{"Reply 5.", "stop_hook_prevented", false, false},
		{"", "stop_hook_prevented", false, true},
		{"Reply 7.", "completed", false, false},
	}
	for i, w := range wants {
		turn.Store(int32(i)) // the hook of turn i runs while RunTurn waits
		msgs := h.RunTurn(ctx, fmt.Sprintf("Turn %d.", i+1))
		res := result(t, msgs)
		var warned bool
		for _, o := range systemFrames(msgs, "informational") {
			warned = warned || o["tag"] == "hook_callback_failed"
		}
		if res.IsError || res.Result != w.result || res.TerminalReason != w.terminal || warned != w.warned || (len(feedback(msgs)) == 1) != w.fed {
			t.Errorf("turn %d: result %q terminal %q warned %v feedback %q; want %+v", i+1, res.Result, res.TerminalReason, warned, feedback(msgs), w)
		}
	}
	main := h.Fake.MainRequests()
	if len(main) != len(wants) {
		t.Errorf("%d main requests, want %d (no answer made the model go on)", len(main), len(wants))
	}
	if last := main[len(main)-1]; !strings.Contains(last.LastUserText(), "Feedback for later.") || !strings.Contains(last.LastUserText(), "Turn 7.") {
		t.Errorf("the last request's user text %.400q lacks the held feedback or the prompt", last.LastUserText())
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "stop-answers")
}

// TestStopHookUnanswered: a Stop hook left unanswered past its matcher's timeout is withdrawn
// (control_cancel_request with its id; the handler's context ends with ErrRequestCancelled), the
// CLI says so (system/informational "… didn't respond, so this turn ended without it.") and the
// turn ends with its result. Without a timeout the CLI waits far longer (its default), so drover
// sets one.
func TestStopHookUnanswered(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	causes := make(chan error, 1)
	h := startStop(t, 1, func(ctx context.Context, _ *claudecode.HookInput) (any, error) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, context.Cause(ctx)
	})
	h.Fake.Enqueue(offlinemodel.Reply(offlinemodel.Text("Waiting for nobody.")))
	msgs := h.RunTurn(ctx, "Finish.")
	res := result(t, msgs)
	if res.IsError || res.Result != "Waiting for nobody." || res.TerminalReason != "completed" {
		t.Errorf("result: is_error %v result %q terminal %q", res.IsError, res.Result, res.TerminalReason)
	}
	stop, cancel := index(msgs, isHook(claudecode.HookStop)), index(msgs, func(m claudecode.Message) bool { _, ok := m.(*claudecode.ControlCancelRequest); return ok })
	if stop < 0 || cancel < stop || msgs[cancel].(*claudecode.ControlCancelRequest).RequestID != msgs[stop].(*claudecode.ControlRequest).RequestID {
		t.Fatalf("Stop hook at %d, cancel at %d\n%s", stop, cancel, h.Dump())
	}
	var said bool
	for _, o := range systemFrames(msgs[cancel:], "informational") {
		s, _ := o["content"].(string)
		said = said || strings.HasSuffix(s, "didn't respond, so this turn ended without it.")
	}
	if !said {
		t.Errorf("no notice of the unanswered hook\n%s", h.Dump())
	}
	if cause := <-causes; !errors.Is(cause, claudecode.ErrRequestCancelled) {
		t.Errorf("handler context cause %v", cause)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "stop-unanswered")
}

// TestStopHookInterrupted: an interrupt while the Stop hook waits withdraws the hook
// (control_cancel_request) and ends the turn with a success result (terminal_reason completed,
// the last text), not with error_during_execution as an interrupt elsewhere does. The process
// takes the next prompt.
func TestStopHookInterrupted(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	var answered atomic.Bool
	h := startStop(t, 0, func(ctx context.Context, _ *claudecode.HookInput) (any, error) {
		if !answered.Swap(true) {
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}
		return claudecode.StopApprove(""), nil
	})
	h.Fake.Enqueue(offlinemodel.Reply(offlinemodel.Text("Almost there.")), offlinemodel.Reply(offlinemodel.Text("Next turn.")))
	h.Send(ctx, claudecode.Prompt{Text: "Finish."})
	msgs, err := h.ReadUntil(ctx, isHook(claudecode.HookStop))
	if err != nil {
		t.Fatalf("waiting for the Stop hook: %v\n%s", err, h.Dump())
	}
	hookID := msgs[len(msgs)-1].(*claudecode.ControlRequest).RequestID
	if err := h.Interrupt(ctx); err != nil {
		t.Fatalf("interrupt: %v", err)
	}
	msgs = append(msgs, h.UntilResult(ctx)...)
	res := result(t, msgs)
	if res.IsError || res.Subtype != claudecode.SubtypeSuccess || res.TerminalReason != "completed" || res.Result != "Almost there." {
		t.Errorf("result: subtype %q is_error %v terminal %q result %q", res.Subtype, res.IsError, res.TerminalReason, res.Result)
	}
	cancels := ofType[*claudecode.ControlCancelRequest](msgs)
	if len(cancels) != 1 || cancels[0].RequestID != hookID {
		t.Errorf("control_cancel_request %+v, want one for the hook %s", cancels, hookID)
	}
	if next := result(t, h.RunTurn(ctx, "Go on.")); next.IsError || next.Result != "Next turn." {
		t.Errorf("next turn: is_error %v result %q", next.IsError, next.Result)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "stop-interrupted")
}

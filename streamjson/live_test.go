package streamjson

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/clitest"
)

// liveGuard bounds a live test against a hung CLI. It is a safety net, not an assertion.
const liveGuard = 3 * time.Minute

// liveTurn sends a prompt the way the host does (PromptSent, then the prompt with its uuid) and
// feeds the turn's messages to the adapter.
func liveTurn(ctx context.Context, t *testing.T, h *clitest.Harness, a *Adapter, uuid, text string) *claudecode.ResultMessage {
	t.Helper()
	a.PromptSent(uuid, text)
	msgs := h.Turn(ctx, claudecode.Prompt{Text: text, UUID: uuid})
	for _, m := range msgs {
		a.Handle(m)
	}
	r, ok := msgs[len(msgs)-1].(*claudecode.ResultMessage)
	if !ok {
		t.Fatalf("turn did not end with a result:\n%s", h.Dump())
	}
	return r
}

func turnCost(r *claudecode.ResultMessage) float64 {
	var c float64
	for _, u := range r.ModelUsageSinceLastResult {
		c += u.CostUSD
	}
	return c
}

// TestLiveSessionAndResume runs the pinned CLI offline through a tool call, an API error and a
// resume at the point the adapter reported, and checks the events and the resume point against
// what the CLI does.
func TestLiveSessionAndResume(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), liveGuard)
	defer cancel()
	h := clitest.New(t, clitest.Options{Command: claudecode.Command{
		PermissionMode: "bypassPermissions", IncludePartialMessages: true, ReplayUserMessages: true,
	}})
	rec := &recorder{}
	a, err := New(Config{Sink: rec, PartialMessages: true})
	if err != nil {
		t.Fatal(err)
	}

	// Turn 1: thinking, text and a Bash call, then a final text.
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.Thinking("Let me plan."), offlinemodel.Text("Running it."), offlinemodel.UseBash("echo hi-from-bash")),
		offlinemodel.Reply(offlinemodel.Text("Done.")),
	)
	p1 := "6a0f3c1e-1111-4c6e-9b1a-0c6f1e2d3a41"
	r1 := liveTurn(ctx, t, h, a, p1, "Run the command.")
	if r1.IsError {
		t.Fatalf("turn 1 failed:\n%s", h.Dump())
	}
	var lastAssistant string
	for _, line := range h.Stdout() {
		if m, err := claudecode.Decode(line); err == nil {
			if am, ok := m.(*claudecode.AssistantMessage); ok && am.ParentToolUseID == "" {
				lastAssistant = am.UUID
			}
		}
	}
	text, reasoning := chunks(rec)
	if strings.ReplaceAll(text, "|", "") != "Running it.Done." || strings.ReplaceAll(reasoning, "|", "") != "Let me plan." {
		t.Errorf("text %q reasoning %q", text, reasoning)
	}
	if n := len(rec.ofType(events.TypeUserMessage)); n != 1 {
		t.Errorf("%d user_message events for one prompt (the CLI's echo must not repeat it)", n)
	}
	calls, updates := rec.ofType(events.TypeToolCall), rec.ofType(events.TypeToolUpdate)
	if len(calls) != 1 || len(updates) != 1 || calls[0].ToolTitle != "Run `echo hi-from-bash`" {
		t.Fatalf("tool events %+v / %+v", calls, updates)
	}
	out := updates[0].Normalized.ShellExec.Output
	if updates[0].ToolStatus != events.ToolComplete || out == nil || out.ExitCode == nil || *out.ExitCode != 0 || strings.TrimSpace(out.Stdout) != "hi-from-bash" {
		t.Errorf("tool_update %+v output %+v", updates[0], out)
	}
	c1 := rec.ofType(events.TypeComplete)[0].Data.Completion
	if c1.LastMessageUUID != lastAssistant || c1.CostUSD != turnCost(r1) || c1.CostUSD <= 0 || c1.ResultUUID != r1.UUID {
		t.Errorf("complete %+v; last assistant %s, turn cost %v", c1, lastAssistant, turnCost(r1))
	}
	checkInvariants(t, bytes.Join(h.Stdout(), []byte("\n")), rec.evs, 0)

	// Turn 2: an API error. The resume point falls back to the prompt.
	h.Fake.Enqueue(offlinemodel.Fail(500, "api_error", 0))
	p2 := "6a0f3c1e-2222-4c6e-9b1a-0c6f1e2d3a42"
	r2 := liveTurn(ctx, t, h, a, p2, "Try again.")
	if !r2.IsError {
		t.Fatalf("turn 2 did not fail:\n%s", h.Dump())
	}
	errs := rec.ofType(events.TypeError)
	if len(errs) != 1 || errs[0].Error.Kind != events.ErrorAPI || !strings.HasPrefix(errs[0].Error.Message, "API Error") {
		t.Errorf("error events %+v", errs)
	}
	ts := a.TurnState()
	if ts.LastMessageUUID != p2 {
		t.Errorf("resume point after the API error %q, want the prompt %q", ts.LastMessageUUID, p2)
	}

	// A new process resumes at that point: the CLI accepts it and the costs carry on.
	h.Resume(ctx, ts.SessionID, ts.LastMessageUUID)
	rec2 := &recorder{}
	a2, err := New(Config{Sink: rec2, PartialMessages: true, ResumedSessionID: ts.SessionID, PriorTotalCostUSD: ts.Last.TotalCostUSD})
	if err != nil {
		t.Fatal(err)
	}
	h.Fake.Enqueue(offlinemodel.Reply(offlinemodel.Text("Back.")))
	r3 := liveTurn(ctx, t, h, a2, "6a0f3c1e-3333-4c6e-9b1a-0c6f1e2d3a43", "Carry on.")
	if r3.IsError {
		t.Fatalf("resumed turn failed: %v\n%s", r3.Errors, h.Dump())
	}
	st := rec2.ofType(events.TypeSessionStatus)
	if len(st) != 1 || st[0].Data.SessionStatus != events.SessionResumed || st[0].SessionID != ts.SessionID {
		t.Errorf("session_status after resume %+v", st)
	}
	c3 := rec2.ofType(events.TypeComplete)[0].Data.Completion
	if math.Abs(ts.Last.TotalCostUSD+c3.CostUSD-r3.TotalCostUSD) > 1e-9 {
		t.Errorf("prior %v + turn %v != CLI total %v", ts.Last.TotalCostUSD, c3.CostUSD, r3.TotalCostUSD)
	}
	if got := a2.TurnState().LastMessageUUID; got == "" || got == r3.UUID {
		t.Errorf("resume point after the resumed turn %q", got)
	}
}

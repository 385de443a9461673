package realcli

import (
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/clitest"
)

// historyHas reports whether a request's history holds a message of role whose text contains s.
func historyHas(r offlinemodel.Request, role, s string) bool {
	for _, m := range r.Messages {
		if m.Role == role && strings.Contains(m.Text(), s) {
			return true
		}
	}
	return false
}

// sinceLastCost sums the costUSD of a result's model_usage_since_last_result.
func sinceLastCost(r *claudecode.ResultMessage) float64 {
	var sum float64
	for _, u := range r.ModelUsageSinceLastResult {
		sum += u.CostUSD
	}
	return sum
}

// TestTwoTurns: a second prompt in the same process becomes a second turn with its own
// system/init and result; the fake's second request carries the first exchange; total_cost_usd is
// a running total while model_usage_since_last_result is per turn.
func TestTwoTurns(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{})
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.Text("First answer.")),
		offlinemodel.Reply(offlinemodel.Text("Second answer.")),
	)
	one := h.RunTurn(ctx, "First question, drover-q1.")
	began := time.Now()
	two := h.RunTurn(ctx, "Second question, drover-q2.")
	t.Logf("second turn in the same process (prompt sent to result): %v", time.Since(began))
	r1, r2 := result(t, one), result(t, two)
	if r1.Result != "First answer." || r2.Result != "Second answer." || r1.IsError || r2.IsError {
		t.Fatalf("results %q %q", r1.Result, r2.Result)
	}
	if r1.SessionID != r2.SessionID {
		t.Errorf("session changed between turns: %s, %s", r1.SessionID, r2.SessionID)
	}
	if n := len(ofType[*claudecode.SystemInit](two)); n != 1 {
		t.Errorf("%d system/init in the second turn, want 1 (one per turn)", n)
	}
	main := h.Fake.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests, want 2", len(main))
	}
	if !historyHas(main[1], "user", "drover-q1") || !historyHas(main[1], "assistant", "First answer.") ||
		!strings.Contains(main[1].LastUserText(), "drover-q2") {
		t.Errorf("second request's history: %s", roles(main[1]))
	}
	if historyHas(main[0], "user", "drover-q2") {
		t.Errorf("first request already had the second prompt")
	}
	if d := r2.TotalCostUSD - (r1.TotalCostUSD + sinceLastCost(r2)); math.Abs(d) > 1e-9 || sinceLastCost(r2) <= 0 {
		t.Errorf("total_cost_usd %v after %v with %v since the last result: not a running total", r2.TotalCostUSD, r1.TotalCostUSD, sinceLastCost(r2))
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "two-turns")
}

// TestResume: a new process started with --resume continues the session: same session id, and
// the fake sees the earlier exchange in the history; the earlier messages are not printed again.
func TestResume(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{})
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.Text("Noted: drover-pineapple.")),
		offlinemodel.Reply(offlinemodel.Text("The word was drover-pineapple.")),
	)
	r1 := result(t, h.RunTurn(ctx, "Remember the word drover-pineapple."))
	if r1.IsError {
		t.Fatalf("first turn failed: %q", r1.Result)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit of the first process: %v", err)
	}
	record(t, h, "resume-first")

	h.Resume(ctx, r1.SessionID, "")
	msgs := h.RunTurn(ctx, "Which word did I ask you to remember?")
	r2 := result(t, msgs)
	if r2.IsError || r2.Result != "The word was drover-pineapple." {
		t.Fatalf("resumed turn: is_error %v result %q", r2.IsError, r2.Result)
	}
	if r2.SessionID != r1.SessionID {
		t.Errorf("resumed session id %s, want %s", r2.SessionID, r1.SessionID)
	}
	if inits := ofType[*claudecode.SystemInit](msgs); len(inits) != 1 || inits[0].SessionID != r1.SessionID {
		t.Errorf("system/init of the resumed process: %+v", inits)
	}
	for _, a := range ofType[*claudecode.AssistantMessage](msgs) {
		if strings.Contains(a.Message.Content[0].Text, "Noted") {
			t.Errorf("the resumed process printed the earlier answer again")
		}
	}
	main := h.Fake.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests, want 2", len(main))
	}
	if !historyHas(main[1], "user", "drover-pineapple") || !historyHas(main[1], "assistant", "Noted: drover-pineapple.") {
		t.Errorf("resumed request lacks the earlier exchange: %s", roles(main[1]))
	}
	t.Logf("total_cost_usd: first process %v, resumed %v (since last result %v)", r1.TotalCostUSD, r2.TotalCostUSD, sinceLastCost(r2))
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "resume")
	recordConfig(t, "resume", map[string]any{"resumed_session_id": r1.SessionID, "prior_total_cost_usd": r1.TotalCostUSD})
}

// TestResumeSessionAt: --resume-session-at an assistant uuid of the first turn drops the second
// turn: the fake's next request holds the first exchange and the new prompt, nothing of the second.
func TestResumeSessionAt(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{})
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.Text("Answer A.")),
		offlinemodel.Reply(offlinemodel.Text("Answer B.")),
		offlinemodel.Reply(offlinemodel.Text("Answer C.")),
	)
	one := h.RunTurn(ctx, "Prompt A, drover-keep.")
	r1 := result(t, one)
	r2 := result(t, h.RunTurn(ctx, "Prompt B, drover-drop."))
	if r1.IsError || r2.IsError {
		t.Fatalf("setup turns failed")
	}
	as := ofType[*claudecode.AssistantMessage](one)
	if len(as) != 1 || !claudecode.IsUUID(as[0].UUID) {
		t.Fatalf("first turn's assistant frames: %d", len(as))
	}
	at := as[0].UUID
	if err := finish(t, h); err != nil {
		t.Errorf("exit of the first process: %v", err)
	}

	h.Resume(ctx, r1.SessionID, at)
	msgs := h.RunTurn(ctx, "Prompt C, drover-new.")
	r3 := result(t, msgs)
	if r3.IsError || r3.Result != "Answer C." {
		t.Fatalf("resumed turn: is_error %v result %q\n%s", r3.IsError, r3.Result, h.Dump())
	}
	t.Logf("session ids: before %s, after --resume-session-at %s", r1.SessionID, r3.SessionID)
	if r3.SessionID != r1.SessionID {
		t.Errorf("session id changed: %s, want %s", r3.SessionID, r1.SessionID)
	}
	main := h.Fake.MainRequests()
	if len(main) != 3 {
		t.Fatalf("%d main requests, want 3", len(main))
	}
	hist := main[2]
	if !historyHas(hist, "user", "drover-keep") || !historyHas(hist, "assistant", "Answer A.") || !strings.Contains(hist.LastUserText(), "drover-new") {
		t.Errorf("history lacks the kept exchange or the new prompt: %s", roles(hist))
	}
	if historyHas(hist, "user", "drover-drop") || historyHas(hist, "assistant", "Answer B.") {
		t.Errorf("history still holds the dropped turn: %s", roles(hist))
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "resume-at")
	recordConfig(t, "resume-at", map[string]any{"resumed_session_id": r1.SessionID, "prior_total_cost_usd": r2.TotalCostUSD})
}

// TestResumeSessionAtUnknown: --resume-session-at a uuid that is not in the transcript makes the
// CLI fail at start-up, before reading any prompt: one zeroed error_during_execution result, exit
// 1, and claudecode reports *ResumeRejectedError. The fake is never asked.
//
// No prompt is sent: the CLI may already be gone, and the write would fail with a broken pipe.
func TestResumeSessionAtUnknown(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{})
	h.Fake.Enqueue(offlinemodel.Reply(offlinemodel.Text("Answer A.")))
	r1 := result(t, h.RunTurn(ctx, "Prompt A."))
	if err := finish(t, h); err != nil {
		t.Errorf("exit of the first process: %v", err)
	}

	const unknown = "00000000-0000-4000-8000-000000000042"
	h.Resume(ctx, r1.SessionID, unknown)
	msgs, err := h.ReadUntil(ctx, func(claudecode.Message) bool { return false })
	rejected := checkRejected(t, err, unknown)
	if rejected != nil && !strings.Contains(rejected.Reason, "No message found with message.uuid") {
		t.Errorf("reason %q", rejected.Reason)
	}
	results := ofType[*claudecode.ResultMessage](msgs)
	if len(msgs) != 1 || len(results) != 1 || !results[0].IsError || results[0].Subtype != claudecode.SubtypeErrorDuringExec ||
		results[0].NumTurns != 0 || results[0].SessionID != r1.SessionID || len(results[0].Errors) != 1 {
		t.Errorf("output of the rejected resume: %d messages, results %+v", len(msgs), results)
	}
	if n := len(h.Fake.MainRequests()); n != 1 {
		t.Errorf("%d main requests, want 1 (the rejected process must not call the API)", n)
	}
	record(t, h, "resume-rejected")
	recordConfig(t, "resume-rejected", map[string]any{"resumed_session_id": r1.SessionID, "prior_total_cost_usd": r1.TotalCostUSD})
}

// TestResumeUnknownSession: --resume of a session that does not exist fails the same way.
func TestResumeUnknownSession(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const unknown = "00000000-0000-4000-8000-000000000043"
	h := start(t, clitest.Options{Command: claudecode.Command{Resume: unknown}})
	msgs, err := h.ReadUntil(ctx, func(claudecode.Message) bool { return false })
	if rejected := checkRejected(t, err, unknown); rejected != nil && !strings.Contains(rejected.Reason, "No conversation found") {
		t.Errorf("reason %q", rejected.Reason)
	}
	if results := ofType[*claudecode.ResultMessage](msgs); len(results) != 1 || !results[0].IsError || results[0].SessionID != unknown {
		t.Errorf("results %+v", results)
	}
	if n := len(h.Fake.Requests()); n != 0 {
		t.Errorf("%d API requests", n)
	}
}

// checkRejected asserts that err, the end of a process's output, is a *ResumeRejectedError naming
// id and wrapping an exit with code 1.
func checkRejected(t *testing.T, err error, id string) *claudecode.ResumeRejectedError {
	t.Helper()
	var rejected *claudecode.ResumeRejectedError
	if !errors.As(err, &rejected) {
		t.Errorf("end of output: %v (%T), want *ResumeRejectedError", err, err)
		return nil
	}
	if !strings.Contains(rejected.Reason, id) {
		t.Errorf("reason %q does not name %s", rejected.Reason, id)
	}
	var exit *claudecode.ExitError
	if !errors.As(err, &exit) || exit.Code != 1 {
		t.Errorf("exit error %v, want code 1", exit)
	}
	if errors.Is(err, io.EOF) {
		t.Errorf("a rejected resume must not look like a clean end")
	}
	return rejected
}

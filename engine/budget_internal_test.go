package engine

import (
	"context"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/pricing"
	"github.com/drover-run/drover/task"
)

// testMeter is a meter bounded by b, with what the task spent before, that records the bounds it
// crosses (it writes nothing: no writer runs).
func testMeter(b task.Budget, prior task.Totals) (*budgetMeter, chan task.BudgetBound) {
	crossed := make(chan task.BudgetBound, 4)
	m := &budgetMeter{log: slog.New(slog.DiscardHandler), enforced: true, budget: b, prior: prior,
		answers: map[string]*meteredAnswer{}, seen: map[string]bool{}, seenCond: make(chan struct{}),
		dirty: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	m.onCross = func(bound task.BudgetBound) { crossed <- bound }
	return m, crossed
}

func streamEvent(id, typ string, model string, u claudecode.Usage) *claudecode.StreamEvent {
	ev := claudecode.APIEvent{Type: typ}
	switch typ {
	case "message_start":
		ev.Message = &claudecode.APIMessage{ID: id, Model: model, Usage: u}
	case "message_delta":
		ev.Usage = &u
	}
	return &claudecode.StreamEvent{Event: ev, APIMessageID: id}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

// The answer that crosses the cost bound is cut once it is whole (its message_delta), not while
// it streams; until then the meter prices what the stream said, and a result's own figure
// replaces the priced answers.
func TestMeterCutsOnAWholeAnswer(t *testing.T) {
	const model = "claude-opus-5-5"
	m, crossed := testMeter(task.Budget{MaxCostUSD: 0.1}, task.Totals{CostUSD: 0.02})
	start := claudecode.Usage{InputTokens: 20_000, OutputTokens: 1}
	m.observe(streamEvent("msg_1", "message_start", model, start))
	m.observe(&claudecode.AssistantMessage{Message: claudecode.APIMessage{ID: "msg_1", Model: model, Usage: start}})
	if want := pricing.Cost(model, pricing.Usage{InputTokens: 20_000, OutputTokens: 1}); !near(m.spent(), want) {
		t.Fatalf("spent %v, want %v", m.spent(), want)
	}
	select {
	case b := <-crossed:
		t.Fatalf("cut mid-stream (%s)", b)
	default:
	}
	m.observe(streamEvent("msg_1", "message_delta", "", claudecode.Usage{OutputTokens: 500}))
	want := pricing.Cost(model, pricing.Usage{InputTokens: 20_000, OutputTokens: 500})
	if !near(m.spent(), want) {
		t.Fatalf("spent %v after the answer, want %v", m.spent(), want)
	}
	select {
	case b := <-crossed:
		if b != task.BoundCost || m.crossedBound() != task.BoundCost {
			t.Fatalf("crossed %s", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the whole answer that crossed the bound did not cut the turn")
	}
	m.observe(&claudecode.ResultMessage{ModelUsageSinceLastResult: map[string]claudecode.ModelUsage{model: {CostUSD: 0.5}}})
	if !near(m.spent(), 0.5) {
		t.Fatalf("spent %v after the result, want the result's 0.5", m.spent())
	}
}

// A control request waits until the output before it is metered: a tool asked for after the
// crossing answer is denied even when its request is handled before the loop reaches that answer.
func TestMeterAwaitsTheOutputBeforeARequest(t *testing.T) {
	m, _ := testMeter(task.Budget{MaxCostUSD: 0.01}, task.Totals{})
	done := make(chan struct{})
	go func() {
		m.awaitSeen(context.Background(), "req-1")
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("the request did not wait for the output before it")
	case <-time.After(50 * time.Millisecond):
	}
	m.observe(&claudecode.ControlRequest{RequestID: "req-1"})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the request was not released once the loop reached it")
	}
}

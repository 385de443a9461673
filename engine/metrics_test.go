package engine

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/metrics"
	"github.com/drover-run/drover/pricing"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/streamjson"
	"github.com/drover-run/drover/task"
)

// billedCost sums drover.cost by model.
func billedCost(t *testing.T, r *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[float64]); ok && m.Name == metrics.Cost {
				for _, p := range s.DataPoints {
					model, _ := p.Attributes.Value(metrics.AttrModel)
					out[model.AsString()] += p.Value
				}
			}
		}
	}
	return out
}

func newMeteredEngine(t *testing.T) (*Engine, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	m, err := metrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)))
	if err != nil {
		t.Fatal(err)
	}
	return &Engine{cfg: Config{Metrics: m}}, r
}

func complete(c events.Completion) events.AgentEvent {
	return events.AgentEvent{Type: events.TypeComplete, Data: &events.Data{Completion: &c}}
}

// A committed turn's usage counts by model as its results reported it; results a subagent
// reported inside the turn do not count apart; when the per-model figures do not add up to what
// was committed, the committed totals count under the turn's model.
func TestAttemptMeterCountsWhatWasCommitted(t *testing.T) {
	e, r := newMeteredEngine(t)
	req := Request{TaskID: "t", Turn: 1, Attempt: 1, Profile: task.Profile{Model: "opus"}}
	a := e.meterAttempt(context.Background(), req)
	sink := a.watch(streamjson.SinkFunc(func(events.AgentEvent) {}))
	sink.Emit(complete(events.Completion{CostUSD: 0.3, InputTokens: 10, OutputTokens: 5, Models: map[string]events.ModelUsage{
		"opus": {CostUSD: 0.25, InputTokens: 8, OutputTokens: 4}, "haiku": {CostUSD: 0.05, InputTokens: 2, OutputTokens: 1},
	}}))
	sub := complete(events.Completion{CostUSD: 9})
	sub.ParentToolCallID = "toolu_1"
	sink.Emit(sub)
	a.ended(task.RunTurnResult{Status: task.TurnCompleted, CostUSD: 0.3, InputTokens: 10, OutputTokens: 5}, nil)
	if got := billedCost(t, r); len(got) != 2 || got["opus"] != 0.25 || got["haiku"] != 0.05 {
		t.Errorf("cost by model = %v", got)
	}

	e, r = newMeteredEngine(t)
	a = e.meterAttempt(context.Background(), req)
	a.watch(streamjson.SinkFunc(func(events.AgentEvent) {})).Emit(complete(events.Completion{CostUSD: 0.1, Models: map[string]events.ModelUsage{"haiku": {CostUSD: 0.1}}}))
	a.ended(task.RunTurnResult{Status: task.TurnCompleted, CostUSD: 0.4}, nil)
	if got := billedCost(t, r); len(got) != 1 || got["opus"] != 0.4 {
		t.Errorf("cost by model when the figures disagree = %v, want the committed 0.4 under opus", got)
	}
}

// A failed attempt's billed answers count once: those its results reported and those after its
// last result, priced; nothing before the attempt's end.
func TestAttemptMeterCountsAFailedAttempt(t *testing.T) {
	e, r := newMeteredEngine(t)
	a := e.meterAttempt(context.Background(), Request{TaskID: "t", Turn: 1, Attempt: 1, MaxAttempts: 3})
	a.watch(streamjson.SinkFunc(func(events.AgentEvent) {})).Emit(complete(events.Completion{CostUSD: 0.2, IsError: true}))
	if got := billedCost(t, r); len(got) != 0 {
		t.Errorf("an attempt still running counted %v", got)
	}
	m := &budgetMeter{answers: map[string]*meteredAnswer{
		"msg_1": {model: "claude-sonnet-4-5", usage: pricing.Usage{InputTokens: 1000, OutputTokens: 100}},
	}}
	unresulted := m.unresulted()
	want := pricing.Cost("claude-sonnet-4-5", pricing.Usage{InputTokens: 1000, OutputTokens: 100})
	if len(unresulted) != 1 || unresulted[0].Model != "claude-sonnet-4-5" || unresulted[0].CostUSD != want || want == 0 {
		t.Fatalf("unresulted = %+v, want one answer of claude-sonnet-4-5 costing %v", unresulted, want)
	}
	a.failed(unresulted)
	a.failed(unresulted)
	a.ended(task.RunTurnResult{}, &Error{Type: task.ErrTypeModelAPI})
	if got := billedCost(t, r); len(got) != 2 || got[defaultModel] != 0.2 || got["claude-sonnet-4-5"] != want {
		t.Errorf("cost of the failed attempt = %v, want 0.2 under %s and %v under claude-sonnet-4-5, once", got, defaultModel, want)
	}
	if (*budgetMeter)(nil).unresulted() != nil {
		t.Error("an attempt refused before its meter started has unresulted answers")
	}
}

// drover.tasks.waiting counts the tasks waiting for their account, by reason, as Postgres
// records them.
func TestTasksWaitingFromPostgres(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewPool(t)
	e, r := newMeteredEngine(t)
	e.cfg.DB, e.cfg.Logger = db, slog.New(slog.DiscardHandler)
	e.meterWaiting()
	for i, reason := range []task.WaitReason{task.WaitUsageLimit, task.WaitUsageLimit, task.WaitConcurrency} {
		if _, _, _, err := store.RecordWait(ctx, db, store.AccountWait{TaskID: fmt.Sprint("t", i), Account: "acct-x", Turn: 1, Reason: reason}); err != nil {
			t.Fatal(err)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := r.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == metrics.TasksWaiting {
				for _, p := range g.DataPoints {
					reason, _ := p.Attributes.Value(metrics.AttrReason)
					got[reason.AsString()] = p.Value
				}
			}
		}
	}
	want := map[string]int64{string(task.WaitUsageLimit): 2, string(task.WaitConcurrency): 1, string(task.WaitRateLimit): 0, string(task.WaitSpendCap): 0}
	if !maps.Equal(got, want) {
		t.Errorf("tasks waiting = %v, want %v (every reason, 0 where nothing waits)", got, want)
	}
}

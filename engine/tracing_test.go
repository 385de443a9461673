package engine

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/streamjson"
)

func TestTracingSinkNestsToolSpansUnderTheTurn(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tracer := tp.Tracer("test")

	ctx, turn := tracer.Start(context.Background(), "drover.turn")
	var got []events.AgentEvent
	sink := newTracingSink(ctx, tracer, streamjson.SinkFunc(func(ev events.AgentEvent) { got = append(got, ev) }))
	secret := "sk-ant-very-secret"
	for _, ev := range []events.AgentEvent{
		{Type: events.TypeMessageChunk, Text: "running " + secret},
		{Type: events.TypeToolCall, ToolCallID: "t1", ToolName: "Bash", ToolStatus: events.ToolRunning, ToolTitle: "Run `echo " + secret + "`"},
		{Type: events.TypeToolCall, ToolCallID: "t2", ToolName: "Read", ToolStatus: events.ToolRunning},
		{Type: events.TypeToolUpdate, ToolCallID: "t1", ToolName: "Bash", ToolStatus: events.ToolError},
		{Type: events.TypeComplete, Data: &events.Data{Completion: &events.Completion{CostUSD: 0.5, SessionID: "s"}}},
	} {
		sink.Emit(ev)
	}
	sink.close() // t2 never finished
	turn.End()

	if len(got) != 5 {
		t.Fatalf("the sink passed on %d events, want 5", len(got))
	}
	spans := exp.GetSpans()
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	root, ok := byName["drover.turn"]
	if !ok {
		t.Fatalf("no turn span among %d", len(spans))
	}
	for _, name := range []string{"drover.tool Bash", "drover.tool Read"} {
		s, ok := byName[name]
		if !ok {
			t.Fatalf("no span %q", name)
		}
		if s.Parent.SpanID() != root.SpanContext.SpanID() {
			t.Errorf("%s is not a child of the turn span", name)
		}
		if s.Status.Code.String() != "Error" {
			t.Errorf("%s status %v, want Error (failed tool / never finished)", name, s.Status.Code)
		}
	}
	var cost bool
	for _, kv := range root.Attributes {
		if kv.Key == "drover.cost_usd" && kv.Value.AsFloat64() == 0.5 {
			cost = true
		}
	}
	if !cost {
		t.Errorf("turn span lacks the turn's cost: %v", root.Attributes)
	}
	for _, s := range spans {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), secret) {
				t.Errorf("span %s carries message or tool text: %s=%s", s.Name, kv.Key, kv.Value.String())
			}
		}
	}
}

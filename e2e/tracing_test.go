package e2e

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/drover-run/drover/engine"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/worker"
)

// A worker traces each turn under Temporal's activity span, and each tool call
// under the turn, without message or tool text.
func TestTurnIsTraced(t *testing.T) {
	e := newEnv(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})

	w, err := worker.Start(e.ctx, worker.Config{
		TemporalAddress: e.temporal, Namespace: suite.temporal.Namespace(), TaskQueue: e.queue,
		DatabaseURL: e.dsn,
		Config: engine.Config{
			HostID: "traced-" + e.queue,
			Claude: engine.Claude{
				Bin: suite.claudeBin, ConfigDir: e.configDir, Home: e.home,
				BaseURL: e.fake.URL(), APIKey: testAPIKey,
				Env: []string{"PATH=" + os.Getenv("PATH"), "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"},
			},
			Logger: slog.New(slog.DiscardHandler),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })

	const secret = "TOP-SECRET-PROMPT-TEXT"
	e.fake.Enqueue(fa.Reply(fa.UseBash("echo "+secret)), fa.Reply(fa.Text("done")))
	id := e.taskID("traced")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "run " + secret}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(id, 1)
	w.Stop(context.Background())

	spans := exp.GetSpans()
	byID := map[string]tracetest.SpanStub{}
	var turn, tool *tracetest.SpanStub
	for i := range spans {
		s := spans[i]
		byID[s.SpanContext.SpanID().String()] = s
		switch {
		case s.Name == "drover.turn" && hasAttr(s, "drover.task_id", id):
			turn = &spans[i]
		case s.Name == "drover.tool Bash":
			tool = &spans[i]
		}
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), secret) || strings.Contains(kv.Value.String(), testAPIKey) {
				t.Errorf("span %s carries text it must not: %s", s.Name, kv.Key)
			}
		}
	}
	if turn == nil || tool == nil {
		t.Fatalf("missing spans (turn %v, tool %v) among %d", turn != nil, tool != nil, len(spans))
	}
	if tool.Parent.SpanID() != turn.SpanContext.SpanID() {
		t.Error("the tool span is not a child of the turn span")
	}
	parent, ok := byID[turn.Parent.SpanID().String()]
	if !ok || !strings.Contains(parent.Name, "RunActivity") || !strings.Contains(parent.Name, task.ActivityRunTurn) {
		t.Errorf("the turn span's parent is %q, want Temporal's RunActivity span", parent.Name)
	}
	if !hasAttrKey(*turn, "drover.cost_usd") {
		t.Error("the turn span lacks the turn's cost")
	}
}

func hasAttr(s tracetest.SpanStub, key, value string) bool {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key && kv.Value.String() == value {
			return true
		}
	}
	return false
}

func hasAttrKey(s tracetest.SpanStub, key string) bool {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return true
		}
	}
	return false
}

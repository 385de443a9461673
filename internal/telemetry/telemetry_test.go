package telemetry

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/drover-run/drover/metrics"
)

// With Prometheus on, the handler serves drover's instruments under their Prometheus names,
// beside the process's own figures.
func TestPrometheusServesInstruments(t *testing.T) {
	tel, err := Setup(context.Background(), Config{Service: "drover-test", Version: "test", Prometheus: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	m, err := metrics.New(otel.GetMeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m.TurnStarted(ctx, "claude-test")
	m.TurnFinished(ctx, "claude-test", metrics.OutcomeCompleted, 2*time.Second)
	m.Billed(ctx, metrics.Usage{Model: "claude-test", InputTokens: 12, OutputTokens: 5, CostUSD: 0.25})

	rec := httptest.NewRecorder()
	tel.MetricsHandler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`drover_turns_started_total{model="claude-test"`,
		`drover_turn_duration_seconds_bucket{model="claude-test"`,
		`drover_tokens_total{kind="input",model="claude-test"`,
		`drover_cost_total{model="claude-test"`,
		`target_info{service_name="drover-test"`,
		"process_resident_memory_bytes",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
}

package metrics_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/drover-run/drover/metrics"
)

func newMetrics(t *testing.T) (*metrics.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	m, err := metrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)))
	if err != nil {
		t.Fatal(err)
	}
	return m, r
}

// collect returns each data point's value by instrument name and attribute set
// ("k=v,k=v", sorted); a histogram's value is its count.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	key := func(s attribute.Set) string {
		var parts []string
		for _, kv := range s.ToSlice() {
			parts = append(parts, string(kv.Key)+"="+kv.Value.String())
		}
		return strings.Join(parts, ",")
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			pts := map[string]float64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					pts[key(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					pts[key(p.Attributes)] = p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					pts[key(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					pts[key(p.Attributes)] = float64(p.Count)
				}
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
			out[m.Name] = pts
		}
	}
	return out
}

func TestInstrumentsRecord(t *testing.T) {
	m, r := newMetrics(t)
	ctx := context.Background()
	m.TurnStarted(ctx, "opus")
	m.TurnRetried(ctx, "opus")
	m.AttemptFailed(ctx, "opus", "ModelAPI")
	m.TurnFinished(ctx, "opus", metrics.OutcomeCompleted, time.Second)
	m.FirstToken(ctx, "opus", 300*time.Millisecond)
	m.Billed(ctx, metrics.Usage{Model: "opus", InputTokens: 10, OutputTokens: 4, CacheReadInputTokens: 7, CostUSD: 0.5})
	m.Billed(ctx, metrics.Usage{Model: "haiku", OutputTokens: 2, CostUSD: 0.01})
	done := m.ApprovalWaiting(ctx, "tool")
	m.ApprovalWaiting(ctx, "plan")
	done()
	done() // once only
	m.ApprovalDecided(ctx, "tool", "allowed", time.Minute)
	stop, err := m.ObserveProcesses("h1", func() map[string]int64 { return map[string]int64{metrics.ProcessIdle: 2, metrics.ProcessActive: 1} })
	if err != nil {
		t.Fatal(err)
	}
	m.SetWaitingSource(func() map[string]int64 { return map[string]int64{"usage_limit": 3} })

	got := collect(t, r)
	want := map[string]map[string]float64{
		metrics.TurnsStarted:           {"model=opus": 1},
		metrics.TurnsRetried:           {"model=opus": 1},
		metrics.AttemptsFailed:         {"error_type=ModelAPI,model=opus": 1},
		metrics.TurnsFinished:          {"model=opus,outcome=completed": 1},
		metrics.TurnDuration:           {"model=opus,outcome=completed": 1},
		metrics.TimeToFirstToken:       {"model=opus": 1},
		metrics.Tokens:                 {"kind=input,model=opus": 10, "kind=output,model=opus": 4, "kind=cache_read,model=opus": 7, "kind=output,model=haiku": 2},
		metrics.Cost:                   {"model=opus": 0.5, "model=haiku": 0.01},
		metrics.ApprovalsWaiting:       {"kind=tool": 0, "kind=plan": 1},
		metrics.ApprovalTimeToDecision: {"decision=allowed,kind=tool": 1},
		metrics.CLIProcesses:           {"host=h1,state=idle": 2, "host=h1,state=active": 1},
		metrics.TasksWaiting:           {"reason=usage_limit": 3},
	}
	for name, pts := range want {
		for attrs, v := range pts {
			if got[name][attrs] != v {
				t.Errorf("%s{%s} = %v, want %v (all: %v)", name, attrs, got[name][attrs], v, got[name])
			}
		}
		if len(got[name]) != len(pts) {
			t.Errorf("%s has points %v, want %v", name, got[name], pts)
		}
	}

	// Sources go away.
	stop()
	m.SetWaitingSource(nil)
	got = collect(t, r)
	if len(got[metrics.CLIProcesses]) != 0 || len(got[metrics.TasksWaiting]) != 0 {
		t.Errorf("after the sources left: processes %v, waiting %v", got[metrics.CLIProcesses], got[metrics.TasksWaiting])
	}
}

// A nil *Metrics records nothing and does not fail.
func TestNilRecordsNothing(t *testing.T) {
	var m *metrics.Metrics
	ctx := context.Background()
	m.TurnStarted(ctx, "x")
	m.Billed(ctx, metrics.Usage{CostUSD: 1})
	m.ApprovalWaiting(ctx, "tool")()
	m.SetWaitingSource(func() map[string]int64 { return nil })
	stop, err := m.ObserveProcesses("h", nil)
	if err != nil {
		t.Fatal(err)
	}
	stop()
}

// docs/observability.md lists every instrument New registers, with its unit, and no other.
func TestDocListsEveryInstrument(t *testing.T) {
	raw, err := os.ReadFile("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if m := regexp.MustCompile("^\\| `(drover\\.[a-z_.]+)` \\|").FindStringSubmatch(line); m != nil {
			rows[m[1]] = line
		}
	}
	m, _ := newMetrics(t)
	registered := map[string]bool{}
	for _, in := range m.Instruments() {
		registered[in.Name] = true
		row, ok := rows[in.Name]
		if !ok {
			t.Errorf("docs/observability.md does not list %s", in.Name)
			continue
		}
		if !strings.Contains(row, "| `"+in.Unit+"` |") {
			t.Errorf("docs/observability.md gives %s another unit than %s: %s", in.Name, in.Unit, row)
		}
	}
	if len(registered) == 0 {
		t.Error("no instrument registered")
	}
	for name := range rows {
		if !registered[name] {
			t.Errorf("docs/observability.md lists %s, which package metrics does not register", name)
		}
	}
}

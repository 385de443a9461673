package e2e

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/drover-run/drover/engine"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/metrics"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/worker"
)

// points are a collection's data points: instrument name → "k=v,k=v" (sorted attributes) →
// value; a histogram's value is its count.
type points map[string]map[string]float64

func collectPoints(t *testing.T, r *sdkmetric.ManualReader) points {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	key := func(s attribute.Set) string {
		var parts []string
		for _, kv := range s.ToSlice() {
			parts = append(parts, string(kv.Key)+"="+kv.Value.String())
		}
		return strings.Join(parts, ",")
	}
	out := points{}
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
			}
			out[m.Name] = pts
		}
	}
	return out
}

// sum adds the points of name whose attributes hold every one of attrs.
func (p points) sum(name string, attrs ...string) float64 {
	var n float64
	for k, v := range p[name] {
		have := "," + k + ","
		ok := true
		for _, a := range attrs {
			ok = ok && strings.Contains(have, ","+a+",")
		}
		if ok {
			n += v
		}
	}
	return n
}

// Real turns move the counters: turns started and finished, a failed attempt and its retry, the
// time to the first token, the waiting approval and its decision, the host's CLI processes; the
// tokens and cost by model equal what the fake API billed, as its own ledger says, the failed
// attempt's billed answer included.
func TestTurnsAreMeasured(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := metrics.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	host := "measured-" + e.queue
	w, err := worker.Start(e.ctx, worker.Config{
		TemporalAddress: e.temporal, Namespace: suite.temporal.Namespace(), TaskQueue: e.queue,
		DatabaseURL: e.dsn,
		Config: engine.Config{
			HostID: host, Metrics: m,
			Claude: engine.Claude{
				Bin: suite.claudeBin, ConfigDir: e.configDir, Home: e.home,
				BaseURL: e.fake.URL(), APIKey: testAPIKey,
				Env: []string{"PATH=" + os.Getenv("PATH"), "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "DISABLE_AUTOUPDATER=1",
					"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=0"},
			},
			Logger: slog.New(slog.DiscardHandler),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })

	marker := filepath.Join(e.workspace, "approved.txt")
	e.script(
		say(fa.UseBash("echo one")), say(fa.Text("turn one done")),
		// Turn two's first attempt is billed an answer, whose tool runs, then meets an overloaded
		// API; its retry is answered. The failed attempt's answer is real spend: counted.
		say(fa.UseBash("echo two")),
		func(*fa.Request) fa.Response { return fa.Fail(529, "overloaded_error", 0) },
		say(fa.Text("turn two done")),
		// The supervised task's tool waits for a person.
		say(fa.UseBash("echo approved > "+marker)), say(fa.Text("marker written")),
	)

	id := e.taskID("measured")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "turn one"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(id, 1)
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "turn two"}, ""); err != nil {
		t.Fatal(err)
	}
	st := e.waitTurns(id, 2)
	if st.Totals.FailedTurns != 0 {
		t.Fatalf("state after two turns: %+v", st.Totals)
	}
	rec, err := store.GetTurn(e.ctx, e.db(), id, 2)
	if err != nil || rec.Attempts != 2 {
		t.Fatalf("turn two's record: %+v, %v; want two attempts", rec, err)
	}

	sup := e.taskID("measured-approval")
	if _, err := e.tc.Start(e.ctx, sup, e.supervisedParams(), task.Prompt{Text: "write the marker"}, ""); err != nil {
		t.Fatal(err)
	}
	r := e.waitAwaiting(sup, 1)[0]
	if got := collectPoints(t, reader).sum(metrics.ApprovalsWaiting, "kind=tool"); got != 1 {
		t.Errorf("approvals waiting while the request waits = %v, want 1", got)
	}
	time.Sleep(200 * time.Millisecond) // a time to decision above nothing
	if _, _, err := e.decider().Decide(e.ctx, sup, task.Decision{RequestID: r.RequestID, Allow: true, By: "alice"}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(sup, 1)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the approved tool did not run: %v", err)
	}

	p := collectPoints(t, reader)
	for _, c := range []struct {
		name  string
		attrs []string
		want  float64
	}{
		{metrics.TurnsStarted, nil, 3},
		{metrics.TurnsRetried, nil, 1},
		{metrics.AttemptsFailed, []string{"error_type=" + task.ErrTypeModelAPI}, 1},
		{metrics.AttemptsFailed, nil, 1},
		{metrics.TurnsFinished, []string{"outcome=completed"}, 3},
		{metrics.TurnsFinished, nil, 3},
		{metrics.TurnDuration, []string{"outcome=completed"}, 3},
		{metrics.ApprovalsWaiting, []string{"kind=tool"}, 0},
		{metrics.ApprovalTimeToDecision, []string{"kind=tool", "decision=allowed"}, 1},
		// Both tasks' processes wait, idle, for their next turn.
		{metrics.CLIProcesses, []string{"host=" + host, "state=idle"}, 2},
		{metrics.CLIProcesses, []string{"host=" + host, "state=active"}, 0},
	} {
		if got := p.sum(c.name, c.attrs...); got != c.want {
			t.Errorf("%s%v = %v, want %v (points %v)", c.name, c.attrs, got, c.want, p[c.name])
		}
	}
	if got := p.sum(metrics.TimeToFirstToken); got < 3 {
		t.Errorf("time to first token recorded %v times, want one per answered attempt (3)", got)
	}
	for _, pid := range []int{e.executorPID(id), e.executorPID(sup)} {
		if pid == 0 || !alive(pid) {
			t.Errorf("the process gauge counts a CLI process that is not alive (pid %d)", pid)
		}
	}

	// What was billed, by the fake's ledger: every model's tokens of each kind and its cost.
	led := fa.SumLedger(e.fake.Ledger())
	if led.Responses == 0 || led.Incomplete != 0 {
		t.Fatalf("ledger: %+v", led)
	}
	for model, mt := range led.ByModel {
		for kind, n := range map[string]int{
			metrics.TokensInput: mt.Usage.InputTokens, metrics.TokensOutput: mt.Usage.OutputTokens,
			metrics.TokensCacheRead: mt.Usage.CacheReadInputTokens, metrics.TokensCacheCreation: mt.Usage.CacheCreationInputTokens,
		} {
			if got := p.sum(metrics.Tokens, "model="+model, "kind="+kind); got != float64(n) {
				t.Errorf("%s tokens of %s = %v, the ledger billed %d", kind, model, got, n)
			}
		}
		if got := p.sum(metrics.Cost, "model="+model); !nearCost(got, mt.CostUSD) {
			t.Errorf("cost of %s = %.9f, the ledger billed %.9f", model, got, mt.CostUSD)
		}
	}
	if got := p.sum(metrics.Cost); !nearCost(got, led.CostUSD) || len(p[metrics.Cost]) != len(led.ByModel) {
		t.Errorf("cost %.9f over %d models, the ledger billed %.9f over %d", got, len(p[metrics.Cost]), led.CostUSD, len(led.ByModel))
	}
}

// freePort returns a loopback address no one listens on, for a worker's metrics endpoint.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// `drover worker --metrics-listen` serves the metrics to a scraper that presents the token,
// and to nobody else.
func TestWorkerServesMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addr := freePort(t)
	const token = "metrics-e2e-token-value"
	cmd := exec.Command(suite.drover, "worker", "--keep-alive", "2m", "--metrics-listen", addr)
	cmd.Env = setEnv(e.workerEnv("scraped-"+e.queue, "debug"), "DROVER_METRICS_TOKEN="+token)
	wp := launchWorker(t, t, "scraped", cmd)
	t.Cleanup(func() {
		if strings.Contains(wp.log.String(), token) {
			t.Error("the worker logged the metrics token")
		}
	})

	e.fake.Enqueue(fa.Reply(fa.Text("measured")))
	id := e.taskID("scraped")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "say something"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(id, 1)

	scrape := func(auth string) (int, string) {
		req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, "http://"+addr+worker.MetricsPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, auth := range []string{"", "Bearer wrong-token", token} {
		if code, body := scrape(auth); code != http.StatusUnauthorized || strings.Contains(body, "drover_") {
			t.Errorf("scraping with %q: status %d, want 401 and no metrics", auth, code)
		}
	}
	code, body := scrape("Bearer " + token)
	if code != http.StatusOK {
		t.Fatalf("scraping with the token: status %d\n%s", code, body)
	}
	for _, name := range []string{"drover_turns_started_total", "drover_turns_finished_total", "drover_turn_duration_seconds_bucket",
		"drover_turn_time_to_first_token_seconds_bucket", "drover_tokens_total", "drover_cost_total", "drover_cli_processes",
		"process_resident_memory_bytes"} {
		if !strings.Contains(body, "\n"+name) {
			t.Errorf("the scrape lacks %s", name)
		}
	}
	if got := sampleSum(body, "drover_turns_finished_total", `outcome="completed"`); got != 1 {
		t.Errorf("drover_turns_finished_total{outcome=completed} = %v, want 1", got)
	}
	if got, want := sampleSum(body, "drover_cost_total", ""), fa.SumLedger(e.fake.Ledger()).CostUSD; !nearCost(got, want) {
		t.Errorf("drover_cost_total = %.9f, the ledger billed %.9f", got, want)
	}
}

// sampleSum adds the values of the samples of name in a Prometheus text body whose labels hold
// label.
func sampleSum(body, name, label string) float64 {
	var n float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, label) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err == nil {
			n += v
		}
	}
	return n
}

// A worker asked to serve its metrics beyond loopback without a token refuses to start.
func TestWorkerMetricsBeyondLoopbackNeedToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite.drover, "worker", "--metrics-listen", "0.0.0.0:0")
	cmd.Env = e.workerEnv("exposed-"+e.queue, "info")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "DROVER_METRICS_TOKEN") {
		t.Fatalf("the worker ran (%v) or did not say why not:\n%s", err, out)
	}
	if strings.Contains(string(out), "drover worker started") {
		t.Errorf("the worker started before refusing:\n%s", out)
	}
}

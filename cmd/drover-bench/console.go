package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/drover-run/drover/console"
	"github.com/drover-run/drover/internal/bench"
	"github.com/drover-run/drover/internal/browser"
	"github.com/drover-run/drover/internal/fakeapi"
	"github.com/drover-run/drover/internal/tools"
)

// C1's task sizes and goals.
const (
	c1Events         = 5000
	c1QuickEvents    = 1000
	c1BaselineEvents = 50
	// c1RenderGoalRatio bounds the time to the first render of a 5,000-event task, as a multiple of
	// a 50-event task's: the page reads only the log's last 500 events and lays out their last turn at
	// first, so a hundred times the events must not cost a hundred times the wait.
	c1RenderGoalRatio = 8
	// c1HeapGoalMiB bounds the page's JavaScript heap with 5,000 events shown.
	c1HeapGoalMiB = 64
)

// c1 is figure C1, the web console with a long task: in headless Chromium, the time from
// navigation to the first painted frame once the page holds the task's stored events, and the
// page's JavaScript heap, for a task of 5,000 events against the same task cut to 50 events, both
// served by the fake API on loopback from the recorded timeline repeated.
func c1() bench.Figure {
	return bench.Figure{
		ID:      "C1",
		What:    "console: first render of a 5,000-event task vs 50 events",
		Goal:    bench.RatioAtMost(c1RenderGoalRatio),
		Measure: measureC1,
	}
}

type c1Sample struct {
	renderMS float64
	heapMiB  float64
}

func measureC1(ctx context.Context, env *bench.Env) ([]bench.Row, error) {
	bin, err := c1Chromium(env)
	if err != nil {
		return nil, err
	}
	n := c1Events
	if env.Quick {
		n = c1QuickEvents
	}
	base, stop, err := c1Serve(n)
	if err != nil {
		return nil, err
	}
	defer stop()
	b, err := browser.Start(ctx, browser.Config{Bin: bin})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	want := map[string]int{"small": c1BaselineEvents, "big": n}
	// One of each first, so that the browser's caches are warm on both sides.
	for _, id := range []string{"small", "big"} {
		if _, err := c1Measure(ctx, b, base, id, want[id]); err != nil {
			return nil, err
		}
	}
	samples := map[string][]c1Sample{}
	for i := range env.Runs {
		order := []string{"small", "big"}
		if i%2 == 1 {
			order = []string{"big", "small"}
		}
		for _, id := range order {
			s, err := c1Measure(ctx, b, base, id, want[id])
			if err != nil {
				return nil, err
			}
			samples[id] = append(samples[id], s)
		}
	}
	return c1Rows(n, env.Runs, samples["small"], samples["big"]), nil
}

// c1Chromium finds the Chromium to measure with, from the environment the benchmark was given.
func c1Chromium(env *bench.Env) (string, error) {
	lookup := map[string]string{}
	for _, kv := range env.GoEnv {
		if k, v, ok := strings.Cut(kv, "="); ok {
			lookup[k] = v
		}
	}
	return tools.Env(func(k string) string { return lookup[k] }).ChromiumBin()
}

// c1Serve serves the console and the fake API on loopback with two tasks: "small", of the
// baseline's events, and "big", of n. It returns the base URL and how to stop serving.
func c1Serve(n int) (string, func(), error) {
	evs, err := fakeapi.Repeat(n)
	if err != nil {
		return "", nil, err
	}
	api := fakeapi.New(fakeapi.Config{Console: console.Handler()})
	now := time.Now().UTC()
	for id, count := range map[string]int{"small": c1BaselineEvents, "big": n} {
		api.PutTask(fakeapi.Task{ID: id, Status: "idle", Mode: "supervised", CreatedAt: now, UpdatedAt: now})
		if _, err := api.Append(id, 1, 1, evs[:count]...); err != nil {
			return "", nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listening: %w", err)
	}
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// c1Measure opens task id's page in a new tab, waits until it shows its want events, and reads
// the render time and the JavaScript heap.
func c1Measure(ctx context.Context, b *browser.Browser, base, id string, want int) (c1Sample, error) {
	p, err := b.NewPage(ctx)
	if err != nil {
		return c1Sample{}, err
	}
	defer p.Close()
	if err := p.Do(chromedp.Navigate(base + "/#/tasks/" + id)); err != nil {
		return c1Sample{}, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	shown := fmt.Sprintf(`document.body.dataset.lastSeq == "%d"`, want)
	if _, err := c1Poll[bool](p, shown, deadline, func(ok bool) bool { return ok }); err != nil {
		return c1Sample{}, fmt.Errorf("C1: the page showing task %s's %d events: %w", id, want, err)
	}
	// The render time is from navigation to the first frame painted once the page held every
	// stored event (a mark the page sets).
	painted := `(performance.getEntriesByName("drover-timeline-painted")[0] || {startTime: -1}).startTime`
	ms, err := c1Poll[float64](p, painted, deadline, func(ms float64) bool { return ms >= 0 })
	if err != nil {
		return c1Sample{}, fmt.Errorf("C1: the page's drover-timeline-painted mark: %w", err)
	}
	heap, err := p.HeapUsed()
	if err != nil {
		return c1Sample{}, err
	}
	return c1Sample{renderMS: ms, heapMiB: heap / (1 << 20)}, nil
}

// c1Poll evaluates expr on the page until done holds for its value, or until the deadline.
func c1Poll[T any](p *browser.Page, expr string, deadline time.Time, done func(T) bool) (T, error) {
	for {
		v, err := browser.Eval[T](p, expr)
		if err != nil {
			return v, err
		}
		if done(v) {
			return v, nil
		}
		if time.Now().After(deadline) {
			return v, errors.New("not by the deadline")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// c1Rows makes C1's two rows, render time and heap, from the paired samples of each run.
func c1Rows(n, runs int, small, big []c1Sample) []bench.Row {
	var rs, rb, rr, hs, hb, hr []float64
	for i := range small {
		rs, rb, rr = append(rs, small[i].renderMS), append(rb, big[i].renderMS), append(rr, big[i].renderMS/small[i].renderMS)
		hs, hb, hr = append(hs, small[i].heapMiB), append(hb, big[i].heapMiB), append(hr, big[i].heapMiB/small[i].heapMiB)
	}
	note := fmt.Sprintf("%d events vs %d, headless Chromium, fake API on loopback", n, c1BaselineEvents)
	return []bench.Row{
		{
			Figure: "C1", What: "console: time to first render, 5,000-event task (baseline: 50 events)", Unit: "ms",
			Baseline: bench.Median(rs), Drover: bench.Median(rb), Ratio: bench.Median(rr), Runs: runs,
			Goal: bench.RatioAtMost(c1RenderGoalRatio), Note: note,
		},
		{
			Figure: "C1 heap", What: "console: JS heap with a 5,000-event task shown (baseline: 50 events)", Unit: "MiB",
			Baseline: bench.Median(hs), Drover: bench.Median(hb), Ratio: bench.Median(hr), Runs: runs,
			Goal: bench.DroverAtMost(c1HeapGoalMiB, "MiB"), Note: note,
		},
	}
}

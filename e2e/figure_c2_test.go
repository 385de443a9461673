package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/drover-run/drover/internal/bench"
	"github.com/drover-run/drover/internal/browser"
	"github.com/drover-run/drover/internal/fakeapi"
	"github.com/drover-run/drover/internal/testkit/testtools"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// Figure C2 of `make bench`: the web console on a huge task. A task of 50,000 stored events
// (the recorded timeline's events, repeated, 100 to a turn, written straight into Postgres as the
// event log holds them) is opened in headless Chromium from a real `drover serve`; the figure is
// the time from navigation to the first frame painted once the page holds what it reads at first
// (its drover-first-screen mark), and the page's JavaScript heap then, against a task of 50
// events. The page reads only the log's last page, so the goals are absolute: at most 1 s and
// 100 MiB.
const (
	c2Events         = 50000
	c2QuickEvents    = 5000
	c2BaselineEvents = 50
	c2EventsPerTurn  = 100
	c2RenderGoalMS   = 1000
	c2HeapGoalMiB    = 100
)

// BenchmarkFigureC2 reports C2's rows: render time and heap, huge task vs small.
func BenchmarkFigureC2(b *testing.B) {
	runs := figureRuns(b)
	n := c2Events
	if *benchQuick {
		n = c2QuickEvents
	}
	e := newBenchEnv(b)
	for id, count := range map[string]int{"c2-small": c2BaselineEvents, "c2-big": n} {
		if err := seedHugeTask(e.ctx, e, id, count); err != nil {
			b.Fatal(err)
		}
	}
	s := e.startServe()
	bin, err := testtools.ChromiumBin()
	if err != nil {
		b.Fatalf("chromium: %v", err)
	}
	br, err := browser.Start(e.ctx, browser.Config{Bin: bin, Width: 1280, Height: 900})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	want := map[string]int{"c2-small": c2BaselineEvents, "c2-big": n}
	// One of each first, so that the browser's and the server's caches are warm on both sides.
	for _, id := range []string{"c2-small", "c2-big"} {
		if _, _, err := openHugeTask(e.ctx, br, s.url, id, want[id]); err != nil {
			b.Fatal(err)
		}
	}
	var rs, rb, hs, hb []float64
	b.ResetTimer()
	for i := range runs {
		order := []string{"c2-small", "c2-big"}
		if i%2 == 1 {
			order = []string{"c2-big", "c2-small"}
		}
		for _, id := range order {
			ms, heap, err := openHugeTask(e.ctx, br, s.url, id, want[id])
			if err != nil {
				b.Fatal(err)
			}
			if id == "c2-big" {
				rb, hb = append(rb, ms), append(hb, heap)
			} else {
				rs, hs = append(rs, ms), append(hs, heap)
			}
		}
	}
	b.StopTimer()
	note := fmt.Sprintf("%d events vs %d, headless Chromium, drover serve and Postgres on loopback", n, c2BaselineEvents)
	render := ratioRow("C2", fmt.Sprintf("console: time to first render, %d-event task (baseline: %d events)", n, c2BaselineEvents),
		rs, rb, "ms", bench.DroverAtMost(c2RenderGoalMS, "ms"))
	heap := ratioRow("C2 heap", fmt.Sprintf("console: JS heap with a %d-event task open (baseline: %d events)", n, c2BaselineEvents),
		hs, hb, "MiB", bench.DroverAtMost(c2HeapGoalMiB, "MiB"))
	render.Note, heap.Note = note, note
	reportRows(b, render, heap)
}

// seedHugeTask writes a task of n events into the benchmark's database as the event log and the
// read side hold them: the recorded timeline's events, repeated, c2EventsPerTurn to a turn, and the
// task's recorded state (idle, its turns done).
func seedHugeTask(ctx context.Context, e *benchEnv, id string, n int) error {
	evs, err := fakeapi.Repeat(n)
	if err != nil {
		return err
	}
	at := time.Now().Add(-time.Hour).UTC()
	rows := make([][]any, 0, n)
	for i, raw := range evs {
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return fmt.Errorf("seeding %s: %w", id, err)
		}
		rows = append(rows, []any{id, int64(i + 1), i/c2EventsPerTurn + 1, 1, head.Type, raw, at.Add(time.Duration(i) * time.Millisecond)})
	}
	if _, err := e.pool.CopyFrom(ctx, pgx.Identifier{"task_events"},
		[]string{"task_id", "seq", "turn", "attempt", "type", "payload", "created_at"}, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("seeding %s's events: %w", id, err)
	}
	turns := (n + c2EventsPerTurn - 1) / c2EventsPerTurn
	st, err := json.Marshal(task.State{Status: task.StatusIdle, Title: "A huge task", Workspace: e.workspace, Turn: turns,
		PermissionMode: task.Supervised, Totals: task.Totals{Turns: turns}})
	if err != nil {
		return err
	}
	return store.RecordTaskState(ctx, e.pool, id, task.StatusIdle, st, at, 1)
}

// openHugeTask opens task id's page in a new tab, waits until it holds the log's last event
// (seq want), and returns the time from navigation to the first frame painted with what it read
// at first, and the JavaScript heap then, in MiB.
func openHugeTask(ctx context.Context, br *browser.Browser, base, id string, want int) (ms, heapMiB float64, err error) {
	p, err := br.NewPage(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer p.Close()
	if err := p.Do(chromedp.Navigate(base + "/#/tasks/" + id)); err != nil {
		return 0, 0, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	if err := pollPage(p, fmt.Sprintf(`document.body.dataset.lastSeq == "%d"`, want), deadline); err != nil {
		return 0, 0, fmt.Errorf("C2: the page holding task %s's last event: %w", id, err)
	}
	painted := `performance.getEntriesByName("drover-first-screen").length > 0`
	if err := pollPage(p, painted, deadline); err != nil {
		return 0, 0, fmt.Errorf("C2: the page's drover-first-screen mark: %w", err)
	}
	ms, err = browser.Eval[float64](p, `performance.getEntriesByName("drover-first-screen")[0].startTime`)
	if err != nil {
		return 0, 0, err
	}
	heap, err := p.HeapUsed()
	if err != nil {
		return 0, 0, err
	}
	return ms, heap / (1 << 20), nil
}

// pollPage evaluates cond in the page until it holds, or until the deadline.
func pollPage(p *browser.Page, cond string, deadline time.Time) error {
	for {
		ok, err := browser.Eval[bool](p, "!!("+cond+")")
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("not by the deadline")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package main

import (
	"strings"
	"testing"

	"github.com/drover-run/drover/internal/bench"
)

// TestQuickConsoleFigure runs figure C1 as `make bench BENCH_QUICK=1` does: the console in
// headless Chromium against the fake API.
func TestQuickConsoleFigure(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium")
	}
	_, rows := quickRun(t, "C1")
	render, heap := rows["C1"], rows["C1 heap"]
	if render.Unit != "ms" || render.Baseline <= 0 || render.Ratio <= 0 || render.Runs != 3 || render.Goal != bench.RatioAtMost(c1RenderGoalRatio) {
		t.Errorf("C1 row is incomplete: %+v", render)
	}
	if heap.Unit != "MiB" || heap.Baseline <= 0 || heap.Runs != 3 || heap.Goal != bench.DroverAtMost(c1HeapGoalMiB, "MiB") {
		t.Errorf("C1 heap row is incomplete: %+v", heap)
	}
	for _, r := range []bench.Row{render, heap} {
		if !strings.Contains(r.Note, "1000 events vs 50") {
			t.Errorf("%s note = %q", r.Figure, r.Note)
		}
	}
}

// TestQuickHugeTaskFigure runs figure C2 as `make bench BENCH_QUICK=1` does: an e2e benchmark,
// drover serve on the benchmark's Postgres, the console in headless Chromium.
func TestQuickHugeTaskFigure(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium against drover serve")
	}
	table, rows := quickRun(t, "C2")
	render, heap := rows["C2"], rows["C2 heap"]
	if render.Unit != "ms" || render.Baseline <= 0 || render.Drover <= 0 || render.Ratio <= 0 || render.Goal != bench.DroverAtMost(1000, "ms") {
		t.Errorf("C2 row is incomplete: %+v\n%s", render, table)
	}
	if heap.Unit != "MiB" || heap.Baseline <= 0 || heap.Drover <= 0 || heap.Goal != bench.DroverAtMost(100, "MiB") {
		t.Errorf("C2 heap row is incomplete: %+v\n%s", heap, table)
	}
	for _, r := range []bench.Row{render, heap} {
		if !strings.Contains(r.Note, "5000 events vs 50") {
			t.Errorf("%s note = %q", r.Figure, r.Note)
		}
	}
}

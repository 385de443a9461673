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

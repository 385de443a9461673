package main

import (
	"strings"
	"testing"

	"github.com/drover-run/drover/internal/bench"
)

// TestQuickDecisionFigure runs figure D1 as `make bench BENCH_QUICK=1` does: the e2e benchmark
// on the whole stack (Temporal dev server, Postgres, a drover worker, the real CLI against the
// fake Messages API).
func TestQuickDecisionFigure(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a supervised task on the whole stack")
	}
	_, rows := quickRun(t, "D1")
	p99, p50 := rows["D1"], rows["D1 p50"]
	for _, r := range []bench.Row{p99, p50} {
		if r.Unit != "ms" || r.Baseline <= 0 || r.Ratio <= 0 || r.Runs != 3 || r.Goal != bench.DroverAtMost(500, "ms") {
			t.Errorf("%s row is incomplete: %+v", r.Figure, r)
		}
		if !strings.Contains(r.Note, "6 decisions a side") {
			t.Errorf("%s note = %q", r.Figure, r.Note)
		}
	}
	// A percentile of the same decisions: the p99 is never below the p50.
	if p99.Drover < p50.Drover || p99.Baseline < p50.Baseline {
		t.Errorf("p99 below p50: %+v, %+v", p99, p50)
	}
}

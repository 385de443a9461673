package main

import (
	"strings"
	"testing"
)

// TestQuickLoadFigures runs the quick mode of the figures of streaming and load (P3, P3append,
// P4) as `make bench BENCH_QUICK=1` does: the e2e benchmarks on the whole stack (Temporal,
// Postgres, a worker, the real CLI against the fake Messages API).
func TestQuickLoadFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack under load")
	}
	table, got := quickRun(t, "P3", "P3append", "P4")
	want := map[string]string{ // figure → unit
		"P3 p50": "ms", "P3 p99": "ms", "P3 share": "ms", "P3 rows": "rows",
		"P3append": "events/s",
		"P4":       "turns/s", "P4 rss": "MiB", "P4 clis": "processes", "P4 starts": "processes",
	}
	for fig, unit := range want {
		r, ok := got[fig]
		switch {
		case !ok:
			t.Errorf("no row %s:\n%s", fig, table)
			continue
		case r.Unit != unit || r.Drover <= 0 || r.Runs != quickRuns(fig) || r.Goal.Limit <= 0 || r.What == "":
			t.Errorf("%s row is incomplete: %+v", fig, r)
		case fig != "P4 rss" && r.Baseline <= 0:
			t.Errorf("%s has no baseline: %+v", fig, r)
		}
	}
	// Rows whose goal bounds a ratio carry one; the others carry none (a share of the p50 has
	// no meaningful ratio to its baseline).
	for _, fig := range []string{"P3 p50", "P3 p99", "P3append", "P4", "P4 starts"} {
		if got[fig].Ratio <= 0 {
			t.Errorf("%s has no ratio: %+v", fig, got[fig])
		}
	}
	if p4 := got["P4"]; p4.Goal.Of != "ratio" || p4.Goal.Op != ">=" {
		t.Errorf("P4 goal = %+v, want a ratio bounded from below", p4.Goal)
	}
	if r := got["P3 rows"]; r.Drover > r.Baseline {
		t.Errorf("P3 rows: %v rows for %v deltas", r.Drover, r.Baseline)
	}
	if c := got["P4 clis"]; c.Drover > c.Goal.Limit {
		// Not a timing: the worker's limits bound its processes whatever the machine's speed.
		t.Errorf("P4 clis: %v CLI processes under a worker whose limits allow %v", c.Drover, c.Goal.Limit)
	}
}

// quickRuns is the number of pairs a quick run gives a figure: three, or two for P4, whose pair
// takes seconds.
func quickRuns(figure string) int {
	if strings.HasPrefix(figure, "P4") {
		return 2
	}
	return 3
}

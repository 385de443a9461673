package main

import "testing"

// TestQuickCPUFigures runs the CPU figures as `make bench BENCH_QUICK=1` does: one e2e benchmark
// on the whole stack (Temporal, Postgres, a worker, the real CLI), a few batches.
func TestQuickCPUFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	_, rows := quickRun(t, "P5", "P5age", "P5cold")
	for _, id := range []string{"P5", "P5age", "P5cold", "P5cold requests"} {
		if r := rows[id]; r.Baseline <= 0 || r.Ratio <= 0 || r.Runs != 3 || r.Goal.Of != "ratio" || r.Goal.Op != "<=" {
			t.Errorf("%s row is incomplete: %+v", id, r)
		}
	}
	if p5 := rows["P5"]; p5.Note == "" {
		t.Error("P5 does not list the stack's parts")
	}
}

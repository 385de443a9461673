package main

import "testing"

// TestQuickLongHistoryTurnFigures runs S1turn, S3 and S2 as `make bench BENCH_QUICK=1` does: the
// e2e benchmarks on the whole stack (Temporal, Postgres, two workers each, the real CLI), with a
// history of 20,000 finished tasks for S1turn and 300 served tasks for S3; S2 on Postgres alone
// (2,000 finished tasks archived, then the append rate with the archive job and without).
func TestQuickLongHistoryTurnFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	_, rows := quickRun(t, "S1turn", "S3", "S2")
	for _, id := range []string{"S1turn", "S3"} {
		if r := rows[id]; r.Unit != "ms" || r.Baseline <= 0 || r.Drover <= 0 || r.Ratio <= 0 || r.Goal.Of != "ratio" || r.Goal.Op != "<=" || r.Note == "" {
			t.Errorf("%s row is incomplete: %+v", id, r)
		}
	}
	if r := rows["S1turn"]; r.Runs != 3*5 {
		t.Errorf("S1turn measured %d pairs, want 15", r.Runs)
	}
	if r := rows["S3"]; r.Runs != 3 {
		t.Errorf("S3 measured %d pairs of batches, want 3", r.Runs)
	}
	if r := rows["S2"]; r.Unit != "B" || r.Baseline <= 0 || r.Goal.Of != "drover" || r.Goal.Op != "<=" {
		t.Errorf("S2 row is incomplete: %+v", r)
	}
	if r := rows["S2 append"]; r.Unit != "events/s" || r.Baseline <= 0 || r.Drover <= 0 || r.Ratio <= 0 || r.Runs != 3 || r.Goal.Of != "ratio" || r.Goal.Op != ">=" {
		t.Errorf("S2 append row is incomplete: %+v", r)
	}
}

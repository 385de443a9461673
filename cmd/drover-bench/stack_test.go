package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover/internal/bench"
)

// TestQuickTurnFigures runs the turn figures as `make bench BENCH_QUICK=1` does: the e2e benchmarks
// on the whole stack (Temporal, Postgres, workers, the real CLI), a few pairs each. Timings are not
// checked, only that every row is measured and well formed. Without the pinned tools the e2e
// benchmarks skip, which the run reports as an error: install them with scripts/tools.sh.
func TestQuickTurnFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	ids := []string{"P2", "P2cli", "P2cold"}
	out := filepath.Join(t.TempDir(), "results.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-quick", "-only", strings.Join(ids, ","), "-out", out}, os.Environ(), &stdout, &stderr)
	if err != nil {
		t.Fatalf("quick run failed: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	table := stdout.String()
	t.Logf("table:\n%s", table)

	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("results are not JSON: %v\n%s", err, b)
	}
	measured := map[string]bench.Row{}
	for _, r := range rep.Rows {
		switch r.Status {
		case bench.StatusPass, bench.StatusFail:
			measured[r.Figure] = r
		case bench.StatusSkipped:
		default:
			t.Errorf("%s was not measured: %s %s", r.Figure, r.Status, r.Note)
		}
	}
	for _, id := range ids {
		r, ok := measured[id]
		if !ok {
			t.Errorf("no measured row for %s", id)
			continue
		}
		if r.Unit != "ms" || r.Baseline <= 0 || r.Drover <= 0 || r.Ratio <= 0 || r.Runs != 3 ||
			r.Goal.Of != "ratio" || r.Goal.Op != "<=" || r.Goal.Limit <= 0 || r.What == "" {
			t.Errorf("%s row is incomplete: %+v", id, r)
		}
		if !strings.Contains(table, id+" ") {
			t.Errorf("%s is in the JSON but not in the table", id)
		}
	}
	if len(measured) != len(ids) {
		t.Errorf("measured rows %v, want exactly %v", measured, ids)
	}
}

// A failed figure benchmark's error shows the test's own lines, not only the parts' last logs.
func TestTestLinesPicksTheBenchmarksOwnLines(t *testing.T) {
	t.Parallel()
	out := []byte("noise 1\n    figure_p4_test.go:120: turn 2 of task x failed: boom\nnoise 2\nnoise 3\n--- FAIL: BenchmarkFigureP4\n")
	got := string(testLines(out, 5, 2))
	if !strings.HasPrefix(got, "    figure_p4_test.go:120: turn 2 of task x failed: boom\n...\n") || !strings.HasSuffix(got, "noise 3\n--- FAIL: BenchmarkFigureP4") {
		t.Fatalf("testLines = %q", got)
	}
	if got := string(testLines([]byte("a\nb\nc\n"), 5, 2)); got != "b\nc" {
		t.Fatalf("without test lines: %q", got)
	}
}

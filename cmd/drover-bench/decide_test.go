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

// TestQuickDecisionFigure runs figure D1 as `make bench BENCH_QUICK=1` does: the e2e benchmark
// on the whole stack (Temporal dev server, Postgres, a drover worker, the real CLI against the
// fake Messages API). It checks that both rows are measured and well formed, never the timings.
func TestQuickDecisionFigure(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a supervised task on the whole stack")
	}
	out := filepath.Join(t.TempDir(), "results.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-quick", "-only", "D1", "-out", out}, os.Environ(), &stdout, &stderr)
	if err != nil {
		t.Fatalf("quick run failed: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	table := stdout.String()

	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("results are not JSON: %v\n%s", err, b)
	}
	var rows []bench.Row
	for _, r := range rep.Rows {
		if strings.HasPrefix(r.Figure, "D1") {
			rows = append(rows, r)
		} else if r.Status != bench.StatusSkipped {
			t.Errorf("%s ran, though -only names D1 alone: %+v", r.Figure, r)
		}
	}
	if len(rows) != 2 || rows[0].Figure != "D1" || rows[1].Figure != "D1 p50" {
		t.Fatalf("D1 rows = %+v\n%s", rows, table)
	}
	for _, r := range rows {
		if r.Status != bench.StatusPass && r.Status != bench.StatusFail {
			t.Errorf("%s was not measured: %s %s", r.Figure, r.Status, r.Note)
		}
		if r.Unit != "ms" || r.Drover <= 0 || r.Baseline <= 0 || r.Ratio <= 0 || r.Runs != 3 {
			t.Errorf("%s row is incomplete: %+v", r.Figure, r)
		}
		if r.Goal != bench.DroverAtMost(500, "ms") {
			t.Errorf("%s goal = %+v", r.Figure, r.Goal)
		}
		if !strings.Contains(r.Note, "6 decisions a side") {
			t.Errorf("%s note = %q", r.Figure, r.Note)
		}
		if !strings.Contains(table, r.Figure+" ") {
			t.Errorf("%s is in the JSON but not in the table:\n%s", r.Figure, table)
		}
	}
	// A percentile of the same decisions: the p99 is never below the p50.
	if rows[0].Drover < rows[1].Drover || rows[0].Baseline < rows[1].Baseline {
		t.Errorf("p99 below p50: %+v, %+v", rows[0], rows[1])
	}
}

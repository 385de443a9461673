package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover/internal/bench"
)

// TestQuickRun runs the benchmark as `make bench BENCH_QUICK=1` does, for P1: it builds drover and
// the baseline, measures them, prints the table and writes the JSON. Timings are not checked, only
// that every row is measured and well formed, so that the benchmark cannot rot unnoticed.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds drover and runs it on a corpus")
	}
	out := filepath.Join(t.TempDir(), "results.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-quick", "-only", "P1", "-out", out}, os.Environ(), &stdout, &stderr)
	if err != nil {
		t.Fatalf("quick run failed: %v\n%s", err, stderr.String())
	}
	table := stdout.String()
	for _, want := range []string{"figure", "baseline", "drover", "ratio", "goal", "P1 ", "P1 rss", "quick run"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}

	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("results are not JSON: %v\n%s", err, b)
	}
	// The figures -only leaves out have a skipped row each; P1 has two rows.
	var rows []bench.Row
	for _, r := range rep.Rows {
		if r.Figure == "P1" || strings.HasPrefix(r.Figure, "P1 ") {
			rows = append(rows, r)
		} else if r.Status != bench.StatusSkipped {
			t.Errorf("%s ran, though -only names P1 alone: %+v", r.Figure, r)
		}
	}
	if !rep.Quick || rep.Started.IsZero() || len(rows) != 2 {
		t.Fatalf("report = %+v", rep)
	}
	for _, r := range rows {
		if r.Status != bench.StatusPass && r.Status != bench.StatusFail {
			t.Errorf("%s was not measured: %s %s", r.Figure, r.Status, r.Note)
		}
		if r.Drover <= 0 || r.Baseline <= 0 || r.Runs != 3 || r.Goal.Limit <= 0 {
			t.Errorf("%s row is incomplete: %+v", r.Figure, r)
		}
		if !strings.Contains(table, r.Figure) {
			t.Errorf("%s is in the JSON but not in the table", r.Figure)
		}
	}
	if p1 := rows[0]; p1.Figure != "P1" || p1.Ratio <= 0 || p1.Unit != "s" {
		t.Errorf("P1 row = %+v", p1)
	}
	if rss := rows[1]; rss.Figure != "P1 rss" || rss.Unit != "MiB" || rss.Drover < 1 {
		t.Errorf("P1 rss row = %+v", rss)
	}
}

func TestFlags(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-only", "P9"}, nil, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "P9") {
		t.Errorf("-only P9: err = %v", err)
	}
	if err := run(context.Background(), []string{"-help"}, nil, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) ||
		!strings.Contains(stderr.String(), "-quick") {
		t.Errorf("-help: err = %v, usage %q", err, stderr.String())
	}
}

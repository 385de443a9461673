package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover/internal/bench"
)

// quickRun runs `drover-bench -quick -only ids` as `make bench BENCH_QUICK=1` does, checks that
// it printed a table and wrote the same rows as JSON, that every figure it left out is a skipped
// row and every row of ids was measured (its timings are not checked), and returns the table and
// the measured rows by figure.
func quickRun(t *testing.T, ids ...string) (table string, rows map[string]bench.Row) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "results.json")
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"-quick", "-only", strings.Join(ids, ","), "-out", out}, os.Environ(), &stdout, &stderr)
	if err != nil {
		t.Fatalf("quick run failed: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	table = stdout.String()
	for _, want := range []string{"figure", "baseline", "drover", "ratio", "goal", "quick run"} {
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
	if !rep.Quick || rep.Started.IsZero() {
		t.Errorf("report = %+v", rep)
	}
	rows = map[string]bench.Row{}
	for _, r := range rep.Rows {
		selected := slices.ContainsFunc(ids, func(id string) bool { return r.Figure == id || strings.HasPrefix(r.Figure, id+" ") })
		switch {
		case !selected && r.Status != bench.StatusSkipped:
			t.Errorf("%s ran, though -only left it out: %+v", r.Figure, r)
		case !selected:
		case r.Status != bench.StatusPass && r.Status != bench.StatusFail:
			t.Errorf("%s was not measured: %s %s", r.Figure, r.Status, r.Note)
		// Zero is a figure never measured, but for the bytes archival leaves (S2), which may be
		// none; below zero only an added time (P2) can go, when the baseline's own noise is
		// larger than what drover adds.
		case (r.Drover == 0 && r.Figure != "S2") || (r.Drover < 0 && r.Figure != "P2") || r.Goal.Limit <= 0 || r.What == "" || r.Unit == "":
			t.Errorf("%s row is incomplete: %+v", r.Figure, r)
		default:
			rows[r.Figure] = r
			if !strings.Contains(table, r.Figure+" ") {
				t.Errorf("%s is in the JSON but not in the table", r.Figure)
			}
		}
	}
	for _, id := range ids {
		measured := false
		for fig := range rows {
			measured = measured || fig == id || strings.HasPrefix(fig, id+" ")
		}
		if !measured {
			t.Errorf("no measured row of %s:\n%s", id, table)
		}
	}
	return table, rows
}

// TestQuickRun runs P1 as `make bench BENCH_QUICK=1` does: it builds drover and the baseline,
// measures them, prints the table and writes the JSON.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds drover and runs it on a corpus")
	}
	_, rows := quickRun(t, "P1")
	if p1 := rows["P1"]; p1.Ratio <= 0 || p1.Unit != "s" || p1.Baseline <= 0 || p1.Runs != 3 {
		t.Errorf("P1 row = %+v", p1)
	}
	if rss := rows["P1 rss"]; rss.Unit != "MiB" || rss.Drover < 1 || rss.Runs != 3 {
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

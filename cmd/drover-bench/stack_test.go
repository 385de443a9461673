package main

import (
	"strings"
	"testing"
)

// TestQuickTurnFigures runs the turn figures as `make bench BENCH_QUICK=1` does: the e2e benchmarks
// on the whole stack (Temporal, Postgres, workers, the real CLI), a few pairs each.
func TestQuickTurnFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	ids := []string{"P2", "P2cli", "P2cold"}
	_, rows := quickRun(t, ids...)
	for _, id := range ids {
		// P2 bounds the time drover adds; the others, the ratio.
		of := "ratio"
		if id == "P2" {
			of = "drover"
		}
		if r := rows[id]; r.Unit != "ms" || r.Baseline <= 0 || r.Ratio <= 0 || r.Runs != 3 || r.Goal.Of != of || r.Goal.Op != "<=" {
			t.Errorf("%s row is incomplete: %+v", id, r)
		}
	}
	if len(rows) != len(ids) {
		t.Errorf("measured rows %v, want exactly %v", rows, ids)
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

// The benchmarks of one process are told apart by the line that names each as it starts; a
// failure is charged to its own benchmark only.
func TestSplitByBenchmark(t *testing.T) {
	t.Parallel()
	out := "goos: linux\nBenchmarkFigureA\n    a_test.go:3: a log\nBenchmarkFigureA-2   \t       1\t    449242 ns/op\n" +
		"BenchmarkFigureB\n    b_test.go:4: boom\n--- FAIL: BenchmarkFigureB\n" +
		"BenchmarkFigureC\n    c_test.go:5: c log\nBenchmarkFigureC-2   \t       1\t    79801 ns/op\nFAIL\n"
	parts := splitByBenchmark([]byte(out), []string{"BenchmarkFigureA", "BenchmarkFigureB", "BenchmarkFigureC", "BenchmarkFigureD"})
	want := map[string]string{
		"BenchmarkFigureA": "BenchmarkFigureA\n    a_test.go:3: a log\nBenchmarkFigureA-2   \t       1\t    449242 ns/op\n",
		"BenchmarkFigureB": "BenchmarkFigureB\n    b_test.go:4: boom\n--- FAIL: BenchmarkFigureB\n",
		"BenchmarkFigureC": "BenchmarkFigureC\n    c_test.go:5: c log\nBenchmarkFigureC-2   \t       1\t    79801 ns/op\nFAIL\n",
	}
	if len(parts) != len(want) {
		t.Errorf("parts of %d benchmarks, want %d: %q", len(parts), len(want), parts)
	}
	for b, w := range want {
		if got := string(parts[b]); got != w {
			t.Errorf("%s: part %q, want %q", b, got, w)
		}
	}
}

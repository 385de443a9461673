package e2e

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/drover-run/drover/internal/bench"
)

// The figures of `make bench` that need the whole stack (Temporal, Postgres, workers, the real
// CLI) are benchmarks of this package named BenchmarkFigure*: cmd/drover-bench builds this
// package's test binary, runs one such benchmark once (-test.benchtime 1x), and reads the rows it
// reports. A figure benchmark does its own interleaving: it runs -bench.runs (baseline, drover)
// pairs, alternating their order, and reports medians as bench.Row values.
var (
	benchRows  = flag.String("bench.rows", "", "figure benchmarks: append the rows they measure to this file, one JSON object per line")
	benchRuns  = flag.Int("bench.runs", 7, "figure benchmarks: interleaved (baseline, drover) pairs to run")
	benchQuick = flag.Bool("bench.quick", false, "figure benchmarks: small inputs, to check the machinery")
)

var benchRowsMu sync.Mutex

// reportRows hands a figure's rows to cmd/drover-bench, and logs them for a person running the
// benchmark with go test -v.
func reportRows(tb testing.TB, rows ...bench.Row) {
	tb.Helper()
	for _, r := range rows {
		tb.Logf("%s: %s: baseline %.4g %s, drover %.4g %s, ratio %.3g (%d runs) %s",
			r.Figure, r.What, r.Baseline, r.Unit, r.Drover, r.Unit, r.Ratio, r.Runs, r.Note)
	}
	if *benchRows == "" {
		return
	}
	benchRowsMu.Lock()
	defer benchRowsMu.Unlock()
	f, err := os.OpenFile(*benchRows, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		tb.Fatalf("reporting rows: %v", err)
	}
	enc := json.NewEncoder(f)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			_ = f.Close()
			tb.Fatalf("reporting rows: %v", err)
		}
	}
	if err := f.Close(); err != nil {
		tb.Fatalf("reporting rows: %v", err)
	}
}

// figureRuns is the number of interleaved pairs a figure benchmark runs.
func figureRuns(tb testing.TB) int {
	tb.Helper()
	if *benchRuns < 1 {
		tb.Fatalf("-bench.runs=%d: want at least 1", *benchRuns)
	}
	return *benchRuns
}

// ratioRow is a row of two durations measured in interleaved pairs: baseline and drover are the
// medians, ratio the median of the pairs' drover ÷ baseline (a slowdown: the goals of turn and
// latency figures bound it from above).
func ratioRow(figure, what string, base, drover []float64, unit string, goal bench.Goal) bench.Row {
	if len(base) != len(drover) {
		panic(fmt.Sprintf("ratioRow %s: %d baselines, %d drover runs", figure, len(base), len(drover)))
	}
	ratios := make([]float64, len(base))
	for i := range base {
		ratios[i] = drover[i] / base[i]
	}
	return bench.Row{Figure: figure, What: what, Unit: unit,
		Baseline: bench.Median(base), Drover: bench.Median(drover), Ratio: bench.Median(ratios),
		Runs: len(base), Goal: goal}
}

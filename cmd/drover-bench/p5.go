package main

import "github.com/drover-run/drover/internal/bench"

// The CPU figures: what a turn costs the host beyond the CLI, counted per process from /proc (CPU
// time, which load on a shared machine does not stretch as it stretches wall time). One benchmark
// of package e2e (figure_p5_test.go) measures the three.

// p5Figures are P5, P5age and P5cold.
func p5Figures(stack *stackRunner) []bench.Figure {
	return []bench.Figure{
		stack.figure("P5", "CPU per warm turn: drover's stack (worker, guard, Temporal, Postgres) ÷ the CLI's own",
			bench.RatioAtMost(0.5), "BenchmarkFigureP5"),
		stack.figure("P5age", "P5 with 2,000 stale project folders in the CLI config folder ÷ P5 with none",
			bench.RatioAtMost(1.1), "BenchmarkFigureP5"),
		stack.figure("P5cold", "the CLI's CPU on a task's first turn under drover ÷ on a bare stream-json start; count_tokens requests per start",
			bench.RatioAtMost(1.1), "BenchmarkFigureP5"),
	}
}

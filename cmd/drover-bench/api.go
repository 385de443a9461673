package main

import "github.com/drover-run/drover/internal/bench"

// apiFigures are the figures of the HTTP API under load, measured on the whole stack with one
// `drover serve` (package e2e, figure_api_test.go).
func apiFigures(stack *stackRunner) []bench.Figure {
	return []bench.Figure{
		stack.figure("A1", "GET /api/v1/tasks/{id} with 1,000 idle and 100 live event streams open, p99 (and RSS ≤ 200 MiB)",
			bench.DroverAtMost(100, "ms"), "BenchmarkFigureA1"),
		stack.figure("A2", "200 creations over 20 s with the only worker busy: every one answered, p99; each first prompt asked once",
			bench.DroverAtMost(1000, "ms"), "BenchmarkFigureA2"),
	}
}

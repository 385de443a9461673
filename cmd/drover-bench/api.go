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

// historyFigures are the figures of a database with a long history: listings that cost a page
// and a warm turn beside a long history, a worker that has served many tasks, and retention by
// the archive job (package e2e, figure_history_test.go and figure_s3_test.go).
func historyFigures(stack *stackRunner) []bench.Figure {
	return []bench.Figure{
		stack.figure("S1", "a page of GET /api/v1/tasks (and by cursor, by status, the inbox) with 1,000,000 finished tasks, p99",
			bench.DroverAtMost(50, "ms"), "BenchmarkFigureS1"),
		stack.figure("S1turn", "a warm turn with 1,000,000 finished and 100 active tasks in the database ÷ with the 100 active alone",
			bench.RatioAtMost(1.1), "BenchmarkFigureS1"),
		stack.figure("S3", "worker CPU per warm turn after it served 10,000 tasks ÷ after 10",
			bench.RatioAtMost(1.1), "BenchmarkFigureS3"),
		stack.figure("S2", "database bytes per finished task after archival; event appends while the archive job runs",
			bench.DroverAtMost(1024, "B"), "BenchmarkFigureS2"),
	}
}

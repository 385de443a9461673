package main

import "github.com/drover-run/drover/internal/bench"

// d1 is figure D1, the latency of a decision in supervised mode: a person's approval, sent as
// `drover task approve` sends it (taskclient.Decider: Postgres, then the decide_later signal),
// until the CLI that waits for it goes on, witnessed by the CLI's next request at the fake
// Messages API; against the same CLI answered directly by its own client. Goal: p99 ≤ 500 ms. The measurement is e2e's BenchmarkFigureD1.
func d1(stack *stackRunner) bench.Figure {
	return stack.figure("D1", "decision: sent → CLI's next request, p99 (baseline: answered directly)",
		bench.DroverAtMost(500, "ms"), "BenchmarkFigureD1")
}

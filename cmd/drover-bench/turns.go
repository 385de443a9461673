package main

import "github.com/drover-run/drover/internal/bench"

// The turn figures: how much drover adds to a turn of the CLI, warm and cold. Each is a benchmark of
// package e2e (figure_*_test.go), run on the whole stack.

// p2 is a warm turn through drover's client against the same turn sent straight to a warm CLI,
// stated as the time drover adds.
func p2(stack *stackRunner) bench.Figure {
	return stack.figure("P2", "warm turn: time drover adds (prompt Update → complete event in the log, minus prompt → result on a warm CLI)",
		bench.DroverAtMost(15, "ms"), "BenchmarkFigureTurn")
}

// p2CLI is the same warm turn as a person runs it: drover task prompt, drover task watch.
func p2CLI(stack *stackRunner) bench.Figure {
	return stack.figure("P2cli", "warm turn: drover task prompt → complete printed by drover task watch ÷ prompt → result on a warm CLI",
		bench.RatioAtMost(1.5), "BenchmarkFigureTurnCLI")
}

// p2Cold is a new task's first turn against a bare claude -p run.
func p2Cold(stack *stackRunner) bench.Figure {
	return stack.figure("P2cold", "first turn: new task → its complete event in the log ÷ a bare claude -p run",
		bench.RatioAtMost(1.1), "BenchmarkFigureColdTurn")
}

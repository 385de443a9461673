package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/task"
)

// Benchmarks of drover against the same parts the tests use: the real CLI
// against the fake Messages API (which answers every prompt with a short
// text), a real Temporal dev server, real Postgres and `drover worker` as a
// subprocess. They measure; they never assert timings, but they do fail on a
// wrong outcome (a failed turn, a complete event missing from the log). Run
// them one at a time (-v shows the ratios and row breakdowns they log):
//
//	go test ./e2e -run '^$' -bench '^BenchmarkTurnLatency$' -benchtime 30x -v
//	go test ./e2e -run '^$' -bench '^BenchmarkColdFirstTurn$' -benchtime 10x -v
//
// Load and the streaming path are figures of `make bench` (BenchmarkFigureP3,
// BenchmarkFigureP3Append, BenchmarkFigureP4).

// BenchmarkTurnLatency compares one more text turn on a warm CLI process:
// driven directly with package claudecode (prompt → result), and through
// drover (Prompt Update → the turn's complete event delivered by store.Watch).
// Each reports ms/op (mean) and p50-ms; the parent logs the p50 ratio.
func BenchmarkTurnLatency(b *testing.B) {
	e := newBenchEnv(b)
	var p50Direct, p50Drover time.Duration

	var proc *claudecode.Process
	b.Run("direct", func(b *testing.B) {
		e := e.in(b)
		if proc == nil {
			p, err := startClaude(e.ctx, e.claudeCommand())
			if err != nil {
				b.Fatal(err)
			}
			e.owner.Cleanup(func() { _ = p.Stop(context.Background()) })
			if err := claudeTurn(e.ctx, p, "warm-up prompt"); err != nil {
				b.Fatal(err)
			}
			proc = p
		}
		lat := make(latencies, 0, b.N)
		b.ResetTimer()
		for i := range b.N {
			t0 := time.Now()
			if err := claudeTurn(e.ctx, proc, fmt.Sprintf("direct prompt %d", i)); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		lat.report(b, false)
		p50Direct = lat.percentile(50)
	})
	if proc != nil {
		_ = proc.Stop(context.Background()) // idle from here on; out of the way of the drover run
	}

	id := e.taskID("turn-latency")
	var turns int // the turns the task has ended
	b.Run("drover", func(b *testing.B) {
		e := e.in(b)
		seen, stop := e.completions(id)
		defer stop()
		if turns == 0 {
			e.startWorker("host-" + e.queue)
			if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "warm-up prompt"}, ""); err != nil {
				b.Fatal(err)
			}
			turns = 1
		}
		// A new watch delivers the log from its start: skip what is known.
		e.waitComplete(seen, id, turns)
		e.waitIdle(id)
		lat := make(latencies, 0, b.N)
		b.ResetTimer()
		for i := range b.N {
			t0 := time.Now()
			if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: fmt.Sprintf("drover prompt %d", i)}, ""); err != nil {
				b.Fatal(err)
			}
			turns++
			at := e.waitComplete(seen, id, turns)
			lat = append(lat, at.Sub(t0))
			b.StopTimer()
			e.waitIdle(id) // the turn's commit and the workflow's bookkeeping are not timed
			b.StartTimer()
		}
		b.StopTimer()
		lat.report(b, false)
		p50Drover = lat.percentile(50)
		if st := e.waitIdle(id); st.Totals.Turns != turns || st.Totals.FailedTurns != 0 {
			b.Fatalf("task state after %d turns: %+v", turns, st)
		}
	})
	logRatio(b, "drover/direct", p50Drover, p50Direct)
}

// BenchmarkColdFirstTurn compares a first turn from nothing: a fresh CLI
// process started, initialized and run to its result (bare), and a new task's
// first turn through drover (Update-with-Start → complete event delivered),
// whose CLI process the worker starts. Stopping the process, or closing the
// task, is not timed.
func BenchmarkColdFirstTurn(b *testing.B) {
	e := newBenchEnv(b)
	var p50Bare, p50Drover time.Duration

	bare := func(b *testing.B, e *benchEnv, prompt string) time.Duration {
		t0 := time.Now()
		p, err := startClaude(e.ctx, e.claudeCommand())
		if err != nil {
			b.Fatal(err)
		}
		err = claudeTurn(e.ctx, p, prompt)
		d := time.Since(t0)
		b.StopTimer()
		_ = p.Stop(context.Background())
		b.StartTimer()
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	warmBare := false
	b.Run("bare", func(b *testing.B) {
		e := e.in(b)
		if !warmBare {
			bare(b, e, "warm-up prompt") // the binary into the page cache
			warmBare = true
		}
		lat := make(latencies, 0, b.N)
		b.ResetTimer()
		for i := range b.N {
			d := bare(b, e, fmt.Sprintf("bare prompt %d", i))
			lat = append(lat, d)
		}
		b.StopTimer()
		lat.report(b, false)
		p50Bare = lat.percentile(50)
	})

	firstTurn := func(b *testing.B, e *benchEnv, id string) time.Duration {
		seen, stop := e.completions(id)
		defer stop()
		t0 := time.Now()
		if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "first prompt of " + id}, ""); err != nil {
			b.Fatal(err)
		}
		d := e.waitComplete(seen, id, 1).Sub(t0)
		b.StopTimer()
		stop()
		if err := e.closeTask(id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		return d
	}
	var w *workerProc
	b.Run("drover", func(b *testing.B) {
		e := e.in(b)
		if w == nil {
			w = e.startWorker("host-" + e.queue)
			firstTurn(b, e, e.taskID("cold-warm-up")) // the worker's connections and caches
		}
		lat := make(latencies, 0, b.N)
		b.ResetTimer()
		for range b.N {
			lat = append(lat, firstTurn(b, e, "cold-"+uuid.NewString()[:8]))
		}
		b.StopTimer()
		lat.report(b, false)
		p50Drover = lat.percentile(50)
	})
	logRatio(b, "drover/bare", p50Drover, p50Bare)
}

// logRatio logs num/den of two p50 latencies.
func logRatio(b *testing.B, name string, num, den time.Duration) {
	if num > 0 && den > 0 {
		b.Logf("p50 %s = %.2f ms / %.2f ms = %.2f", name, ms(num), ms(den), float64(num)/float64(den))
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-run/drover/internal/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// Benchmarks of drover against the same parts the tests use: the real CLI
// against the fake Messages API (which answers every prompt with a short
// text), a real Temporal dev server, real Postgres and `drover worker` as a
// subprocess. They measure; they never assert timings, but they do fail on a
// wrong outcome (a failed turn, a complete event missing from the log). Run
// them one at a time (-v shows the row breakdowns they log). Turn latencies
// are figures of `make bench`: the BenchmarkFigure* of figure_*_test.go.
//
//	go test ./e2e -run '^$' -bench '^BenchmarkConcurrentTasks$' -benchtime 1x -v
//	go test ./e2e -run '^$' -bench '^BenchmarkWatchLatency$' -benchtime 10000x

// BenchmarkConcurrentTasks starts 20 tasks at once on one worker, each with
// three prompts (the first through Update-with-Start, two more queued behind
// it), and reports per round: turns/s (turns over wall time until the last
// complete event), the worker's peak RSS (VmHWM), the peak summed RSS and
// count of the processes below the worker (its CLI processes, and anything
// they run), and the rows the round left in Postgres.
func BenchmarkConcurrentTasks(b *testing.B) {
	const tasks, prompts = 20, 3
	e := newBenchEnv(b)
	var w *workerProc
	b.Run(fmt.Sprintf("tasks=%d", tasks), func(b *testing.B) {
		e := e.in(b)
		if w == nil {
			w = e.startWorker("host-" + e.queue)
			// One task first, so that the round does not pay for the worker's
			// first workflow and activity.
			warm := e.taskID("concurrent-warm-up")
			seen, stop := e.completions(warm)
			if _, err := e.tc.Start(e.ctx, warm, e.params(), task.Prompt{Text: "warm-up"}, ""); err != nil {
				b.Fatal(err)
			}
			e.waitComplete(seen, warm, 1)
			stop()
			if err := e.closeTask(warm); err != nil {
				b.Fatal(err)
			}
		}
		var wall time.Duration
		var peakChildren, peakProcs int64
		var rows rowCounts
		b.ResetTimer()
		for range b.N {
			prefix := "round-" + uuid.NewString()[:8] + "-"
			sampler := sampleChildren(b, w.cmd.Process.Pid)
			t0 := time.Now()
			sent := forEachTask(tasks, prefix, func(id string) error {
				if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "prompt 1 of " + id}, ""); err != nil {
					return err
				}
				for p := 2; p <= prompts; p++ {
					if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: fmt.Sprintf("prompt %d of %s", p, id)}, ""); err != nil {
						return err
					}
				}
				return nil
			})
			e.waitAllComplete(prefix, tasks*prompts)
			wall += time.Since(t0)
			b.StopTimer()
			if err := sent(); err != nil {
				b.Fatal(err)
			}
			rss, procs := sampler.stop()
			peakChildren, peakProcs = max(peakChildren, rss), max(peakProcs, procs)
			if err := forEachTask(tasks, prefix, e.closeTask)(); err != nil {
				b.Fatal(err)
			}
			r := e.countRows(prefix)
			if r.completedTurns != tasks*prompts {
				b.Fatalf("round %s: %d turns completed, want %d", prefix, r.completedTurns, tasks*prompts)
			}
			rows.add(r)
			b.StartTimer()
		}
		b.StopTimer()
		n := float64(b.N)
		b.ReportMetric(float64(b.N*tasks*prompts)/wall.Seconds(), "turns/s")
		b.ReportMetric(float64(procStatusKB(w.cmd.Process.Pid, "VmHWM"))/1024, "worker-hwm-MB")
		b.ReportMetric(float64(peakChildren)/1024, "claude-peak-rss-MB")
		b.ReportMetric(float64(peakProcs), "claude-peak-procs")
		b.ReportMetric(float64(rows.events)/n, "task_events-rows")
		b.ReportMetric(float64(rows.turns)/n, "task_turns-rows")
		b.ReportMetric(float64(rows.executors)/n, "executors_running-rows")
	})
}

// BenchmarkWatchLatency measures store.Watch: per-event latency from just
// before AppendEvents (batches of 1) to Watch's callback, and the append rate.
// sequential waits for each event's delivery before the next append (latency
// alone); stream appends back to back while the watch follows (latency under
// load and throughput). It needs only Postgres.
func BenchmarkWatchLatency(b *testing.B) {
	pool := pgtest.NewPool(b)
	payload := json.RawMessage(`{"type":"message_chunk","text":"The quick brown fox jumps over the lazy dog."}`)
	batch := []store.EventInput{{Turn: 1, Attempt: 1, Type: "message_chunk", Payload: payload}}

	// watch delivers the task's events to fn (called on Watch's goroutine)
	// until the returned stop is called.
	watch := func(b *testing.B, taskID string, fn func(seq int64, at time.Time)) (stop func()) {
		ctx, cancel := context.WithCancel(b.Context())
		done := make(chan error, 1)
		go func() {
			done <- store.Watch(ctx, pool, store.WatchConfig{TaskID: taskID}, func(ev store.Event) error {
				fn(ev.Seq, time.Now())
				return nil
			})
		}()
		return func() {
			cancel()
			if err := <-done; ctx.Err() == nil {
				b.Errorf("watch ended early: %v", err)
			}
		}
	}

	b.Run("sequential", func(b *testing.B) {
		ctx, taskID := b.Context(), "watch-seq-"+uuid.NewString()
		type delivery struct {
			seq int64
			at  time.Time
		}
		got := make(chan delivery, 1)
		stop := watch(b, taskID, func(seq int64, at time.Time) { got <- delivery{seq, at} })
		defer stop()
		lat := make(latencies, 0, b.N)
		for i := range b.N + 1 { // the first one, not counted, waits for the watch to start
			t0 := time.Now()
			_, last, err := store.AppendEvents(ctx, pool, taskID, batch)
			if err != nil {
				b.Fatal(err)
			}
			var d delivery
			select {
			case d = <-got:
			case <-time.After(watchGuard):
				b.Fatalf("event %d not delivered", last)
			}
			if d.seq != last {
				b.Fatalf("delivered seq %d after appending %d", d.seq, last)
			}
			if i == 0 {
				b.ResetTimer()
				continue
			}
			lat = append(lat, d.at.Sub(t0))
		}
		b.StopTimer()
		lat.report(b, true)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})

	b.Run("stream", func(b *testing.B) {
		ctx, taskID := b.Context(), "watch-stream-"+uuid.NewString()
		n := int64(b.N) + 1 // seq 1 waits for the watch to start
		starts := make([]atomic.Int64, n+1)
		lat := make(latencies, n+1)
		first, all := make(chan struct{}), make(chan struct{})
		var lastAt time.Time
		stop := watch(b, taskID, func(seq int64, at time.Time) {
			if seq < 1 || seq > n {
				b.Errorf("unexpected seq %d", seq)
				return
			}
			lat[seq] = at.Sub(time.Unix(0, starts[seq].Load()))
			switch seq {
			case 1:
				close(first)
			case n:
				lastAt = at
				close(all)
			}
		})
		defer stop()
		starts[1].Store(time.Now().UnixNano())
		if _, _, err := store.AppendEvents(ctx, pool, taskID, batch); err != nil {
			b.Fatal(err)
		}
		awaitDelivery(b, first, 1)
		b.ResetTimer()
		t0 := time.Now()
		for seq := int64(2); seq <= n; seq++ {
			starts[seq].Store(time.Now().UnixNano())
			if _, last, err := store.AppendEvents(ctx, pool, taskID, batch); err != nil || last != seq {
				b.Fatalf("appending seq %d: got %d, %v", seq, last, err)
			}
		}
		appended := time.Since(t0)
		awaitDelivery(b, all, n)
		b.StopTimer()
		measured := lat[2 : n+1]
		measured.report(b, true)
		b.ReportMetric(float64(b.N)/appended.Seconds(), "events/s")
		b.ReportMetric(float64(b.N)/lastAt.Sub(t0).Seconds(), "delivered/s")
	})
}

// watchGuard bounds the wait for a delivery: a guard against a dead watch,
// not a timing assertion.
const watchGuard = time.Minute

// awaitDelivery waits until done is closed, the delivery of event seq.
func awaitDelivery(b *testing.B, done <-chan struct{}, seq int64) {
	b.Helper()
	select {
	case <-done:
	case <-time.After(watchGuard):
		b.Fatalf("event %d not delivered", seq)
	}
}

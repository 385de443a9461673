package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/bench"
	"github.com/drover-run/drover/task"
)

// P2's goal: a warm turn through drover takes at most this many milliseconds longer than the same
// turn sent straight to a warm CLI process (the median of the pairs' differences).
const p2AddedGoalMS = 15

// BenchmarkFigureTurn measures figure P2: one more text turn of a task whose CLI process is warm.
// The baseline writes the prompt to an already-initialized `claude` process over stdin (package
// claudecode) and reads until its result message. Through drover, the time runs from the prompt
// Update (taskclient.Prompt) to the turn's complete event delivered by store.Watch from the task's
// event log. Both sides use the same fake Messages API, which answers at once. The turn's commit
// and the workflow's bookkeeping after it are not timed: the next pair waits for the task to be
// idle. The row states what drover adds: the median of drover's turn minus the direct turn of
// the same pair (goal ≤ 15 ms), with the ratio beside it.
//
//	go test ./e2e -run '^$' -bench '^BenchmarkFigureTurn$' -benchtime 1x -v
func BenchmarkFigureTurn(b *testing.B) {
	e := newBenchEnv(b)
	direct := e.warmClaude()
	w := e.warmTask("p2")

	base, drover := measurePairs(b, figureRuns(b),
		func(i int) time.Duration { return direct.turn(fmt.Sprintf("direct prompt %d", i)) },
		func(i int) time.Duration {
			t0 := time.Now()
			if _, err := e.tc.Prompt(e.ctx, w.id, task.Prompt{Text: fmt.Sprintf("drover prompt %d", i)}, ""); err != nil {
				b.Fatal(err)
			}
			return w.waitNext().Sub(t0)
		})
	w.check()
	reportRows(b, addedRow("P2", "warm turn: time drover adds (prompt Update → complete event in the log, minus prompt → result on a warm CLI)",
		base, drover, bench.DroverAtMost(p2AddedGoalMS, "ms")))
}

// addedRow is a row of latencies in milliseconds whose goal bounds the time drover adds: its
// Drover is the median of the pairs' differences (drover minus baseline), its Baseline the
// median baseline; the ratio of the pairs is kept beside them, and drover's own median in the note.
func addedRow(figure, what string, base, drover []float64, goal bench.Goal) bench.Row {
	r := ratioRow(figure, what, base, drover, "ms", goal)
	added := make([]float64, len(base))
	for i := range base {
		added[i] = drover[i] - base[i]
	}
	r.Note = fmt.Sprintf("drover's turn %.1f ms (median), %.2f× the direct turn", r.Drover, r.Ratio)
	r.Drover = bench.Median(added)
	return r
}

// measurePairs runs n (baseline, drover) pairs, swapping their order from one pair to the next,
// and returns the durations of each side in milliseconds. Each function gets the pair's index.
func measurePairs(tb testing.TB, n int, baseline, drover func(i int) time.Duration) (base, drov []float64) {
	tb.Helper()
	for i := range n {
		var b, d time.Duration
		if i%2 == 0 {
			b, d = baseline(i), drover(i)
		} else {
			d, b = drover(i), baseline(i)
		}
		base, drov = append(base, ms(b)), append(drov, ms(d))
	}
	return base, drov
}

// warmProcess is a CLI process driven straight through package claudecode, past its first turn.
type warmProcess struct {
	e    *benchEnv
	proc *claudecode.Process
}

// warmClaude starts a CLI process as the worker would for a new session, runs one turn on it, and
// stops it when the benchmark ends.
func (e *benchEnv) warmClaude() *warmProcess {
	e.tb.Helper()
	p, err := startClaude(e.ctx, e.claudeCommand())
	if err != nil {
		e.tb.Fatal(err)
	}
	e.owner.Cleanup(func() { _ = p.Stop(context.Background()) })
	w := &warmProcess{e: e, proc: p}
	w.turn("warm-up prompt")
	return w
}

// turn sends prompt and returns the time until the turn's result.
func (w *warmProcess) turn(prompt string) time.Duration {
	w.e.tb.Helper()
	t0 := time.Now()
	if err := claudeTurn(w.e.ctx, w.proc, prompt); err != nil {
		w.e.tb.Fatal(err)
	}
	return time.Since(t0)
}

// warmTaskRun is a task on a worker of its own, past its first turn, whose complete events are
// watched.
type warmTaskRun struct {
	e     *benchEnv
	id    string
	turns int // the turns the task has ended
	seen  <-chan seenComplete
}

// warmTask starts a worker and a task named name on it, and waits for the task's first turn to
// end: the worker's connections, its workflow and the task's CLI process are warm after it.
func (e *benchEnv) warmTask(name string) *warmTaskRun {
	e.tb.Helper()
	e.startWorker("host-" + e.queue)
	w := &warmTaskRun{e: e, id: e.taskID(name)}
	w.seen, _ = e.completions(w.id)
	if _, err := e.tc.Start(e.ctx, w.id, e.params(), task.Prompt{Text: "warm-up prompt"}, ""); err != nil {
		e.tb.Fatal(err)
	}
	w.waitNext()
	return w
}

// waitNext waits for the complete event of the task's next turn and returns when it was
// delivered; then, untimed, it waits for the task to be idle, as the workflow answers (so that the
// workflow task that took the turn's result has completed before the next prompt).
func (w *warmTaskRun) waitNext() time.Time {
	w.e.tb.Helper()
	w.turns++
	at := w.e.waitComplete(w.seen, w.id, w.turns)
	w.e.waitIdle(w.id)
	return at
}

// waitNextRecorded is waitNext for a figure that counts the stack's CPU: it waits for the state
// the task recorded in Postgres to be idle, asking nothing of Temporal or the worker.
func (w *warmTaskRun) waitNextRecorded() {
	w.e.tb.Helper()
	w.turns++
	w.e.waitComplete(w.seen, w.id, w.turns)
	w.e.waitRecordedIdle(w.id, w.turns)
}

// check fails the benchmark unless every turn of the task completed.
func (w *warmTaskRun) check() {
	w.e.tb.Helper()
	if st := w.e.waitIdle(w.id); st.Totals.Turns != w.turns || st.Totals.FailedTurns != 0 {
		w.e.tb.Fatalf("task %s after %d turns: %+v", w.id, w.turns, st)
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/bench"
	"github.com/drover-run/drover/task"
)

// P4's sizes and goals.
const (
	p4Tasks      = 200
	p4QuickTasks = 4
	p4Turns      = 3 // per task
	p4FullPairs  = 3 // at most, in a full run
	p4QuickPairs = 2 // at most, in a quick run: one of each order
	// p4MaxTurns is the worker's --max-concurrent-turns, as set for a 2-core host: starting a CLI costs
	// about a second of CPU, and at the default (worker.DefaultMaxConcurrentTurns, 32) a host
	// this small starves its own heartbeats (docs/performance.md, P4).
	p4MaxTurns   = 8
	p4RatioGoal  = 0.8
	p4RSSGoalMiB = 150
	// p4StartsGoal bounds the CLI processes the worker starts per task: a task's queued prompts
	// run on the process its first turn started.
	p4StartsGoal = 1.05
)

// p4TasksFlag sets the number of tasks of a full run (the figure's size is p4Tasks): a smaller
// run shows the same effects of scheduling in less time.
var p4TasksFlag = flag.Int("bench.p4tasks", 0, "figure P4: the tasks of a full run (0: 200)")

// BenchmarkFigureP4 is figure P4 of `make bench`: load on one worker. Many tasks of three turns
// each are started at once (the first prompt through Update-with-Start, two more queued behind
// it) on one `drover worker` with its limits stated as flags: turns at once (--max-concurrent-turns, sized
// for a 2-core host) and CLI processes kept idle between turns (--max-idle, the default). The figure fails if a
// turn fails. The baseline, run alternately, is the same turns on bare CLIs: as many sessions,
// each a CLI driven directly over stdin for three turns, as many at once as the worker runs
// turns. Rows: turns per second through drover ÷ bare (goal ≥ 0.8); the worker's peak RSS
// (VmHWM, goal ≤ 150 MiB); the most CLI processes the worker ran at once, which its limits
// bound, with their peak total RSS; the CLI processes the worker started per task (goal ≤ 1.05;
// the bare sessions start one each).
func BenchmarkFigureP4(b *testing.B) {
	tasks := p4Tasks
	if *p4TasksFlag > 0 {
		tasks = *p4TasksFlag
	}
	if *benchQuick {
		tasks = p4QuickTasks
	}
	maxTurns, maxIdle := p4MaxTurns, engine.DefaultMaxIdle
	concurrency := min(tasks, maxTurns)
	runs := min(figureRuns(b), p4FullPairs) // a pair of full runs takes minutes
	if *benchQuick {
		runs = min(runs, p4QuickPairs)
	}
	e := newBenchEnv(b)
	// A run of 200 tasks takes minutes: the guard against a hung part covers every run.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(runs)*20*time.Minute+10*time.Minute)
	b.Cleanup(cancel)
	e.ctx = ctx
	w := e.startWorker("host-"+e.queue, "--max-concurrent-turns", strconv.Itoa(maxTurns), "--max-idle", strconv.Itoa(maxIdle))
	workerPID := w.cmd.Process.Pid

	// One task and one bare session first, so that no run pays for the worker's first workflow
	// or for the CLI binary's first start.
	warm := e.taskID("p4-warm-up")
	if _, err := e.tc.Start(e.ctx, warm, e.params(), task.Prompt{Text: "warm-up"}, ""); err != nil {
		b.Fatal(err)
	}
	e.waitAllComplete(warm, 1, nil)
	if err := e.closeTask(warm); err != nil {
		b.Fatal(err)
	}
	if err := e.bareSession("warm-up", 1); err != nil {
		b.Fatal(err)
	}

	var bareTPS, droverTPS, starts []float64
	var bareCLI, droverCLI []float64 // the CLIs' CPU per turn, ms
	var stackCPU []p5Batch           // drover's stack's CPU per turn, ms, by class
	db := dbName(e.dsn)
	var barePeakKB, barePeakProcs, cliPeakKB, cliPeakProcs int64
	bare := func() {
		sampler := sampleChildren(b, os.Getpid(), suite.claudeBin, 200*time.Millisecond)
		sem := make(chan struct{}, concurrency)
		var wg sync.WaitGroup
		errs := make([]error, tasks)
		reaped := ownReapedCPU()
		t0 := time.Now()
		for k := range tasks {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				errs[k] = e.bareSession(fmt.Sprintf("bare %d", k), p4Turns)
			})
		}
		wg.Wait()
		wall := time.Since(t0)
		bareCLI = append(bareCLI, (ownReapedCPU()-reaped)/float64(tasks*p4Turns))
		kb, procs := sampler.stop()
		for _, err := range errs {
			if err != nil {
				b.Fatalf("bare session: %v", err)
			}
		}
		barePeakKB, barePeakProcs = max(barePeakKB, kb), max(barePeakProcs, procs)
		bareTPS = append(bareTPS, float64(tasks*p4Turns)/wall.Seconds())
	}
	drover := func() {
		prefix := "p4-" + uuid.NewString()[:8] + "-"
		sampler := sampleChildren(b, workerPID, suite.claudeBin, 200*time.Millisecond)
		cpu, reaped := snapshotCPU(workerPID, db), reapedCPU(workerPID)
		t0 := time.Now()
		sent := forEachTask(tasks, prefix, func(id string) error {
			if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "prompt 1 of " + id}, ""); err != nil {
				return err
			}
			for p := 2; p <= p4Turns; p++ {
				if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: fmt.Sprintf("prompt %d of %s", p, id)}, ""); err != nil {
					return err
				}
			}
			return nil
		})
		e.waitAllComplete(prefix, tasks*p4Turns, func() error { return e.failedTurns(prefix) })
		wall := time.Since(t0)
		used := p5Batch(snapshotCPU(workerPID, db).since(cpu))
		// The CLIs that ended are counted in the worker's reaped children, with their guards.
		used[classCLI] += reapedCPU(workerPID) - reaped
		for c := range used {
			used[c] /= float64(tasks * p4Turns)
		}
		stackCPU, droverCLI = append(stackCPU, used), append(droverCLI, used[classCLI])
		kb, procs := sampler.stop()
		starts = append(starts, float64(sampler.started()))
		if err := sent(); err != nil {
			b.Fatal(err)
		}
		cliPeakKB, cliPeakProcs = max(cliPeakKB, kb), max(cliPeakProcs, procs)
		droverTPS = append(droverTPS, float64(tasks*p4Turns)/wall.Seconds())
		if err := forEachTask(tasks, prefix, e.closeTask)(); err != nil {
			b.Fatal(err)
		}
		if r := e.countRows(prefix); r.completedTurns != tasks*p4Turns {
			b.Fatalf("run %s: %d turns completed, want %d", prefix, r.completedTurns, tasks*p4Turns)
		}
	}
	b.ResetTimer()
	for i := range runs {
		if i%2 == 0 {
			bare()
			drover()
		} else {
			drover()
			bare()
		}
	}
	b.StopTimer()
	hwm := float64(procStatusKB(workerPID, "VmHWM")) / 1024

	limits := fmt.Sprintf("%d tasks × %d turns started at once; worker --max-concurrent-turns %d --max-idle %d; bare: %d sessions at once; %d pairs",
		tasks, p4Turns, maxTurns, maxIdle, concurrency, runs)
	tps := ratioRow("P4", "turns/s, many tasks on one worker (ratio: drover ÷ bare CLIs at the same concurrency)",
		bareTPS, droverTPS, "turns/s", bench.RatioAtLeast(p4RatioGoal))
	started := bench.Median(starts)
	tps.Note = fmt.Sprintf("%s; %.0f CLI starts for %d tasks; CPU per turn: the CLI %.0f ms under drover, %.0f ms bare; drover's stack %s",
		limits, started, tasks, bench.Median(droverCLI), bench.Median(bareCLI), stackParts(stackCPU))
	rows := []bench.Row{tps,
		{Figure: "P4 starts", What: "CLI processes the worker started ÷ tasks (baseline: the bare sessions, one each)",
			Unit: "processes", Baseline: float64(tasks), Drover: started, Ratio: started / float64(tasks), Runs: runs,
			Goal: bench.RatioAtMost(p4StartsGoal), Note: limits},
		{Figure: "P4 rss", What: "peak RSS of drover worker (VmHWM) through every run", Unit: "MiB",
			Drover: hwm, Runs: runs, Goal: bench.DroverAtMost(p4RSSGoalMiB, "MiB"), Note: limits},
		{Figure: "P4 clis", What: "most CLI processes under the worker at once (baseline: bare, at the same concurrency)",
			Unit: "processes", Baseline: float64(barePeakProcs), Drover: float64(cliPeakProcs), Runs: runs,
			Goal: bench.DroverAtMost(float64(maxTurns+maxIdle), "processes"),
			Note: fmt.Sprintf("their peak total RSS %.0f MiB (bare: %.0f MiB); the bound is --max-concurrent-turns + --max-idle",
				float64(cliPeakKB)/1024, float64(barePeakKB)/1024)},
	}
	reportRows(b, rows...)
}

// bareSession runs a new session on a CLI driven directly: turns prompts, each answered with
// benchReply, then the process is stopped.
func (e *benchEnv) bareSession(name string, turns int) error {
	p, err := startClaude(e.ctx, e.claudeCommand())
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer func() { _ = p.Stop(context.WithoutCancel(e.ctx)) }()
	for t := 1; t <= turns; t++ {
		if err := claudeTurn(e.ctx, p, fmt.Sprintf("prompt %d of %s", t, name)); err != nil {
			return fmt.Errorf("%s, turn %d: %w", name, t, err)
		}
	}
	return nil
}

// failedTurns returns an error naming the tasks whose id starts with prefix and whose state, as
// their workflows recorded it for the read side (Postgres), counts a failed turn, with their last
// error; nil when none does. It reads Postgres, not the workflows: a query through Temporal to each
// of 200 tasks would load the stack whose throughput the figure measures.
func (e *benchEnv) failedTurns(prefix string) error {
	rows, err := e.pool.Query(e.ctx, `SELECT task_id, state FROM tasks WHERE task_id LIKE $1 || '%' ORDER BY task_id`, prefix)
	if err != nil {
		return fmt.Errorf("reading the recorded states: %w", err)
	}
	defer rows.Close()
	var failed []string
	for rows.Next() {
		var id string
		var raw []byte
		if err := rows.Scan(&id, &raw); err != nil {
			return fmt.Errorf("reading the recorded states: %w", err)
		}
		var st task.State
		if err := json.Unmarshal(raw, &st); err != nil {
			return fmt.Errorf("the recorded state of %s: %w", id, err)
		}
		if st.Totals.FailedTurns > 0 {
			failed = append(failed, fmt.Sprintf("%s: %d failed turns, last error %q", id, st.Totals.FailedTurns, st.LastError))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading the recorded states: %w", err)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d tasks lost turns:\n%s", len(failed), strings.Join(failed, "\n"))
	}
	return nil
}

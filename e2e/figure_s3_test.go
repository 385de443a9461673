package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/bench"
	"github.com/drover-run/drover/task"
)

// S3's goal: the worker's CPU per warm turn after it has served many tasks ÷ after a few.
const s3Goal = 1.1

// s3Host is a worker and its world after it has served tasks: their rows in its database, their
// project folders in its CLI config folder, and for those it ran itself, whatever its process
// keeps of them.
type s3Host struct {
	e      *benchEnv
	worker int // the worker's pid
	warm   *warmTaskRun
	tasks  int // the tasks the database holds
	// scans are the sequential scans of each table counted before the batch; scanned those
	// counted during the batches, and turns the batches' turns.
	scans, scanned map[string]int64
	turns          int
}

// scansPerTurn describes the sequential scans of each table per turn of the batches.
func (h *s3Host) scansPerTurn() string {
	var out []string
	for name, n := range h.scanned {
		out = append(out, fmt.Sprintf("%s %.1f", name, float64(n)/float64(h.turns)))
	}
	slices.Sort(out)
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// serveTasks runs n tasks through the host's worker, four at a time, each in a workspace of its
// own (so a project folder of its own in the CLI config folder): started with a prompt, its turn
// recorded, closed.
func (e *benchEnv) serveTasks(n int, name string) {
	e.tb.Helper()
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			id := e.taskID(fmt.Sprintf("%s-%05d", name, i))
			p := e.params()
			p.Workspace = filepath.Join(filepath.Dir(e.workspace), "served", id)
			err := os.MkdirAll(p.Workspace, 0o755)
			if err == nil {
				_, err = e.tc.Start(e.ctx, id, p, task.Prompt{Text: "a served task's prompt"}, "")
			}
			if err == nil {
				e.waitRecordedIdle(id, 1)
				err = e.closeTask(id)
			}
			if err != nil {
				mu.Lock()
				failed = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed != nil {
		e.tb.Fatalf("serving %d tasks: %v", n, failed)
	}
}

// projectFolders makes a project folder for each of the n tasks of the history made by
// bench.MakeHistory, in the CLI config folder, each with its session's transcript.
func (e *benchEnv) projectFolders(n int) {
	e.tb.Helper()
	for i := range n {
		dir := filepath.Join(e.configDir, "projects", fmt.Sprintf("-srv-work-hist-%08d", i+1))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			e.tb.Fatal(err)
		}
		line := fmt.Sprintf(`{"type":"user","sessionId":"%08d-0000-4000-8000-000000000000","message":{"role":"user","content":"an old prompt"}}`+"\n", i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%08d-0000-4000-8000-000000000000.jsonl", i)), []byte(line), 0o600); err != nil {
			e.tb.Fatal(err)
		}
	}
}

// newS3Host starts a worker on a world of its own that has served tasks tasks: made of history
// tasks made directly in Postgres (with their project folders) and served tasks run through the
// worker, then a warm task of its own past its first turn.
func newS3Host(b *testing.B, tasks, served int) *s3Host {
	e := newBenchEnvFor(b, time.Hour)
	history := tasks - served - 1
	if history > 0 {
		if err := bench.MakeHistory(e.ctx, e.pool, bench.History{Finished: history, EventsPerTurn: 6}); err != nil {
			b.Fatal(err)
		}
		e.projectFolders(history)
	}
	wp := e.startWorker("host-" + e.queue)
	e.serveTasks(served, "s3-served")
	w := &warmTaskRun{e: e, id: e.taskID("s3-warm")}
	w.seen, _ = e.completions(w.id)
	if _, err := e.tc.Start(e.ctx, w.id, e.params(), task.Prompt{Text: "warm-up prompt"}, ""); err != nil {
		b.Fatal(err)
	}
	w.waitNextRecorded()
	var n int
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM tasks`).Scan(&n); err != nil || n != tasks {
		b.Fatalf("the database holds %d tasks (%v), want %d", n, err, tasks)
	}
	return &s3Host{e: e, worker: wp.cmd.Process.Pid, warm: w, tasks: n, scanned: map[string]int64{}}
}

// seqScans returns the sequential scans Postgres has counted of each of drover's tables in the
// host's database: a query of a turn that reads a table whose rows grow with the tasks served
// without an index shows here.
func (h *s3Host) seqScans() map[string]int64 {
	e := h.e
	if _, err := e.pool.Exec(e.ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		e.tb.Fatal(err)
	}
	rows, err := e.pool.Query(e.ctx, `SELECT relname, seq_scan FROM pg_stat_user_tables WHERE relname <> 'schema_migrations'`)
	if err != nil {
		e.tb.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			e.tb.Fatal(err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		e.tb.Fatal(err)
	}
	return out
}

// batch runs turns warm turns of the host's warm task and returns the CPU each class of its stack
// used per turn.
func (h *s3Host) batch(turns int) p5Batch {
	e := h.e
	db := dbName(e.dsn)
	h.scans = h.seqScans()
	before := snapshotCPU(h.worker, db)
	for i := range turns {
		if _, err := e.tc.Prompt(e.ctx, h.warm.id, task.Prompt{Text: fmt.Sprintf("s3 prompt %d", h.warm.turns+i)}, ""); err != nil {
			e.tb.Fatal(err)
		}
		h.warm.waitNextRecorded()
	}
	used := snapshotCPU(h.worker, db).since(before)
	for name, n := range h.seqScans() {
		if d := n - h.scans[name]; d > 0 {
			h.scanned[name] += d
		}
		h.scans[name] = n
	}
	h.turns += turns
	per := p5Batch{}
	for c, ms := range used {
		per[c] = ms / float64(turns)
	}
	return per
}

// BenchmarkFigureS3 is figure S3 of `make bench`: the CPU a worker process burns per warm turn
// (user and system time from /proc) once it has served 10,000 tasks, against once it has served
// 10 (under -bench.quick: 300 against 10). Each side is a world of its own (database, CLI config
// folder, worker, fake Messages API that answers at once), and the batches of warm turns of each
// side's warm task alternate, the median of the pairs' ratios being the figure. On the large side
// most tasks are made directly in Postgres, as S1 makes them, each with a project folder and a
// transcript in the CLI config folder; 100 (quick: 20) are run through the worker itself, each in
// a workspace of its own, started, its turn recorded, closed, so that its process holds whatever
// it keeps of the tasks it ran. On the small side all 10 are run through the worker.
//
//	go test ./e2e -run '^$' -bench '^BenchmarkFigureS3$' -benchtime 1x -v
func BenchmarkFigureS3(b *testing.B) {
	many, served, few, turns := 10_000, 100, 10, 10
	if *benchQuick {
		many, served, turns = 300, 20, 5
	}
	small := newS3Host(b, few, few-1)
	large := newS3Host(b, many, served)
	var smallB, largeB []p5Batch
	var ratios []float64
	for i := range figureRuns(b) {
		var s, l p5Batch
		if i%2 == 0 {
			s, l = small.batch(turns), large.batch(turns)
		} else {
			l, s = large.batch(turns), small.batch(turns)
		}
		smallB, largeB = append(smallB, s), append(largeB, l)
		ratios = append(ratios, l[classWorker]/s[classWorker])
	}
	small.warm.check()
	large.warm.check()
	worker := func(bs []p5Batch) []float64 {
		var out []float64
		for _, b := range bs {
			out = append(out, b[classWorker])
		}
		return out
	}
	row := bench.Row{Figure: "S3",
		What: fmt.Sprintf("worker CPU per warm turn, %d tasks served ÷ %d", large.tasks, small.tasks),
		Unit: "ms", Baseline: bench.Median(worker(smallB)), Drover: bench.Median(worker(largeB)),
		Ratio: bench.Median(ratios), Runs: len(ratios), Goal: bench.RatioAtMost(s3Goal),
		Note: fmt.Sprintf("%d turns a batch; large side: %d tasks made in Postgres with their project folders, %d run through the worker, 1 warm; "+
			"the whole stack per turn: %s with %d, %s with %d",
			turns, large.tasks-served-1, served, stackParts(largeB), large.tasks, stackParts(smallB), small.tasks) +
			fmt.Sprintf("; sequential scans per turn with %d: %s", large.tasks, large.scansPerTurn())}
	reportRows(b, row)
}

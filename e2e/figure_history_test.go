package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/archive"
	"github.com/drover-run/drover/internal/bench"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/taskview"
)

// Goals of the figures of a database with a long history.
const (
	s1PageGoal   = 50   // ms, p99 of one page of a listing
	s2BytesGoal  = 1024 // bytes left in Postgres per archived task
	s2AppendGoal = 0.9  // the append rate while the archive job runs ÷ without, at least
	s1Requests   = 200  // requests of each listing per run
	// The append rate is measured through s2AppendSlices slices of s2AppendSlice each, half of
	// them with the archive job at work on s2AppendTasks finished tasks (more than it archives in
	// the time).
	s2AppendSlices = 24
	s2AppendSlice  = time.Second
	s2AppendTasks  = 1000
	s1TurnGoal     = 1.1 // a warm turn with the history ÷ without, at most
)

// historyServer serves the HTTP API's reads over pool, on loopback.
func historyServer(tb testing.TB, pool *pgxpool.Pool) string {
	tb.Helper()
	view := taskview.New(pool)
	s, err := api.New(api.Config{Tasks: &taskclient.Client{DB: pool}, Reader: view,
		Decider: &taskclient.Decider{View: view}, DB: pool})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	tb.Cleanup(srv.Close)
	return srv.URL
}

// pageTimes reads n pages of each listing from base, alternating them, and returns each
// listing's times in ms: the first page of tasks, a page deep in the history (after a cursor),
// a page of failed tasks, and the inbox.
func pageTimes(tb testing.TB, base, deep string, n int) map[string][]float64 {
	tb.Helper()
	paths := map[string]string{
		"list":   "/api/v1/tasks?limit=50",
		"deep":   "/api/v1/tasks?limit=50&after=" + deep,
		"status": "/api/v1/tasks?limit=50&status=failed",
		"inbox":  "/api/v1/approvals?limit=50",
	}
	out := map[string][]float64{}
	for range n {
		for name, p := range paths {
			start := time.Now()
			resp, err := http.Get(base + p)
			if err != nil {
				tb.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				tb.Fatalf("GET %s: %s", p, resp.Status)
			}
			out[name] = append(out[name], float64(time.Since(start).Microseconds())/1000)
		}
	}
	return out
}

// p99Of is the 99th percentile of xs.
func p99Of(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[max(0, (len(s)*99+99)/100-1)]
}

// deepCursor is the cursor of the page that ends at the middle of the listing.
func deepCursor(tb testing.TB, pool *pgxpool.Pool, base string, id string) string {
	tb.Helper()
	v := taskview.New(pool)
	r, err := store.GetTask(tb.Context(), pool, id)
	if err != nil {
		tb.Fatal(err)
	}
	// A page of one that starts just before the task names the task's own cursor as its next.
	p, err := v.ListPage(tb.Context(), taskview.Filter{Limit: 1, After: ""})
	if err != nil || len(p.Tasks) == 0 {
		tb.Fatalf("the first page: %v", err)
	}
	for {
		pp, err := v.ListPage(tb.Context(), taskview.Filter{Limit: 1000, After: p.Next})
		if err != nil {
			tb.Fatal(err)
		}
		if pp.Next == "" || !pp.Tasks[len(pp.Tasks)-1].CreatedAt.After(r.CreatedAt) {
			return p.Next
		}
		p = pp
	}
}

// BenchmarkFigureS1 is figure S1 of `make bench`: a page of each listing of the HTTP API (the
// newest tasks, a page deep in the history by cursor, the failed tasks, the inbox) on a database
// holding 1,000,000 finished tasks (20,000 under -bench.quick), made directly in Postgres with
// their turns, events, executor rows and decided requests, and 100 active ones. p99 over the
// requests of each run, median over the runs. The baseline, alternated with it, is the same
// requests on a database with the 100 active tasks alone. drover task list reads the same pages
// (taskview.ListPage).
func BenchmarkFigureS1(b *testing.B) {
	finished := 1_000_000
	if *benchQuick {
		finished = 20_000
	}
	runs := figureRuns(b)
	ctx := b.Context()
	// Each database is the world of a worker too, for S1turn.
	bigEnv, emptyEnv := newBenchEnvFor(b, 3*time.Hour), newBenchEnvFor(b, 3*time.Hour)
	big, empty := bigEnv.pool, emptyEnv.pool
	start := time.Now()
	if err := bench.MakeHistory(ctx, big, bench.History{Finished: finished, Active: 100, EventsPerTurn: 2}); err != nil {
		b.Fatal(err)
	}
	made := time.Since(start)
	if err := bench.MakeHistory(ctx, empty, bench.History{Finished: 0, Active: 100, EventsPerTurn: 2}); err != nil {
		b.Fatal(err)
	}
	bigURL, emptyURL := historyServer(b, big), historyServer(b, empty)
	deepBig := deepCursor(b, big, bigURL, fmt.Sprintf("hist-%08d", finished/2))
	deepEmpty := deepCursor(b, empty, emptyURL, fmt.Sprintf("hist-%08d", 50))
	p99 := map[string][2][]float64{}
	for i := range runs {
		measure := func(drover bool) {
			url, deep, side := emptyURL, deepEmpty, 0
			if drover {
				url, deep, side = bigURL, deepBig, 1
			}
			for name, ts := range pageTimes(b, url, deep, s1Requests) {
				sides := p99[name]
				sides[side] = append(sides[side], p99Of(ts))
				p99[name] = sides
			}
		}
		measure(i%2 == 0)
		measure(i%2 != 0)
	}
	var rows []bench.Row
	for _, name := range []string{"list", "deep", "status", "inbox"} {
		what := map[string]string{"list": "GET /api/v1/tasks, the first page of 50",
			"deep":   "GET /api/v1/tasks?after=, a page of 50 half-way down the history",
			"status": "GET /api/v1/tasks?status=failed, a page of 50", "inbox": "GET /api/v1/approvals, a page of 50"}[name]
		r := ratioRow("S1 "+name, what+fmt.Sprintf(", p99 with %d finished tasks (baseline: none)", finished),
			p99[name][0], p99[name][1], "ms", bench.DroverAtMost(s1PageGoal, "ms"))
		r.Note = fmt.Sprintf("%d requests a run; the history took %s to make", s1Requests, made.Round(time.Second))
		rows = append(rows, r)
	}
	rows[0].Figure = "S1"
	rows = append(rows, s1Turn(b, bigEnv, emptyEnv, runs*s1TurnPairs, finished))
	reportRows(b, rows...)
}

// s1TurnPairs is how many pairs of warm turns S1turn measures per run of the figure.
const s1TurnPairs = 5

// s1Turn measures S1turn: a warm turn of a task on a worker whose database holds the history
// (finished finished tasks and 100 active ones) against the same turn on a worker whose database
// holds the 100 active tasks alone, in n interleaved pairs: from the prompt Update to the turn's
// complete event delivered from the log, as P2 times it.
func s1Turn(b *testing.B, bigEnv, emptyEnv *benchEnv, n, finished int) bench.Row {
	bw, ew := bigEnv.warmTask("s1turn"), emptyEnv.warmTask("s1turn")
	turn := func(w *warmTaskRun, i int) time.Duration {
		t0 := time.Now()
		if _, err := w.e.tc.Prompt(w.e.ctx, w.id, task.Prompt{Text: fmt.Sprintf("s1 prompt %d", i)}, ""); err != nil {
			b.Fatal(err)
		}
		return w.waitNext().Sub(t0)
	}
	base, drover := measurePairs(b, n,
		func(i int) time.Duration { return turn(ew, i) },
		func(i int) time.Duration { return turn(bw, i) })
	bw.check()
	ew.check()
	r := ratioRow("S1turn", fmt.Sprintf("warm turn (prompt Update → complete event in the log) with %d finished and 100 active tasks ÷ with the 100 active alone", finished),
		base, drover, "ms", bench.RatioAtMost(s1TurnGoal))
	r.Note = fmt.Sprintf("%d interleaved pairs of turns; each side a worker, CLI and fake API of its own on the database of its side", n)
	return r
}

// relationBytes is the size of drover's tables that hold tasks, with their indexes and TOAST.
func relationBytes(tb testing.TB, pool *pgxpool.Pool) float64 {
	tb.Helper()
	var n int64
	err := pool.QueryRow(tb.Context(), `SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
		AND c.relname <> 'schema_migrations'`).Scan(&n)
	if err != nil {
		tb.Fatal(err)
	}
	return float64(n)
}

// appendSlices appends events to tasks of their own from 4 writers, in batches of 10, through
// slices of time of length slice, and returns the events stored per second in the slices in which
// the archive job ran (on) and in those in which it did not (off). The job runs in every other pair
// of slices (off, on, on, off, …), so that what drifts over the run (the tables growing, a vacuum
// or a checkpoint of Postgres's own) falls on both alike; a slice in which it runs, runs passes of
// it back to back, stopped at the slice's end.
func appendSlices(tb testing.TB, pool *pgxpool.Pool, job *archive.Job, slices int, slice time.Duration, tag string) (on, off []float64) {
	tb.Helper()
	ctx, cancel := context.WithCancel(tb.Context())
	defer cancel()
	var n atomic.Int64
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	evs := make([]store.EventInput, 10)
	for i := range evs {
		evs[i] = store.EventInput{Turn: 1, Attempt: 1, Type: "assistant_text",
			Payload: []byte(`{"type":"assistant_text","text":"a line of the agent's answer, as long as a real one tends to be"}`)}
	}
	for w := range 4 {
		wg.Go(func() {
			id := fmt.Sprintf("append-%s-%d", tag, w)
			for ctx.Err() == nil {
				if _, _, err := store.AppendEvents(ctx, pool, id, evs); err != nil {
					return
				}
				n.Add(int64(len(evs)))
			}
		})
	}
	for i := range slices {
		running := i%4 == 1 || i%4 == 2
		jctx, stop := context.WithCancel(ctx)
		var jwg sync.WaitGroup
		if running {
			jwg.Go(func() {
				for jctx.Err() == nil {
					if res, err := job.Pass(jctx); err != nil || len(res.Archived)+len(res.Deleted) == 0 {
						return
					}
				}
			})
		}
		from, start := n.Load(), time.Now()
		select {
		case <-time.After(slice):
		case <-ctx.Done():
		}
		rate := float64(n.Load()-from) / time.Since(start).Seconds()
		stop()
		jwg.Wait()
		if running {
			on = append(on, rate)
		} else {
			off = append(off, rate)
		}
	}
	return on, off
}

// BenchmarkFigureS2 is figure S2 of `make bench`. Bytes: a database with 20,000 finished tasks
// (2,000 under -bench.quick) as S1 makes them (6 events a turn) is archived and deleted by the
// archive job; the bytes its tables and indexes hold after a VACUUM FULL, less those of the same
// schema holding nothing, divided by the tasks, is the figure (baseline: the bytes per task
// before archival). Append rate: 4 writers append events through 24 slices of a second; in
// every other pair of slices the archive job (with its default rest) runs passes back to back
// over finished tasks; the figure is the median rate of the slices with the job ÷ without it.
func BenchmarkFigureS2(b *testing.B) {
	finished := 20_000
	if *benchQuick {
		finished = 2_000
	}
	runs := figureRuns(b)
	ctx := b.Context()
	pool, blank := pgtest.NewPool(b), pgtest.NewPool(b)
	if err := bench.MakeHistory(ctx, pool, bench.History{Finished: finished, EventsPerTurn: 6, Prefix: "s2-"}); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "VACUUM FULL"); err != nil {
		b.Fatal(err)
	}
	if _, err := blank.Exec(ctx, "VACUUM FULL"); err != nil {
		b.Fatal(err)
	}
	before, zero := relationBytes(b, pool), relationBytes(b, blank)
	// The bytes are measured after a job that does not rest; the append rate with the job as it
	// runs in a worker (resting after each task archive.DefaultRest times as long as it took).
	job, err := archive.NewJob(pool, archive.JobConfig{Dir: b.TempDir(), Retention: time.Nanosecond, DeleteAfter: -1, Batch: 200, Rest: -1})
	if err != nil {
		b.Fatal(err)
	}
	passStart := time.Now()
	for {
		res, err := job.Pass(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Archived)+len(res.Deleted) == 0 {
			break
		}
	}
	perTask := time.Since(passStart) / time.Duration(finished)
	if _, err := pool.Exec(ctx, "VACUUM FULL"); err != nil {
		b.Fatal(err)
	}
	after := relationBytes(b, pool)
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM tasks`).Scan(&left); err != nil || left != 0 {
		b.Fatalf("%d tasks left after archival (%v)", left, err)
	}
	bytesRow := bench.Row{Figure: "S2", What: "database bytes per finished task after archival (baseline: before)",
		Unit: "B", Baseline: (before - zero) / float64(finished), Drover: max(after-zero, 0) / float64(finished),
		Runs: 1, Goal: bench.DroverAtMost(s2BytesGoal, "B"),
		Note: fmt.Sprintf("%d tasks of 2 turns, 12 events; tables and indexes after VACUUM FULL, less an empty schema's %.0f B; the job took %s a task",
			finished, zero, perTask.Round(time.Microsecond))}

	// The append rate, with and without the job at work on a fresh history each run.
	job, err = archive.NewJob(pool, archive.JobConfig{Dir: b.TempDir(), Retention: time.Nanosecond, DeleteAfter: -1, Batch: 200})
	if err != nil {
		b.Fatal(err)
	}
	var base, during, ratios []float64
	for i := range runs {
		prefix := fmt.Sprintf("s2r%d-", i)
		if err := bench.MakeHistory(ctx, pool, bench.History{Finished: s2AppendTasks, EventsPerTurn: 6, Prefix: prefix}); err != nil {
			b.Fatal(err)
		}
		on, off := appendSlices(b, pool, job, s2AppendSlices, s2AppendSlice, prefix)
		var left int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE task_id LIKE $1`, prefix+"%").Scan(&left); err != nil {
			b.Fatal(err)
		}
		if left == 0 {
			b.Fatalf("S2 append, run %d: the job ran out of tasks before the last slice; give it more", i+1)
		}
		base, during = append(base, bench.Median(off)), append(during, bench.Median(on))
		ratios = append(ratios, during[i]/base[i])
		b.Logf("S2 append, run %d: %.0f events/s without the job, %.0f with it, ratio %.3f (medians of %d slices each)",
			i+1, base[i], during[i], ratios[i], len(on))
	}
	rateRow := bench.Row{Figure: "S2 append", What: "event appends/s while the archive job runs (baseline: while it does not), ratio during ÷ without",
		Unit: "events/s", Baseline: bench.Median(base), Drover: bench.Median(during), Ratio: bench.Median(ratios),
		Runs: len(base), Goal: bench.RatioAtLeast(s2AppendGoal),
		Note: fmt.Sprintf("4 writers, batches of 10 events, through %d slices of %s, the job at work in every other pair (off, on, on, off, …); the job archives and deletes %d finished tasks, 200 a pass, its passes back to back, resting after each task %v times as long as it took (its default)",
			s2AppendSlices, s2AppendSlice, s2AppendTasks, archive.DefaultRest)}
	reportRows(b, bytesRow, rateRow)
}

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/procstat"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/worker"
)

// The harness of harness_test.go is written for *testing.T; benchmarks get the
// same world here, built for testing.TB, on the same shared suite.

// benchReply is what the fake Messages API answers to every main request of a
// benchmark: a short text.
const benchReply = "Done."

// benchEnv is one benchmark's world, like env: its own database (migrated),
// fake Messages API (always answering benchReply), task queue, CLI config
// folder and workspace.
//
// A parent benchmark owns the world and sets it up once; its sub-benchmarks,
// which the testing package runs more than once, use it through in(b), so that
// a failure stops the goroutine that runs them while what outlives one run
// (a worker, a warm CLI process) is cleaned up with the owner.
type benchEnv struct {
	world
	owner testing.TB // cleanups of what lasts
	tb    testing.TB // the running benchmark: failures, per-run cleanups
	ctx   context.Context
	pool  *pgxpool.Pool
	tc    *taskclient.Client
}

func newBenchEnv(tb testing.TB) *benchEnv {
	tb.Helper()
	return newBenchEnvFor(tb, 10*time.Minute)
}

// newBenchEnvFor is newBenchEnv bounded by guard instead of 10 minutes: for a benchmark that
// builds a large history before it measures.
func newBenchEnvFor(tb testing.TB, guard time.Duration) *benchEnv {
	tb.Helper()
	return newBenchEnvWith(tb, "bench-", guard, func(r *fa.Request) (fa.Response, bool) {
		if r.Class != fa.ClassMain {
			return fa.Response{}, false // auxiliary requests get the automatic answer
		}
		return fa.Reply(fa.Text(benchReply)), true
	})
}

// newBenchEnvWith is newBenchEnv with the fake answering through respond, its names prefixed with
// prefix, and guard bounding the whole benchmark (against a hung part, not a timing assertion).
func newBenchEnvWith(tb testing.TB, prefix string, guard time.Duration, respond func(*fa.Request) (fa.Response, bool)) *benchEnv {
	tb.Helper()
	setup(tb)
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	tb.Cleanup(cancel)
	e := &benchEnv{owner: tb, tb: tb, ctx: ctx}
	e.world = newWorld(tb, prefix, fa.Config{Responder: respond})
	pool, err := store.Connect(ctx, e.dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	if _, err := store.Migrate(ctx, pool, nil); err != nil {
		tb.Fatal(err)
	}
	e.pool = pool

	c, err := worker.Dial(ctx, suite.temporal.Address(), suite.temporal.Namespace(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	e.tc = &taskclient.Client{Temporal: c, TaskQueue: e.queue}
	return e
}

// startWorker runs `drover worker` as host executorID, with flags args,
// stopped when the owner ends.
func (e *benchEnv) startWorker(executorID string, args ...string) *workerProc {
	e.tb.Helper()
	cmd := exec.Command(suite.drover, append([]string{"worker"}, args...)...)
	cmd.Env = e.workerEnv(executorID, "info")
	return launchWorker(e.owner, e.tb, executorID, cmd)
}

// claudeCommand is the command the worker's activities would build for a new
// session of an autonomous task in the workspace (activities.command and
// childEnv applied to workerEnv).
func (e *benchEnv) claudeCommand() claudecode.Command {
	var env []string
	for _, kv := range e.workerEnv("direct", "info") {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ANTHROPIC_") || k == "CLAUDE_CONFIG_DIR" || strings.HasPrefix(k, "DROVER_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "CLAUDE_CONFIG_DIR="+e.configDir)
	return claudecode.Command{
		Path:                       suite.claudeBin,
		Dir:                        e.workspace,
		APIKey:                     testAPIKey,
		BaseURL:                    e.fake.URL(),
		Env:                        env,
		DangerouslySkipPermissions: true,
		SessionID:                  uuid.NewString(),
	}
}

// waitIdle waits until the task runs no turn and has no prompt queued.
func (e *benchEnv) waitIdle(taskID string) task.State {
	e.tb.Helper()
	st, err := e.tc.WaitIdle(e.ctx, taskID, 10*time.Millisecond)
	if err != nil {
		e.tb.Fatal(err)
	}
	return st
}

// waitRecordedIdle waits until the state the task's workflow recorded for the read side (its row
// in Postgres) shows it idle after turns turns, and returns that state. waitIdle asks the workflow
// itself, a query through Temporal and the worker every 10 ms: a figure that counts the CPU of
// the Temporal server and the worker waits with this instead, so that its own looking is not
// counted as the stack's work. (Its reads cost the database's backend a few microseconds each.)
func (e *benchEnv) waitRecordedIdle(taskID string, turns int) task.State {
	e.tb.Helper()
	for {
		var raw []byte
		err := e.pool.QueryRow(e.ctx, `SELECT state FROM tasks WHERE task_id = $1`, taskID).Scan(&raw)
		var st task.State
		if err == nil && json.Unmarshal(raw, &st) == nil && st.Totals.Turns >= turns && st.RunningTurn == 0 &&
			len(st.Pending) == 0 && st.Status != task.StatusRunning {
			return st
		}
		select {
		case <-e.ctx.Done():
			e.tb.Fatalf("task %s: waiting for its recorded state to be idle after %d turns: %v (last read: %v)", taskID, turns, e.ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// closeTask closes the task and waits for its workflow to end (its CLI
// process is stopped by then).
func (e *benchEnv) closeTask(taskID string) error {
	if err := e.tc.Close(e.ctx, taskID); err != nil {
		return err
	}
	if err := e.tc.Temporal.GetWorkflow(e.ctx, taskID, "").Get(e.ctx, nil); err != nil {
		return fmt.Errorf("task %s ended with %w", taskID, err)
	}
	return nil
}

// seenComplete is a complete event of the main agent, and when Watch
// delivered it.
type seenComplete struct {
	turn int
	at   time.Time
}

// completions watches the task's log from its start and sends every complete
// event of the main agent. stop ends the watch and waits for it.
func (e *benchEnv) completions(taskID string) (seen <-chan seenComplete, stop func()) {
	ctx, cancel := context.WithCancel(e.ctx)
	ch := make(chan seenComplete, 64)
	done := make(chan error, 1)
	go func() {
		done <- store.Watch(ctx, e.pool, store.WatchConfig{TaskID: taskID}, func(ev store.Event) error {
			if ev.Type != string(events.TypeComplete) {
				return nil
			}
			at := time.Now()
			var agent events.AgentEvent
			if err := json.Unmarshal(ev.Payload, &agent); err != nil {
				return err
			}
			if agent.ParentToolCallID != "" {
				return nil
			}
			select {
			case ch <- seenComplete{turn: ev.Turn, at: at}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && ctx.Err() == nil {
				e.tb.Errorf("watching task %s: %v", taskID, err)
			}
		})
	}
	e.tb.Cleanup(stop)
	return ch, stop
}

// waitComplete waits for the complete event of the turn and returns when it
// was delivered. A turn committed as completed whose complete event is still
// not delivered 5s later fails the benchmark: an event lost.
func (e *benchEnv) waitComplete(seen <-chan seenComplete, taskID string, turn int) time.Time {
	e.tb.Helper()
	check := time.NewTicker(500 * time.Millisecond)
	defer check.Stop()
	var committed time.Time
	for {
		select {
		case c := <-seen:
			if c.turn == turn {
				return c.at
			}
			if c.turn > turn {
				e.tb.Fatalf("task %s: complete of turn %d before that of turn %d", taskID, c.turn, turn)
			}
		case <-check.C:
			rec, err := store.GetTurn(e.ctx, e.pool, taskID, turn)
			switch {
			case err != nil || rec.Status != task.TurnCompleted:
			case committed.IsZero():
				committed = time.Now()
			case time.Since(committed) > 5*time.Second:
				e.tb.Fatalf("task %s: turn %d is committed as completed but its complete event is not in the log:\n%s",
					taskID, turn, e.turnReport(taskID))
			}
		case <-e.ctx.Done():
			e.tb.Fatalf("task %s: no complete event for turn %d: %v\n%s", taskID, turn, e.ctx.Err(), e.turnReport(taskID))
		}
	}
}

// startClaude starts cmd as the activities do (own process group, dying with
// this process) and sends initialize.
func startClaude(ctx context.Context, cmd claudecode.Command) (*claudecode.Process, error) {
	c, err := cmd.Build(ctx)
	if err != nil {
		return nil, err
	}
	c.SysProcAttr.Pdeathsig = syscall.SIGKILL
	p, err := claudecode.Start(ctx, c, claudecode.ProcessConfig{})
	if err != nil {
		return nil, err
	}
	if _, err := p.Client().Initialize(ctx, claudecode.InitializeRequest{}); err != nil {
		_ = p.Stop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("initializing claude: %w (stderr: %s)", err, strings.Join(p.Stderr(), " | "))
	}
	return p, nil
}

// claudeTurn sends a prompt with its own uuid, as RunTurn does, and reads
// until the turn's result, which must be a success carrying benchReply.
func claudeTurn(ctx context.Context, p *claudecode.Process, prompt string) error {
	if err := p.Client().SendUser(ctx, claudecode.Prompt{Text: prompt, UUID: uuid.NewString()}); err != nil {
		return fmt.Errorf("sending the prompt: %w", err)
	}
	for {
		msg, err := p.Recv(ctx)
		if err != nil {
			return fmt.Errorf("reading claude: %w (stderr: %s)", err, strings.Join(p.Stderr(), " | "))
		}
		if r, ok := msg.(*claudecode.ResultMessage); ok {
			if r.IsError || r.Subtype != "success" || r.Result != benchReply {
				return fmt.Errorf("turn ended with %s (is_error %v): %q", r.Subtype, r.IsError, r.Result)
			}
			return nil
		}
	}
}

// latencies collects per-iteration durations and reports their mean and
// percentiles.
type latencies []time.Duration

// percentile is the nearest-rank p-th percentile.
func (l latencies) percentile(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// procStatusKB reads a "Name:   123 kB" field of /proc/<pid>/status, in kB;
// 0 when the process or the field is gone.
func procStatusKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != field {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		return n
	}
	return 0
}

// descendants returns the pids of every live process below pid.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, ent := range entries {
		p, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if pp := procPPid(p); pp > 0 {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// procPPid is the parent pid of pid, from /proc/<pid>/stat; 0 if unknown.
func procPPid(pid int) int {
	f, _, ok := procstat.Fields(pid) // state, ppid, …
	if !ok || len(f) < 2 {
		return 0
	}
	pp, _ := strconv.Atoi(f[1])
	return pp
}

// forEachTask runs fn for the tasks prefix00, prefix01, … at once and returns
// a function that waits for them all and returns the first error.
func forEachTask(n int, prefix string, fn func(taskID string) error) (wait func() error) {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for k := range n {
		wg.Go(func() { errs[k] = fn(fmt.Sprintf("%s%02d", prefix, k)) })
	}
	return func() error {
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// waitAllComplete polls every 100ms until the tasks whose id starts with
// prefix have want complete events of the main agent between them (its counts
// scan the tasks' events: at every 10ms, with hundreds of tasks, they loaded the
// Postgres whose throughput P4 measures; a run lasts minutes). It fails
// on a turn that failed for good, and on a turn committed as completed whose
// complete event is still not in the log 5s later: an event lost. A turn that
// never ran has no record in Postgres: when check is not nil, it is called
// every 10s and an error it returns (such a turn, seen in the tasks' state)
// fails too.
func (e *benchEnv) waitAllComplete(prefix string, want int, check func() error) {
	e.tb.Helper()
	var allCommitted time.Time
	lastCheck := time.Now()
	for {
		if check != nil && time.Since(lastCheck) > 10*time.Second {
			if err := check(); err != nil {
				e.tb.Fatalf("tasks %s*: %v", prefix, err)
			}
			lastCheck = time.Now()
		}
		var completes, committed, failed int
		err := e.pool.QueryRow(e.ctx, `
			SELECT
				(SELECT count(*) FROM task_events WHERE task_id LIKE $1 || '%' AND type = $2
					AND coalesce(payload->>'parent_tool_call_id', '') = ''),
				(SELECT count(*) FROM task_turns WHERE task_id LIKE $1 || '%' AND status = 'completed'),
				(SELECT count(*) FROM task_turns WHERE task_id LIKE $1 || '%' AND status = 'failed')`,
			prefix, string(events.TypeComplete)).Scan(&completes, &committed, &failed)
		switch {
		case err != nil:
			e.tb.Fatalf("counting complete events: %v", err)
		case failed > 0:
			e.tb.Fatalf("%d turns of %s* failed:\n%s", failed, prefix, e.turnReport(prefix))
		case completes >= want:
			return
		case committed >= want && allCommitted.IsZero():
			allCommitted = time.Now()
		case !allCommitted.IsZero() && time.Since(allCommitted) > 5*time.Second:
			e.tb.Fatalf("every turn of %s* is committed, but the log holds %d complete events for %d turns:\n%s",
				prefix, completes, want, e.turnReport(prefix))
		}
		select {
		case <-e.ctx.Done():
			e.tb.Fatalf("%d of %d turns of %s* complete: %v\n%s", completes, want, prefix, e.ctx.Err(), e.turnReport(prefix))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// turnReport describes, for each turn of the tasks whose id starts with
// prefix that lacks a complete event or did not complete, its record and the
// types of its logged events by attempt.
func (e *benchEnv) turnReport(prefix string) string {
	ctx := context.WithoutCancel(e.ctx)
	rows, err := e.pool.Query(ctx, `
		SELECT t.task_id, t.turn, t.status, t.attempts, t.error,
			coalesce((SELECT string_agg(ev.attempt || ':' || ev.type, ' ' ORDER BY ev.seq)
				FROM task_events ev WHERE ev.task_id = t.task_id AND ev.turn = t.turn), '')
		FROM task_turns t
		WHERE t.task_id LIKE $1 || '%' AND (t.status <> 'completed' OR NOT EXISTS (
			SELECT 1 FROM task_events ev WHERE ev.task_id = t.task_id AND ev.turn = t.turn AND ev.type = $2))
		ORDER BY t.task_id, t.turn`, prefix, string(events.TypeComplete))
	if err != nil {
		return fmt.Sprintf("(report unavailable: %v)", err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, status, errText, evs string
		var turn, attempts int
		if err := rows.Scan(&id, &turn, &status, &attempts, &errText, &evs); err != nil {
			return fmt.Sprintf("(report unavailable: %v)", err)
		}
		fmt.Fprintf(&b, "  %s turn %d: %s after %d attempts %q; events (attempt:type): %s\n", id, turn, status, attempts, errText, evs)
	}
	return b.String()
}

// rowCounts are the rows some tasks left in Postgres.
type rowCounts struct {
	events, turns, executors, completedTurns int
}

// countRows counts the rows of the tasks whose id starts with prefix.
func (e *benchEnv) countRows(prefix string) rowCounts {
	e.tb.Helper()
	var r rowCounts
	err := e.pool.QueryRow(e.ctx, `
		SELECT
			(SELECT count(*) FROM task_events WHERE task_id LIKE $1 || '%'),
			(SELECT count(*) FROM task_turns WHERE task_id LIKE $1 || '%'),
			(SELECT count(*) FROM executors_running WHERE task_id LIKE $1 || '%'),
			(SELECT count(*) FROM task_turns WHERE task_id LIKE $1 || '%' AND status = 'completed')`,
		prefix).Scan(&r.events, &r.turns, &r.executors, &r.completedTurns)
	if err != nil {
		e.tb.Fatalf("counting rows: %v", err)
	}
	var byType string
	err = e.pool.QueryRow(e.ctx, `
		SELECT coalesce(string_agg(type || ' ' || n, ', ' ORDER BY type), '')
		FROM (SELECT type, count(*) AS n FROM task_events WHERE task_id LIKE $1 || '%' GROUP BY type) t`,
		prefix).Scan(&byType)
	if err != nil {
		e.tb.Fatalf("counting events by type: %v", err)
	}
	e.tb.Logf("rows of %s*: task_events %d (%s), task_turns %d, executors_running %d",
		prefix, r.events, byType, r.turns, r.executors)
	return r
}

// childSampler samples the processes below a pid that run one executable
// (their summed RSS and their count) and keeps the peaks.
type childSampler struct {
	done     chan struct{}
	finished chan struct{}
	once     sync.Once
	peakKB   int64
	maxProcs int64
	// seen holds every process sampled, by pid and start time: how many were started.
	seen map[[2]int64]struct{}
}

// sampleChildren starts sampling, every interval, the processes below pid
// whose executable is exe (every process below pid when exe is empty), until
// stop or the end of tb. Each sample reads all of /proc: keep the interval
// long enough that sampling does not load the machine being measured.
func sampleChildren(tb testing.TB, pid int, exe string, interval time.Duration) *childSampler {
	if exe != "" {
		if resolved, err := filepath.EvalSymlinks(exe); err == nil {
			exe = resolved
		}
	}
	s := &childSampler{done: make(chan struct{}), finished: make(chan struct{}), seen: map[[2]int64]struct{}{}}
	go func() {
		defer close(s.finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			var sum, n int64
			for _, c := range descendants(pid) {
				if exe != "" {
					if path, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", c)); err != nil || path != exe {
						continue
					}
				}
				if kb := procStatusKB(c, "VmRSS"); kb > 0 {
					sum += kb
					n++
					s.seen[[2]int64{int64(c), procStartTime(c)}] = struct{}{}
				}
			}
			s.peakKB, s.maxProcs = max(s.peakKB, sum), max(s.maxProcs, n)
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	}()
	tb.Cleanup(func() { s.stop() })
	return s
}

// started ends the sampling and returns how many distinct processes it saw: a process lives
// for a turn at least, far longer than the sampling interval.
func (s *childSampler) started() int {
	s.stop()
	return len(s.seen)
}

// procStartTime is when process pid started, in clock ticks since boot (0 when unknown): with
// the pid, it names the process even if the pid is used again.
func procStartTime(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis: state is field 3, starttime 22.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseInt(f[19], 10, 64)
	return v
}

// stop ends the sampling and returns the peak summed RSS in kB and the most
// processes seen at once.
func (s *childSampler) stop() (peakKB, maxProcs int64) {
	s.once.Do(func() { close(s.done) })
	<-s.finished
	return s.peakKB, s.maxProcs
}

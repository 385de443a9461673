package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/bench"
	fa "github.com/drover-run/drover/internal/offlinemodel"
)

// Figures A1 and A2 of `make bench`: the HTTP API of one `drover serve` under the load that
// stopped it before. A1: many open event streams, idle or following a live task, while a client
// reads a task. A2: a burst of creations while the only worker is busy.

// benchServe is a `drover serve` process of a benchmark.
type benchServe struct {
	url    string
	pid    int
	client *http.Client
}

// startServe runs `drover serve` on a free loopback port for the benchmark's world, until the
// owner ends.
func (e *benchEnv) startServe() *benchServe {
	e.tb.Helper()
	cmd := exec.Command(suite.drover, "serve", "--listen", "127.0.0.1:0")
	cmd.Env = append(e.workerEnv("api", "warn"), "DROVER_API_TOKENS=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.tb.Fatal(err)
	}
	log := &lockedBuffer{}
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		e.tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	e.owner.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if e.owner.Failed() {
			e.owner.Logf("drover serve log:\n%s", log.String())
		}
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "drover api listening on "); ok {
				urls <- strings.Fields(rest)[0]
			}
		}
	}()
	s := &benchServe{pid: cmd.Process.Pid, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	select {
	case s.url = <-urls:
	case <-done:
		e.tb.Fatalf("drover serve exited:\n%s", log.String())
	case <-e.ctx.Done():
		e.tb.Fatalf("drover serve did not listen:\n%s", log.String())
	}
	return s
}

// call sends one request and returns its status and body.
func (s *benchServe) call(ctx context.Context, method, path, body string, header ...string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// create creates the task id with prompt and returns the answer's status.
func (s *benchServe) create(ctx context.Context, id, prompt, workspace string) (int, []byte, error) {
	body := fmt.Sprintf(`{"id":%q,"prompt":%q,"workspace":%q}`, id, prompt, workspace)
	return s.call(ctx, "POST", "/api/v1/tasks", body, "Idempotency-Key", "key-"+id)
}

// follower is one open event stream: it counts what it reads until its context ends.
type follower struct {
	opened chan struct{} // closed once the stream's preamble came
	last   atomic.Int64  // the seq of the last event read
	err    error
	done   chan struct{}
}

// follow opens the event stream of the task after seq after.
func (s *benchServe) follow(ctx context.Context, taskID string, after int64) *follower {
	f := &follower{opened: make(chan struct{}), done: make(chan struct{})}
	f.last.Store(after)
	go func() {
		defer close(f.done)
		req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/api/v1/tasks/"+taskID+"/events", nil)
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
		resp, err := http.DefaultTransport.RoundTrip(req) // a connection of its own
		if err != nil {
			f.err = err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			f.err = fmt.Errorf("events of %s: %d", taskID, resp.StatusCode)
			return
		}
		br := bufio.NewReader(resp.Body)
		once := sync.Once{}
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				if ctx.Err() == nil {
					f.err = err
				}
				return
			}
			once.Do(func() { close(f.opened) })
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "id: "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				f.last.Store(n)
			}
		}
	}()
	return f
}

// lastSeq is the seq of the task's last event in the log.
func (e *benchEnv) lastSeq(taskID string) int64 {
	e.tb.Helper()
	var n int64
	if err := e.pool.QueryRow(e.ctx, `SELECT coalesce(max(seq), 0) FROM task_events WHERE task_id = $1`, taskID).Scan(&n); err != nil {
		e.tb.Fatal(err)
	}
	return n
}

// readLatencies reads the task n times, one after the other, and returns each read's time and
// the highest RSS of the server meanwhile, in MiB.
func (s *benchServe) readLatencies(tb testing.TB, ctx context.Context, taskID string, n int) (latencies, float64) {
	tb.Helper()
	var lat latencies
	var rss int64
	for range n {
		start := time.Now()
		status, body, err := s.call(ctx, "GET", "/api/v1/tasks/"+taskID, "")
		lat = append(lat, time.Since(start))
		if err != nil || status != 200 {
			tb.Fatalf("GET task %s: %d %s %v", taskID, status, body, err)
		}
		rss = max(rss, procStatusKB(s.pid, "VmRSS"))
		time.Sleep(10 * time.Millisecond) // a reader's pace, not a measurement
	}
	return lat, float64(rss) / 1024
}

// BenchmarkFigureA1 reports figure A1: with 1,000 idle event streams and 100 following a live
// task open on one `drover serve`, the p99 of GET /api/v1/tasks/{id} (goal ≤ 100 ms) and the
// server's RSS (goal ≤ 200 MiB); the baseline is the same reads with no stream open. Every
// follower of the live task must reach the log's last event (Postgres is the witness).
func BenchmarkFigureA1(b *testing.B) {
	idle, live, reads := 1000, 100, 300
	if *benchQuick {
		idle, live, reads = 50, 10, 30
	}
	e := newBenchEnvWith(b, "bench-a1-", 20*time.Minute, func(r *fa.Request) (fa.Response, bool) {
		if r.Class != fa.ClassMain {
			return fa.Response{}, false
		}
		return fa.Reply(fa.Text(benchReply)), true
	})
	e.startWorker("host-" + e.queue)
	s := e.startServe()
	quiet, busy := e.taskID("a1-quiet"), e.taskID("a1-live")
	for _, id := range []string{quiet, busy} {
		if status, body, err := s.create(e.ctx, id, "say done", e.workspace); err != nil || status != 201 {
			b.Fatalf("creating %s: %d %s %v", id, status, body, err)
		}
		e.waitIdle(id)
	}
	// The live task: one prompt after another while the benchmark runs.
	liveCtx, stopLive := context.WithCancel(e.ctx)
	liveDone := make(chan struct{})
	go func() {
		defer close(liveDone)
		for i := 0; liveCtx.Err() == nil; i++ {
			status, _, err := s.call(liveCtx, "POST", "/api/v1/tasks/"+busy+"/prompts", fmt.Sprintf(`{"text":"again %d"}`, i))
			if err != nil || status != 202 {
				return
			}
			_, _ = e.tc.WaitIdle(liveCtx, busy, 20*time.Millisecond)
		}
	}()

	b.ResetTimer()
	baseLat, baseRSS := s.readLatencies(b, e.ctx, busy, reads)
	streamsCtx, closeStreams := context.WithCancel(e.ctx)
	var followers []*follower
	quietAfter := e.lastSeq(quiet)
	for range idle {
		followers = append(followers, s.follow(streamsCtx, quiet, quietAfter))
	}
	for range live {
		followers = append(followers, s.follow(streamsCtx, busy, 0))
	}
	for i, f := range followers {
		select {
		case <-f.opened:
		case <-f.done:
			b.Fatalf("stream %d ended before it opened: %v", i, f.err)
		}
	}
	lat, rss := s.readLatencies(b, e.ctx, busy, reads)
	b.StopTimer()

	stopLive()
	<-liveDone
	e.waitIdle(busy)
	want := e.lastSeq(busy)
	for i, f := range followers[idle:] {
		for f.last.Load() < want { // the stream delivers the log's end; a hang ends with the guard
			select {
			case <-f.done:
				b.Fatalf("live stream %d ended at seq %d of %d: %v", i, f.last.Load(), want, f.err)
			case <-e.ctx.Done():
				b.Fatalf("live stream %d stuck at seq %d of %d", i, f.last.Load(), want)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	closeStreams()
	note := fmt.Sprintf("%d idle + %d live streams; %d reads a side; the live task reached seq %d", idle, live, reads, want)
	reportRows(b,
		bench.Row{Figure: "A1", What: "GET /api/v1/tasks/{id} with the streams open, p99", Unit: "ms",
			Baseline: ms(baseLat.percentile(99)), Drover: ms(lat.percentile(99)), Runs: 1,
			Goal: bench.DroverAtMost(100, "ms"), Note: note},
		bench.Row{Figure: "A1 rss", What: "drover serve's RSS with the streams open", Unit: "MiB",
			Baseline: baseRSS, Drover: rss, Runs: 1, Goal: bench.DroverAtMost(200, "MiB"), Note: note})
}

// BenchmarkFigureA2 reports figure A2: 200 creations over 20 s (one every 100 ms) while the only
// worker runs a turn that does not end: every creation must be answered 201, and the p99 of
// their answers is the figure (goal ≤ 1 s); the baseline is 20 creations with the worker idle.
// Once the busy turn is let go, each creation's first prompt must reach the fake Messages API
// exactly once (its record of requests is the witness).
func BenchmarkFigureA2(b *testing.B) {
	n, every := 200, 100*time.Millisecond
	if *benchQuick {
		n = 20
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	e := newBenchEnvWith(b, "bench-a2-", 30*time.Minute, func(r *fa.Request) (fa.Response, bool) {
		if r.Class != fa.ClassMain {
			return fa.Response{}, false
		}
		if strings.Contains(r.LastUserText(), "stay busy") {
			<-release
		}
		return fa.Reply(fa.Text(benchReply)), true
	})
	b.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	// A worker as a small host runs one: a few turns at once, no CLI kept waiting after its turn.
	e.startWorker("host-"+e.queue, "--max-concurrent-turns", "4", "--keep-alive", "-1s")
	s := e.startServe()

	burst := func(prefix string, count int) (latencies, []string) {
		var mu sync.Mutex
		var lat latencies
		var wg sync.WaitGroup
		prompts := make([]string, count)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := range count {
			id := e.taskID(fmt.Sprintf("%s%03d", prefix, i))
			prompts[i] = "first prompt of " + id
			wg.Go(func() {
				start := time.Now()
				status, body, err := s.create(e.ctx, id, prompts[i], e.workspace)
				d := time.Since(start)
				if err != nil || status != 201 {
					b.Errorf("creating %s: %d %s %v", id, status, body, err)
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			})
			<-tick.C
		}
		wg.Wait()
		return lat, prompts
	}
	baseLat, basePrompts := burst("a2-idle-", 20)
	e.waitAllComplete("a2-idle-", len(basePrompts), nil)

	if status, body, err := s.create(e.ctx, e.taskID("a2-busy"), "stay busy", e.workspace); err != nil || status != 201 {
		b.Fatalf("creating the busy task: %d %s %v", status, body, err)
	}
	for !e.fakeAsked("stay busy") { // the worker is busy once the model is asked
		time.Sleep(20 * time.Millisecond)
	}
	b.ResetTimer()
	lat, prompts := burst("a2-load-", n)
	b.StopTimer()
	if b.Failed() {
		b.FailNow()
	}
	releaseOnce.Do(func() { close(release) })
	e.waitAllComplete("a2-load-", n, nil)
	for _, p := range prompts {
		if got := e.fakeCount(p); got != 1 {
			b.Errorf("the model was asked %q %d times, want once", p, got)
		}
	}
	reportRows(b, bench.Row{Figure: "A2", What: fmt.Sprintf("%d creations over %s with the worker busy: answer, p99", n, time.Duration(n)*every),
		Unit: "ms", Baseline: ms(baseLat.percentile(99)), Drover: ms(lat.percentile(99)), Runs: 1,
		Goal: bench.DroverAtMost(1000, "ms"),
		Note: fmt.Sprintf("all %d answered 201; p50 %.0f ms; every first prompt reached the model once", n, ms(lat.percentile(50)))})
}

// fakeAsked reports whether a main request of the fake carried prompt.
func (e *benchEnv) fakeAsked(prompt string) bool { return e.fakeCount(prompt) > 0 }

// fakeCount is the number of main requests of the fake that asked prompt: whose last user
// message carries it (the turn's first request, for a turn that calls no tool).
func (e *benchEnv) fakeCount(prompt string) int {
	n := 0
	for _, r := range e.fake.MainRequests() {
		if strings.Contains(r.LastUserText(), prompt) {
			n++
		}
	}
	return n
}

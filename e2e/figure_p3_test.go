package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/bench"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
)

// P3's goals.
const (
	p3P99GoalMS   = 50 // fake API delta → `drover task watch` stdout, p99
	p3ShareGoalMS = 10 // drover's part of the p50: end to end minus the CLI's own part
	// p3RowsGoal bounds the message_chunk rows of an answer streamed in one burst, as a
	// fraction of its deltas: the event log writes what queued while its last write was in
	// flight as one row, so a burst costs a few writes, not a row per delta.
	p3RowsGoal = 0.1
)

// BenchmarkFigureP3 is figure P3 of `make bench`, the live path of streamed text. The fake
// Messages API streams an answer of text deltas a fixed gap apart and notes when it flushed each
// one; the latency of a delta is the time from there to the line of a running `drover task
// watch --output json TASK` that prints its text (drover: the worker's CLI, the adapter, the event log in
// Postgres, its notification, the watch process). The baseline is the CLI's own part: the same
// answer to a CLI driven directly, timed to the stream_event line it prints for the delta. The
// two run alternately. Rows: p50 and p99 end to end (goal p99 ≤ 50 ms); drover's share, the
// pairs' end-to-end p50 minus the CLI's p50 (goal ≤ 10 ms); and the rows an answer streamed in
// one burst adds to task_events, against its deltas.
func BenchmarkFigureP3(b *testing.B) {
	deltas, gap, burst := 100, 20*time.Millisecond, 400
	if *benchQuick {
		deltas, gap, burst = 25, 10*time.Millisecond, 100
	}
	runs := figureRuns(b)
	e := newBenchEnv(b)
	e.startWorker("host-" + e.queue)

	id := e.taskID("p3")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "warm-up prompt"}, ""); err != nil {
		b.Fatal(err)
	}
	e.waitIdle(id)
	turns := 1
	w := e.startTextWatch(id)

	cmd := e.claudeCommand()
	cmd.IncludePartialMessages = true // as the worker runs it
	direct, err := startClaude(e.ctx, cmd)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = direct.Stop(context.Background()) })
	if err := claudeTurn(e.ctx, direct, "warm-up prompt"); err != nil {
		b.Fatal(err)
	}

	var cliP50, cliP99, droverP50, droverP99, shares []float64
	b.ResetTimer()
	for i := range runs {
		baseline := func() {
			a := newPacedAnswer(fmt.Sprintf("c%03d", i), deltas)
			e.fake.Enqueue(a.response(gap))
			lat := a.latencies(b, directTextTurn(e.ctx, b, direct, a.tokens))
			cliP50, cliP99 = append(cliP50, ms(lat.percentile(50))), append(cliP99, ms(lat.percentile(99)))
		}
		drover := func() {
			a := newPacedAnswer(fmt.Sprintf("d%03d", i), deltas)
			e.fake.Enqueue(a.response(gap))
			if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "stream " + a.run}, ""); err != nil {
				b.Fatal(err)
			}
			lat := a.latencies(b, w.await(b, a.tokens))
			droverP50, droverP99 = append(droverP50, ms(lat.percentile(50))), append(droverP99, ms(lat.percentile(99)))
			turns++
			if st := e.waitIdle(id); st.Totals.Turns != turns || st.Totals.FailedTurns != 0 {
				b.Fatalf("task state after %d turns: %+v", turns, st)
			}
		}
		if i%2 == 0 {
			baseline()
			drover()
		} else {
			drover()
			baseline()
		}
		shares = append(shares, droverP50[i]-cliP50[i])
	}

	// Rows per answer: answers streamed in one burst (no gap), as fast as the fake, the CLI and
	// the adapter go.
	var chunkRows, deltaCounts []float64
	for i := range runs {
		a := newPacedAnswer(fmt.Sprintf("b%03d", i), burst)
		e.fake.Enqueue(a.response(0))
		if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "burst " + a.run}, ""); err != nil {
			b.Fatal(err)
		}
		turns++
		if st := e.waitIdle(id); st.Totals.Turns != turns || st.Totals.FailedTurns != 0 {
			b.Fatalf("task state after %d turns: %+v", turns, st)
		}
		var rows int
		var text string
		err := e.pool.QueryRow(e.ctx, `
			SELECT count(*), coalesce(string_agg(payload->>'text', '' ORDER BY seq), '')
			FROM task_events WHERE task_id = $1 AND turn = $2 AND type = $3
				AND coalesce(payload->>'parent_tool_call_id', '') = ''`,
			id, turns, string(events.TypeMessageChunk)).Scan(&rows, &text)
		if err != nil {
			b.Fatal(err)
		}
		if text != a.text {
			b.Fatalf("burst %d: the log's streamed text differs from the answer:\n got %q\nwant %q", i, text, a.text)
		}
		chunkRows, deltaCounts = append(chunkRows, float64(rows)), append(deltaCounts, float64(burst))
	}
	b.StopTimer()

	note := fmt.Sprintf("%d deltas %v apart per answer, one task on one worker; baseline: the same answer to a CLI driven directly, to its stream_event line", deltas, gap)
	p99 := ratioRow("P3 p99", "fake API text delta → drover task watch prints it, p99 (baseline: CLI prints it)",
		cliP99, droverP99, "ms", bench.DroverAtMost(p3P99GoalMS, "ms"))
	p99.Note = note
	p50 := ratioRow("P3 p50", "fake API text delta → drover task watch prints it, p50 (baseline: CLI prints it)",
		cliP50, droverP50, "ms", bench.DroverAtMost(p3P99GoalMS, "ms"))
	p50.Note = note
	share := bench.Row{Figure: "P3 share", What: "drover's part of the p50: end to end minus the CLI's part (baseline: the CLI's part)",
		Unit: "ms", Baseline: bench.Median(cliP50), Drover: bench.Median(shares), Runs: runs,
		Goal: bench.DroverAtMost(p3ShareGoalMS, "ms"),
		Note: fmt.Sprintf("p99 end to end minus the CLI's p99: %.1f ms", bench.Median(droverP99)-bench.Median(cliP99))}
	rows := bench.Row{Figure: "P3 rows", What: "task_events rows of an answer streamed in one burst (baseline: its deltas)",
		Unit: "rows", Baseline: bench.Median(deltaCounts), Drover: bench.Median(chunkRows), Runs: runs,
		Goal: bench.DroverAtMost(p3RowsGoal*float64(burst), "rows"),
		Note: fmt.Sprintf("message_chunk rows; a gap of %v between deltas gives a row per delta", gap)}
	reportRows(b, p50, p99, share, rows)
}

// pacedAnswer is an answer of text deltas, each a distinct token of one delta's length (the
// fake cuts text into 12-rune deltas), and when the fake sent each one.
type pacedAnswer struct {
	run    string
	tokens []string
	text   string

	mu   sync.Mutex
	sent map[string]time.Time
}

// tokenPattern matches the tokens of pacedAnswer: run, then the delta's number.
var tokenPattern = regexp.MustCompile(`[a-z][0-9]{3}-[0-9]{5}`)

func newPacedAnswer(run string, n int) *pacedAnswer {
	a := &pacedAnswer{run: run, sent: map[string]time.Time{}}
	var text strings.Builder
	for k := range n {
		tok := fmt.Sprintf("%s-%05d", run, k) // 10 runes, then ", " ends the delta
		a.tokens = append(a.tokens, tok)
		text.WriteString(tok + ", ")
	}
	a.text = text.String()
	return a
}

// response streams the answer with gap before every event, noting when each delta is sent.
func (a *pacedAnswer) response(gap time.Duration) fa.Response {
	return fa.Reply(fa.Text(a.text)).WithDelay(gap).WithDeltaSent(func(text string) {
		at := time.Now()
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, tok := range tokenPattern.FindAllString(text, -1) {
			a.sent[tok] = at
		}
	})
}

// latencies are, for each token, the time from its sending to seen[token].
func (a *pacedAnswer) latencies(tb testing.TB, seen map[string]time.Time) latencies {
	tb.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(latencies, 0, len(a.tokens))
	for _, tok := range a.tokens {
		s, ok1 := a.sent[tok]
		r, ok2 := seen[tok]
		if !ok1 || !ok2 {
			tb.Fatalf("answer %s: token %s sent %v, seen %v", a.run, tok, ok1, ok2)
		}
		out = append(out, r.Sub(s))
	}
	return out
}

// directTextTurn sends a prompt to the CLI p (which runs with --include-partial-messages) and
// reads until the turn's result, noting when the stream_event line of each text delta holding
// one of tokens was read.
func directTextTurn(ctx context.Context, tb testing.TB, p *claudecode.Process, tokens []string) map[string]time.Time {
	tb.Helper()
	if err := p.Client().SendUser(ctx, claudecode.Prompt{Text: "stream " + tokens[0], UUID: uuid.NewString()}); err != nil {
		tb.Fatalf("sending the prompt: %v", err)
	}
	seen := map[string]time.Time{}
	for {
		msg, err := p.Recv(ctx)
		if err != nil {
			tb.Fatalf("reading claude: %v (stderr: %s)", err, strings.Join(p.Stderr(), " | "))
		}
		at := time.Now()
		switch m := msg.(type) {
		case *claudecode.StreamEvent:
			if d := m.Event.Delta; m.Event.Type == "content_block_delta" && d != nil && d.Type == "text_delta" {
				for _, tok := range tokenPattern.FindAllString(d.Text, -1) {
					seen[tok] = at
				}
			}
		case *claudecode.ResultMessage:
			if m.IsError || m.Subtype != "success" {
				tb.Fatalf("turn ended with %s (is_error %v): %q", m.Subtype, m.IsError, m.Result)
			}
			return seen
		}
	}
}

// textWatch is a running `drover task watch --output json TASK` and when each token first
// appeared on its standard output. JSON prints every event whole, where the text output
// shortens a long line, which text coalesced under load can be.
type textWatch struct {
	mu      sync.Mutex
	seen    map[string]time.Time
	changed chan struct{}
	done    chan struct{}
}

// startTextWatch runs `drover task watch --output json id` until the owner ends.
func (e *benchEnv) startTextWatch(id string) *textWatch {
	e.tb.Helper()
	cmd := exec.Command(suite.drover, "task", "watch", "--output", "json", id)
	cmd.Env = []string{"DROVER_DATABASE_URL=" + e.dsn, "HOME=" + e.home}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.tb.Fatal(err)
	}
	w := &textWatch{seen: map[string]time.Time{}, changed: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		r := bufio.NewReaderSize(out, 1<<16)
		for {
			line, err := r.ReadBytes('\n')
			at := time.Now()
			if toks := tokenPattern.FindAll(line, -1); len(toks) > 0 {
				w.mu.Lock()
				for _, t := range toks {
					if _, ok := w.seen[string(t)]; !ok {
						w.seen[string(t)] = at
					}
				}
				w.mu.Unlock()
				select {
				case w.changed <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	e.owner.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-w.done
		_ = cmd.Wait()
	})
	return w
}

// await waits until every token was printed and returns when each was.
func (w *textWatch) await(tb testing.TB, tokens []string) map[string]time.Time {
	tb.Helper()
	guard := time.After(time.Minute) // a dead watch, not a timing assertion
	for {
		w.mu.Lock()
		missing := ""
		for _, t := range tokens {
			if _, ok := w.seen[t]; !ok {
				missing = t
				break
			}
		}
		var out map[string]time.Time
		if missing == "" {
			out = make(map[string]time.Time, len(tokens))
			for _, t := range tokens {
				out[t] = w.seen[t]
			}
		}
		w.mu.Unlock()
		if out != nil {
			return out
		}
		select {
		case <-w.changed:
		case <-w.done:
			tb.Fatalf("drover task watch ended before printing %s", missing)
		case <-guard:
			tb.Fatalf("drover task watch did not print %s within a minute", missing)
		}
	}
}

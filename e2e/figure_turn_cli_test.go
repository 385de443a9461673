package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/bench"
)

// P2cli's goal: a warm turn as a person runs it from a shell takes at most this many times the
// same turn sent straight to a warm CLI process.
const p2CLIGoal = 1.5

// BenchmarkFigureTurnCLI measures figure P2cli: a warm turn as a person meets it. `drover task
// prompt TASK PROMPT` runs as a process (the drover binary, with the environment a user has), and
// the time runs from its start to the line of the turn's complete event printed by a `drover task
// watch TASK` that runs all along; the baseline is the same direct warm turn as P2's. The row's
// note splits drover's side: the prompt command (start to exit), and how long after the event
// reached the log (as a watch in this process saw it) the watch process printed it.
//
//	go test ./e2e -run '^$' -bench '^BenchmarkFigureTurnCLI$' -benchtime 1x -v
func BenchmarkFigureTurnCLI(b *testing.B) {
	e := newBenchEnv(b)
	direct := e.warmClaude()
	w := e.warmTask("p2cli")
	printed := e.watchProcess(w.id)
	printed.next(1)

	var promptCmd, printLag []float64
	base, drover := measurePairs(b, figureRuns(b),
		func(i int) time.Duration { return direct.turn(fmt.Sprintf("direct prompt %d", i)) },
		func(i int) time.Duration {
			cmd := exec.CommandContext(e.ctx, suite.drover, "task", "prompt", w.id, fmt.Sprintf("cli prompt %d", i))
			cmd.Env = e.userEnv()
			t0 := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("drover task prompt: %v\n%s", err, out)
			}
			exited := time.Now()
			logged := w.waitNext()
			at := printed.next(w.turns)
			promptCmd = append(promptCmd, ms(exited.Sub(t0)))
			printLag = append(printLag, ms(at.Sub(logged)))
			return at.Sub(t0)
		})
	w.check()
	row := ratioRow("P2cli", "warm turn: drover task prompt → complete printed by drover task watch ÷ prompt → result on a warm CLI",
		base, drover, "ms", bench.RatioAtMost(p2CLIGoal))
	row.Note = fmt.Sprintf("medians: drover task prompt %.0f ms start to exit; watch printed %.1f ms after the log delivered",
		bench.Median(promptCmd), bench.Median(printLag))
	reportRows(b, row)
}

// userEnv is the environment of a person's drover commands on this world: where Temporal and
// Postgres are, and the task queue.
func (w world) userEnv() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + w.home,
		"DROVER_DATABASE_URL=" + w.dsn,
		"TEMPORAL_ADDRESS=" + w.temporal,
		"TEMPORAL_NAMESPACE=" + w.namespace,
		"DROVER_TASK_QUEUE=" + w.queue,
	}
}

// printedCompletes are the complete events of the main agent that a `drover task watch` process
// printed, as the turn and when its line was read.
type printedCompletes struct {
	e     *benchEnv
	turns chan seenComplete
}

// watchProcess runs `drover task watch TASK` until the benchmark ends and reads its lines.
func (e *benchEnv) watchProcess(taskID string) *printedCompletes {
	e.tb.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	cmd := exec.CommandContext(ctx, suite.drover, "task", "watch", taskID)
	cmd.Env = e.userEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.tb.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		e.tb.Fatal(err)
	}
	p := &printedCompletes{e: e, turns: make(chan seenComplete, 64)}
	go func() {
		defer close(p.turns)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			at := time.Now()
			if err != nil {
				return
			}
			// "   SEQ tTURN.ATTEMPT TYPE  DESCRIPTION"; subagents have no complete events.
			f := strings.Fields(line)
			if len(f) < 3 || f[2] != string(events.TypeComplete) || !strings.HasPrefix(f[1], "t") {
				continue
			}
			turn, _, _ := strings.Cut(f[1][1:], ".")
			n, err := strconv.Atoi(turn)
			if err != nil {
				continue
			}
			p.turns <- seenComplete{turn: n, at: at}
		}
	}()
	e.owner.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if e.owner.Failed() {
			e.owner.Logf("drover task watch %s stderr:\n%s", taskID, stderr.String())
		}
	})
	return p
}

// next waits for the printed complete event of turn and returns when its line was read.
func (p *printedCompletes) next(turn int) time.Time {
	p.e.tb.Helper()
	for {
		select {
		case c, ok := <-p.turns:
			if !ok {
				p.e.tb.Fatalf("drover task watch ended before printing the complete event of turn %d", turn)
			}
			if c.turn == turn {
				return c.at
			}
			if c.turn > turn {
				p.e.tb.Fatalf("drover task watch printed the complete event of turn %d before that of turn %d", c.turn, turn)
			}
		case <-time.After(watchGuard):
			p.e.tb.Fatalf("drover task watch printed no complete event for turn %d", turn)
		}
	}
}

// watchGuard bounds the wait for a delivery: a guard against a dead watch, not a timing
// assertion.
const watchGuard = time.Minute

package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-run/drover/internal/bench"
	"github.com/drover-run/drover/task"
)

// P2cold's goal: a new task's first turn takes at most this many times a bare `claude -p` run of
// the same prompt.
const p2ColdGoal = 1.1

// BenchmarkFigureColdTurn measures figure P2cold: a first turn from nothing. The baseline is a
// bare `claude -p PROMPT` process against the same fake Messages API, from its start to its exit.
// Through drover, the time runs from starting a new task (taskclient.Start, the Update-with-Start
// that `drover task start` sends) to its first turn's complete event delivered by store.Watch; the
// worker, already running, starts the task's CLI process. Closing the task is not timed.
//
//	go test ./e2e -run '^$' -bench '^BenchmarkFigureColdTurn$' -benchtime 1x -v
func BenchmarkFigureColdTurn(b *testing.B) {
	e := newBenchEnv(b)
	e.startWorker("host-" + e.queue)
	bare := func(i int) time.Duration {
		d, err := e.bareClaude(fmt.Sprintf("cold prompt %d", i))
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	first := func(int) time.Duration { return e.firstTurn("cold-" + uuid.NewString()[:8]) }
	bare(-1)  // the CLI's files into the page cache
	first(-1) // the worker's connections and caches
	base, drover := measurePairs(b, figureRuns(b), bare, first)
	reportRows(b, ratioRow("P2cold", "first turn: new task → its complete event in the log ÷ a bare claude -p run",
		base, drover, "ms", bench.RatioAtMost(p2ColdGoal)))
}

// bareClaude runs `claude -p PROMPT` in the world's workspace, with the environment and
// configuration folder the worker gives the CLI, and returns its time from start to exit.
func (e *benchEnv) bareClaude(prompt string) (time.Duration, error) {
	c := e.claudeCommand()
	cmd := exec.CommandContext(e.ctx, c.Path, "-p", prompt)
	cmd.Dir = c.Dir
	cmd.Env = c.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("claude -p: %w: %s", err, stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != benchReply {
		return 0, fmt.Errorf("claude -p answered %q, want %q", got, benchReply)
	}
	return d, nil
}

// firstTurn starts the task id and returns the time until its first turn's complete event was
// delivered; then, untimed, it closes the task.
func (e *benchEnv) firstTurn(id string) time.Duration {
	e.tb.Helper()
	seen, stop := e.completions(id)
	defer stop()
	t0 := time.Now()
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "first prompt of " + id}, ""); err != nil {
		e.tb.Fatal(err)
	}
	d := e.waitComplete(seen, id, 1).Sub(t0)
	stop()
	if err := e.closeTask(id); err != nil {
		e.tb.Fatal(err)
	}
	return d
}

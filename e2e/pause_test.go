package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/testkit/procstat"
	"github.com/drover-run/drover/task"
)

// cliOf is the CLI's own process for the pid an executor row records: the guard's one child,
// or pid itself where no guard runs.
func cliOf(t *testing.T, pid int) int {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(b)) {
			if child, err := strconv.Atoi(field); err == nil {
				return child
			}
		}
	}
	return pid
}

// TestIdleProcessIsPausedUntilItsNextTurn: a task's CLI kept for its next turn is paused once
// idle (the kernel shows it stopped), the next turn runs on the same process and session (the
// API's conversation holds the first prompt once), the process is paused again after it, and
// closing the task ends the paused process.
func TestIdleProcessIsPausedUntilItsNextTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-"+e.queue, "--pause-idle", "1s")
	id := e.taskID("paused")
	const first = "the first prompt, before the pause"
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: first}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(id, 1)
	pid := e.executorPID(id)
	cli := cliOf(t, pid)
	e.waitFor("the idle claude to be paused", func() bool { return procstat.State(cli) == "T" })
	if s := procstat.State(pid); pid != cli && (s == "T" || s == "") {
		t.Fatalf("the guard is in state %q while its claude is paused: it must keep running", s)
	}

	mark := e.fake.Mark()
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "the second prompt, after it"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(id, 2)
	if got := e.executorPID(id); got != pid {
		t.Fatalf("the second turn ran in process %d, want the paused one, %d", got, pid)
	}
	reqs := mainRequestsSince(e.fake, mark)
	if len(reqs) == 0 || reqs[len(reqs)-1].PromptCount(first) != 1 {
		t.Fatalf("the second turn's request does not carry the first prompt once: the session did not go on (%d requests)", len(reqs))
	}
	starts := 0
	for _, ev := range e.events(id) {
		if ev.Agent.Type == events.TypeSessionStatus {
			starts++
		}
	}
	if starts != 1 {
		t.Errorf("the task's log shows %d claude starts, want 1", starts)
	}
	e.waitFor("the idle claude to be paused again", func() bool { return procstat.State(cli) == "T" })

	if err := e.tc.Close(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the paused claude to end with its task", func() bool { return !alive(cli) })
}

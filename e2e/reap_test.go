package e2e

import (
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover/claudecode"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// reapBound is how long the tools' processes may outlive the event that ends them: a guard
// notices its worker's death at once (parent-death signal), or at worst on its next poll.
const reapBound = 15 * time.Second

// toolInTurn starts a task whose first turn runs the slow tool (30 s) and waits until the
// tool's shell and its child run. It returns the task id and the run.
func toolInTurn(e *env, tool *toolScript, name string) (string, toolRun) {
	e.t.Helper()
	tool.setSleep(30)
	e.fake.Enqueue(fa.Reply(fa.Text("running the tool"), fa.UseBash(tool.command())))
	id := e.taskID(name)
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "run the slow tool"}, ""); err != nil {
		e.t.Fatal(err)
	}
	e.waitFor("the tool to start its child", func() bool {
		runs := tool.runs()
		return len(runs) == 1 && runs[0].child != 0
	})
	run := tool.runs()[0]
	if !alive(run.pid) || !alive(run.child) {
		e.t.Fatalf("the tool's processes %v do not run", run.pids())
	}
	return id, run
}

// Cancelling a task while its turn runs a tool ends every process of the CLI's tree: the tool's
// shell and the child it started (found by the pids the tool wrote), and the CLI.
func TestCancelReapsToolProcesses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := "host-" + e.queue
	e.startWorker(host)
	tool := newToolScript(t, e.world, 30)
	id, run := toolInTurn(e, tool, "cancel-tool")
	cancelled := time.Now()
	if err := e.tc.Cancel(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	e.waitWithin(reapBound, "the tool's processes to end", func() bool { return !anyAlive(run.pids()) })
	t.Logf("cancel to the tool's processes gone: %s", time.Since(cancelled).Round(time.Millisecond))
	e.waitWithin(reapBound, "every process of the CLI's tree to end", func() bool { return len(taggedProcesses(host)) == 0 })
	t.Logf("cancel to the CLI's tree gone: %s", time.Since(cancelled).Round(time.Millisecond))
	if tool.runs()[0].ended() {
		t.Error("the tool ran to its end: the cancel did not stop it")
	}
}

// Interrupting a turn while it runs a tool ends the tool's processes (its shell and that
// shell's child); the turn ends interrupted and the CLI stays for the next turn.
func TestInterruptReapsToolProcesses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := "host-" + e.queue
	e.startWorker(host)
	tool := newToolScript(t, e.world, 30)
	id, run := toolInTurn(e, tool, "interrupt-tool")
	interrupted := time.Now()
	r, err := e.tc.Interrupt(e.ctx, id)
	if err != nil || !r.Interrupted {
		t.Fatalf("interrupt: %+v, %v", r, err)
	}
	e.waitWithin(reapBound, "the tool's processes to end", func() bool { return !anyAlive(run.pids()) })
	t.Logf("interrupt to the tool's processes gone: %s", time.Since(interrupted).Round(time.Millisecond))
	e.waitTurns(id, 1)
	rec, err := store.GetTurn(e.ctx, e.db(), id, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != task.TurnInterrupted {
		t.Errorf("turn 1 is %s, want interrupted", rec.Status)
	}
	if tool.runs()[0].ended() {
		t.Error("the tool ran to its end: the interrupt did not stop it")
	}
	// The kept CLI (and its guard) are all that is left of the tree.
	if left := taggedProcesses(host); slices.ContainsFunc(left, func(p int) bool { return slices.Contains(run.pids(), p) }) {
		t.Errorf("tool processes among the tree's: %v", left)
	}
}

// The worker dies with its guard before the guard can act (SIGSTOPped, then both SIGKILLed): the
// CLI dies with its guard, but the tool's processes, in a session of their own, live on. The
// worker that comes back kills them by tag before it polls, so that when the retry runs the tool
// again (it resends the prompt; the model asks for the tool again), nothing of the first run is
// alive — the second run's own witness says so — and the first run never reaches its end.
func TestLeftoverToolReapedWhenWorkerReturns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := "host-" + e.queue
	w := e.startWorker(host)
	tool := newToolScript(t, e.world, 30)
	id, run := toolInTurn(e, tool, "leftover-tool")
	x, err := store.GetExecutor(e.ctx, e.db(), id)
	if err != nil {
		t.Fatal(err)
	}
	guard, cli := x.PID, cliProcessOf(host)
	if !alive(guard) || cli == 0 {
		t.Fatalf("guard %d, CLI %d: want both running", guard, cli)
	}
	if err := syscall.Kill(guard, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	w.kill()
	if err := syscall.Kill(guard, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.waitWithin(reapBound, "the CLI to die with its guard", func() bool { return !alive(cli) && !alive(guard) })
	// On a loaded machine the tool's processes have been seen to go with the CLI, at once or a
	// moment later (the sleep killed, its shell ending the run). What is alive after a moment to
	// settle is the leftover; when the tool's processes are not, the case still needs one, so
	// one stands in for them: a process of the host's tree, as the tool's were.
	time.Sleep(time.Second)
	leftovers := run.pids()
	toolLeft := alive(run.pid) && alive(run.child)
	if !toolLeft {
		t.Logf("the tool's processes %v died with the CLI; a stand-in leftover of the host's tree takes their place", run.pids())
		stand := exec.Command("sleep", "300")
		stand.Env = []string{claudecode.TagEnv + "=" + host + "/stand-in"}
		if err := stand.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = stand.Wait() }()
		t.Cleanup(func() { _ = stand.Process.Kill() })
		leftovers = []int{stand.Process.Pid}
	}

	tool.setSleep(0)
	e.fake.Enqueue(fa.Reply(fa.UseBash(tool.command())), fa.Reply(fa.Text("done after the restart")))
	restarted := time.Now()
	w = e.startWorker(host)
	e.waitRetry(id, x.AttemptID)
	if anyAlive(leftovers) {
		t.Errorf("the first run's processes %v still run when the retry begins", leftovers)
	}
	t.Logf("worker restarted to retry begun (leftovers killed before): %s", time.Since(restarted).Round(time.Millisecond))
	t.Logf("SIGKILL to retry begun: %s", time.Since(killed).Round(time.Millisecond))
	e.waitTurns(id, 1)
	runs := tool.runs()
	if len(runs) != 2 {
		t.Fatalf("the tool ran %d times, want twice", len(runs))
	}
	if runs[1].live != "" {
		t.Errorf("processes %s of the first run were alive when the second started", runs[1].live)
	}
	if toolLeft && runs[0].ended() || !runs[1].ended() {
		t.Errorf("runs: %+v; want the first cut, the second whole", runs)
	}
	if !w.logLine("killed processes left by an earlier run of this host") {
		t.Error("the restarted worker did not say it killed the leftovers")
	}
	e.checkLogWhole(id)
}

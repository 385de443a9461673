package e2e

import (
	"fmt"
	"testing"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
)

// TestQueuedPromptsKeepTheirSlotAndProcess runs more tasks than the host has turn slots and
// room for processes, each with its prompts sent back to back (the first through
// Update-with-Start, the others queued behind it). A task's next turn keeps the slot and the warm
// CLI of the turn before it; the tasks beyond the slots wait. Witness: the CLI's own init, which
// the task's log carries as one session_status event per CLI process started: one per task.
// Without the hand-over, first turns of other tasks take the slots the committed turns leave
// and wait there for room, so the held processes' next turns cannot reach the host until their
// hold runs out and they are evicted and started again.
func TestQueuedPromptsKeepTheirSlotAndProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setResponder(func(r *fa.Request) (fa.Response, bool) {
		if r.Class != fa.ClassMain {
			return fa.Response{}, false
		}
		return fa.Reply(fa.Text("Done.")), true
	})
	// Two turns at once and two idle processes: room for four processes, for eight tasks.
	e.startWorker("host-"+e.queue, "--max-concurrent-turns", "2", "--max-idle", "2")
	const tasks, prompts = 8, 3
	ids := make([]string, tasks)
	for i := range ids {
		ids[i] = e.taskID(fmt.Sprintf("slots-%d", i))
		if _, err := e.tc.Start(e.ctx, ids[i], e.params(), task.Prompt{Text: "prompt 1 of " + ids[i]}, ""); err != nil {
			t.Fatal(err)
		}
		for p := 2; p <= prompts; p++ {
			if _, err := e.tc.Prompt(e.ctx, ids[i], task.Prompt{Text: fmt.Sprintf("prompt %d of %s", p, ids[i])}, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	starts := 0
	for _, id := range ids {
		st := e.waitTurns(id, prompts)
		if st.Totals.Turns != prompts || st.Totals.FailedTurns != 0 {
			t.Errorf("task %s: %d turns, %d failed; want %d, none failed", id, st.Totals.Turns, st.Totals.FailedTurns, prompts)
		}
		n := 0
		for _, ev := range e.events(id) {
			if ev.Agent.Type == events.TypeSessionStatus {
				n++
			}
		}
		if n != 1 {
			t.Errorf("task %s: its CLI started %d times for %d turns sent back to back, want once", id, n, prompts)
		}
		starts += n
	}
	if starts != tasks {
		t.Errorf("%d CLI starts for %d tasks", starts, tasks)
	}
}

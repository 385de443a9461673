package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// Interrupting a task stops its running turn, which ends as interrupted, and
// the task takes the next prompt in the same session.
func TestInterruptRunningTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	release := make(chan struct{})
	defer close(release)
	e.fake.Enqueue(
		fa.Reply(fa.Text("STARTED-LONG-ANSWER"), fa.Text("rest")).WithHold(1, release),
		fa.Reply(fa.Text("after the interrupt")),
	)
	id := e.taskID("interrupted")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "long question", By: "ben"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the turn to stream", func() bool {
		_, ok := streamed(e.events(id), 0, "STARTED-LONG-ANSWER")
		return ok
	})
	r, err := e.tc.InterruptBy(e.ctx, id, "ana")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Interrupted || r.Turn != 1 {
		t.Fatalf("interrupt answered %+v", r)
	}
	st := e.waitTurns(id, 1)
	rec, err := store.GetTurn(e.ctx, e.db(), id, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != task.TurnInterrupted || rec.Attempts != 1 {
		t.Errorf("turn 1 record: status %s attempts %d, want interrupted after one attempt", rec.Status, rec.Attempts)
	}
	// The log says the turn was interrupted, and by whom; and who sent its prompt.
	var interruptedBy, promptBy []string
	for _, ev := range e.events(id) {
		if ev.Agent.Type == events.TypeInterrupted || (ev.Agent.Type == events.TypeError && ev.Agent.Error != nil && ev.Agent.Error.Kind == events.ErrorInterrupted) {
			interruptedBy = append(interruptedBy, ev.Agent.By)
		}
		if ev.Agent.Type == events.TypeUserMessage && ev.Agent.Text == "long question" {
			promptBy = append(promptBy, ev.Agent.By)
		}
	}
	if len(interruptedBy) == 0 {
		t.Error("the log does not say the turn was interrupted")
	}
	for _, by := range interruptedBy {
		if by != "ana" {
			t.Errorf("the log says the turn was interrupted by %q, want ana", by)
		}
	}
	if strings.Join(promptBy, ",") != "ben" {
		t.Errorf("the log says the prompt was sent by %q, want ben once", promptBy)
	}

	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "next question"}, ""); err != nil {
		t.Fatal(err)
	}
	st2 := e.waitTurns(id, 2)
	if st2.SessionID != st.SessionID || st2.Totals.FailedTurns != 0 {
		t.Errorf("after the interrupt: %+v (session before %s)", st2, st.SessionID)
	}
	reqs := e.fake.MainRequests()
	if last := reqs[len(reqs)-1].LastUserText(); !strings.Contains(last, "next question") {
		t.Errorf("the next turn sent %q", last)
	}
}

// A host runs at most --max-concurrent-turns turns at once, however many wait in its queue, and a call to
// interrupt one of them still reaches it: control calls have a queue of their own. The fake
// Messages API's own ledger witnesses how many turns ran at once.
func TestMaxTurnsBoundsTurnsAndLeavesRoomForControl(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-"+e.queue, "--max-concurrent-turns", "1")
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	defer releaseAll()
	const tasks = 3
	for range tasks {
		e.fake.Enqueue(fa.Reply(fa.Text("STARTED"), fa.Text("rest")).WithHold(1, release))
	}
	ids := make([]string, tasks)
	for i := range ids {
		ids[i] = e.taskID(fmt.Sprintf("bounded-%d", i))
		if _, err := e.tc.Start(e.ctx, ids[i], e.params(), task.Prompt{Text: "question " + ids[i]}, ""); err != nil {
			t.Fatal(err)
		}
	}
	var running string
	e.waitFor("a turn to stream", func() bool {
		for _, id := range ids {
			if _, ok := streamed(e.events(id), 1, "STARTED"); ok {
				running = id
				return true
			}
		}
		return false
	})
	e.waitFor("every task's first turn to be under way", func() bool {
		for _, id := range ids {
			if st, err := e.tc.State(e.ctx, id); err != nil || st.RunningTurn != 1 {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * time.Second) // room for a turn beyond the bound to start, were it let
	if n := len(e.fake.MainRequests()); n != 1 {
		t.Fatalf("the Messages API received %d requests at once from a host with --max-concurrent-turns 1", n)
	}

	r, err := e.tc.Interrupt(e.ctx, running)
	if err != nil || !r.Interrupted {
		t.Fatalf("interrupting the host's only running turn, with turns waiting behind it: %+v, %v", r, err)
	}
	e.waitTurns(running, 1)
	if rec, err := store.GetTurn(e.ctx, e.db(), running, 1); err != nil || rec.Status != task.TurnInterrupted {
		t.Errorf("the interrupted turn's record: %+v, %v; want interrupted", rec, err)
	}
	releaseAll()
	for _, id := range ids {
		e.waitTurns(id, 1)
	}
	if n := len(e.fake.MainRequests()); n != tasks {
		t.Errorf("the Messages API received %d requests for %d turns", n, tasks)
	}
}

package e2e

import (
	"testing"

	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
)

// The worker is killed while the model's answer is held open, the task is cancelled while no
// worker runs, and the worker comes back: the cancel wins. The lost attempt is not retried, so
// no request for the task reaches the API after the cancel was accepted (the fake's request
// count is the witness). The cancel is in the task's event log, by who asked, with no worker to
// write it.
func TestCancelWinsOverWorkerRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := "host-" + e.queue
	w := e.startWorker(host)
	release := make(chan struct{})
	defer close(release)
	e.fake.Enqueue(
		fa.Reply(fa.Text("PARTIAL-OUTPUT-OF-A-LOST-ATTEMPT"), fa.Text("never finished")).WithHold(1, release),
		fa.Reply(fa.Text("a retry answered after the cancel")),
	)
	id := e.taskID("cancel-restart")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "a prompt cancelled mid-answer"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitFor("partial output in the log", func() bool {
		_, ok := streamed(e.events(id), 1, "PARTIAL-OUTPUT")
		return ok
	})
	pid := e.executorPID(id)
	w.kill()
	e.waitFor("the first claude process to end", func() bool { return !alive(pid) })

	// Cancelled with no worker running: the cancel is recorded, and Temporal keeps it.
	e.tc.DB = e.db()
	if err := e.tc.CancelBy(e.ctx, id, "ops"); err != nil {
		t.Fatal(err)
	}
	accepted := e.fake.Mark()

	back := e.startWorker(host)
	e.waitFor("the task to end cancelled", func() bool {
		st, err := e.tc.State(e.ctx, id)
		return err == nil && st.Status == task.StatusCancelled
	})
	// A stopped worker has ended every CLI it ran: whatever the worker's attempts sent, the fake
	// has seen by now.
	back.stop()
	if after := e.fake.LedgerSince(accepted); e.fake.Mark() != accepted {
		t.Errorf("%d request(s) reached the API after the cancel was accepted (billed: %+v)", e.fake.Mark()-accepted, after)
	}
	// The cancel is in the task's event log though no worker ran, once, by who asked; the log's
	// seqs around it, the returning worker's included, stay 1, 2, 3… with none missing or doubled.
	var cancels []string
	for i, ev := range e.events(id) {
		if ev.Seq != int64(i+1) {
			t.Fatalf("the log's event %d has seq %d", i+1, ev.Seq)
		}
		if ev.Type == "cancel_requested" {
			cancels = append(cancels, ev.Agent.By)
		}
	}
	if len(cancels) != 1 || cancels[0] != "ops" {
		t.Errorf("the log records cancels by %q, want one by ops", cancels)
	}
}

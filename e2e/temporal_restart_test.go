package e2e

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/devserver"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/testtools"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/worker"
)

// The Temporal server is killed in the middle of a turn and started again on
// the same state: the worker reconnects, the turn's result reaches the
// workflow, and the task carries on with nothing lost or counted twice.
func TestTemporalRestartMidTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bin, err := testtools.TemporalBin()
	if err != nil {
		t.Skip(err)
	}
	cfg := devserver.Config{Bin: bin, Headless: true, DBFile: filepath.Join(t.TempDir(), "temporal.db"),
		SearchAttributes: searchAttributes()}
	srv, err := devserver.Start(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	e.temporal = srv.Address()
	c, err := worker.Dial(e.ctx, srv.Address(), srv.Namespace(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e.tc = &taskclient.Client{Temporal: c, TaskQueue: e.queue}
	e.startWorker("host-" + e.queue)

	release := make(chan struct{})
	e.fake.Enqueue(
		fa.Reply(fa.Text("working through the outage"), fa.Text("finished")).WithHold(1, release),
		fa.Reply(fa.Text("second turn after the restart")),
	)
	id := e.taskID("temporal-restart")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "survive a restart"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the turn to stream", func() bool {
		_, ok := streamed(e.events(id), 0, "working through the outage")
		return ok
	})

	srv.Kill()
	cfg.Port = portOf(t, e.temporal)
	close(release)
	// The turn ends, and is committed, while Temporal is down; its answer waits for Temporal.
	e.waitFor("the turn to be committed while Temporal is down", func() bool {
		rec, err := store.GetTurn(e.ctx, e.db(), id, 1)
		return err == nil && rec.Status == task.TurnCompleted
	})
	srv, err = devserver.Start(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })

	st := e.waitTurns(id, 1)
	if st.Totals.FailedTurns != 0 {
		t.Fatalf("after the restart: %+v", st)
	}
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "still there?"}, ""); err != nil {
		t.Fatal(err)
	}
	st = e.waitTurns(id, 2)
	var sum float64
	var completes int
	for _, ev := range e.events(id) {
		if ev.Agent.Type == events.TypeComplete {
			completes++
			sum += ev.Agent.Data.CostUSD
		}
	}
	totals, err := store.TaskTotals(context.Background(), e.db(), id)
	if err != nil {
		t.Fatal(err)
	}
	if completes != 2 || !near(totals.CostUSD, sum) || !near(st.Totals.CostUSD, sum) {
		t.Errorf("completes %d; cost: events %.6f, turns %.6f, workflow %.6f", completes, sum, totals.CostUSD, st.Totals.CostUSD)
	}
}

package e2e

import (
	"testing"
	"time"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// A subagent launched in the background ends after the CLI's first result; the
// CLI then runs a turn of its own. drover keeps the turn open until then, so
// that turn's output and cost belong to the prompt that caused it.
func TestBackgroundSubagentStaysInItsTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	e.fake.Enqueue(
		// No run_in_background: the CLI runs the agent in the background.
		fa.Reply(fa.ToolUse("Agent", map[string]any{"description": "look around", "prompt": "List what you see.", "subagent_type": "general-purpose"})),
		fa.Reply(fa.Text("The agent is running in the background.")),
		fa.Reply(fa.Text("The agent reported back: all good.")),
		fa.Reply(fa.Text("second turn")),
	)
	// The subagent takes its time, so that it reports back after the main
	// agent's result, as long-running background work does.
	e.fake.EnqueueSubagent(fa.Reply(fa.Text("I looked around.")).WithDelay(400 * time.Millisecond))
	id := e.taskID("background")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "delegate this"}, ""); err != nil {
		t.Fatal(err)
	}
	st := e.waitTurns(id, 1)
	var completes []loggedEvent
	var sum float64
	for _, ev := range e.events(id) {
		if ev.Agent.Type == events.TypeComplete && ev.Agent.ParentToolCallID == "" {
			completes = append(completes, ev)
			sum += ev.Agent.Data.CostUSD
		}
	}
	if len(completes) < 2 {
		for _, ev := range e.events(id) {
			t.Logf("%d t%d %s %+v", ev.Seq, ev.Turn, ev.Type, ev.Agent.Subagent)
		}
		t.Fatalf("complete events in turn 1: %d, want the CLI's own follow-up turn inside it", len(completes))
	}
	for _, c := range completes {
		if c.Turn != 1 {
			t.Errorf("a complete was logged for turn %d", c.Turn)
		}
	}
	rec, err := store.GetTurn(e.ctx, e.db(), id, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !near(rec.CostUSD, sum) || !near(st.Totals.CostUSD, sum) {
		t.Errorf("turn 1 cost: record %.6f, workflow %.6f, sum of its results %.6f", rec.CostUSD, st.Totals.CostUSD, sum)
	}
	last := completes[len(completes)-1].Agent.Data.LastMessageUUID
	if st.LastMessageUUID != last {
		t.Errorf("resume point %s, want the follow-up turn's %s", st.LastMessageUUID, last)
	}
	// The next prompt is a turn of its own.
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "and then"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(id, 2)
	if n := e.fake.Unscripted(); n != 0 {
		t.Errorf("%d main requests were not scripted", n)
	}
}

package e2e

import (
	"strings"
	"testing"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// A task runs three turns in one session; the second and third prompts arrive
// while the first turn still runs, and wait their turn.
func TestThreeTurnsWithQueuedPrompts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	release := make(chan struct{})
	e.fake.Enqueue(
		fa.Reply(fa.Text("one")).WithHold(0, release),
		fa.Reply(fa.Text("two")),
		fa.Reply(fa.Text("three")),
	)
	id := e.taskID("three-turns")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "first prompt"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the first request", func() bool { return len(e.fake.MainRequests()) >= 1 })
	for _, p := range []string{"second prompt", "third prompt"} {
		acc, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: p}, "")
		if err != nil {
			t.Fatal(err)
		}
		if acc.Queued < 1 {
			t.Errorf("%q: queued behind %d, want a running turn ahead of it", p, acc.Queued)
		}
	}
	close(release)
	st := e.waitTurns(id, 3)

	if st.Totals.Turns != 3 || st.Totals.FailedTurns != 0 || st.LastError != "" {
		t.Fatalf("state after three turns: %+v", st)
	}
	// The model saw the prompts in order, each turn with the earlier exchanges.
	reqs := e.fake.MainRequests()
	if len(reqs) != 3 {
		t.Fatalf("main requests = %d, want 3", len(reqs))
	}
	for i, want := range []string{"first prompt", "second prompt", "third prompt"} {
		if got := reqs[i].LastUserText(); !strings.Contains(got, want) {
			t.Errorf("request %d ends with %q, want %q", i, got, want)
		}
	}
	if n := len(reqs[2].Messages); n < 5 {
		t.Errorf("third request carries %d messages, want the two earlier exchanges too", n)
	}

	// One complete per turn, in turn order, with costs adding up.
	var completes []events.AgentEvent
	var users []string
	for _, ev := range e.events(id) {
		switch ev.Agent.Type {
		case events.TypeComplete:
			if ev.Turn != len(completes)+1 {
				t.Errorf("complete #%d logged for turn %d", len(completes)+1, ev.Turn)
			}
			completes = append(completes, ev.Agent)
		case events.TypeUserMessage:
			users = append(users, ev.Agent.Text)
		}
	}
	if len(completes) != 3 {
		t.Fatalf("complete events = %d, want 3", len(completes))
	}
	// What the CLI said before the first prompt (its slash commands, in the
	// answer to initialize) is in the log too.
	var commands bool
	for _, ev := range e.events(id) {
		commands = commands || (ev.Agent.Type == events.TypeAvailableCommands && ev.Turn == 1 && len(ev.Agent.AvailableCommands) > 0)
	}
	if !commands {
		t.Error("no available_commands event in turn 1")
	}
	if strings.Join(users, "|") != "first prompt|second prompt|third prompt" {
		t.Errorf("user messages in the log: %q", users)
	}
	var sum float64
	for _, c := range completes {
		sum += c.Data.CostUSD
	}
	totals, err := store.TaskTotals(e.ctx, e.db(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !near(totals.CostUSD, sum) || !near(st.Totals.CostUSD, sum) || sum <= 0 {
		t.Errorf("cost: events %.6f, turns table %.6f, workflow %.6f", sum, totals.CostUSD, st.Totals.CostUSD)
	}
	// All three turns ran in one session.
	last := completes[2].Data
	if last.SessionID == "" || last.SessionID != completes[0].Data.SessionID || st.SessionID != last.SessionID {
		t.Errorf("sessions: %s, %s, state %s", completes[0].Data.SessionID, last.SessionID, st.SessionID)
	}
	if st.LastMessageUUID != last.LastMessageUUID {
		t.Errorf("state resume point %s, last complete %s", st.LastMessageUUID, last.LastMessageUUID)
	}
}

func near(a, b float64) bool {
	d := a - b
	return d < 1e-9 && d > -1e-9
}

// With room for one idle CLI, a second task's turn stops the first task's
// process; the first task then resumes from Postgres in a new process.
func TestIdleProcessesAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-"+e.queue, "--max-idle", "1")
	a, b := e.taskID("a"), e.taskID("b")
	e.fake.Enqueue(fa.Reply(fa.Text("a1")), fa.Reply(fa.Text("b1")), fa.Reply(fa.Text("a2")))
	if _, err := e.tc.Start(e.ctx, a, e.params(), task.Prompt{Text: "first task"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(a, 1)
	pidA := e.executorPID(a)
	if !alive(pidA) {
		t.Fatalf("task a's process is not kept after its turn (pid %d)", pidA)
	}
	if _, err := e.tc.Start(e.ctx, b, e.params(), task.Prompt{Text: "second task"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(b, 1)
	e.waitFor("task a's idle process to be stopped", func() bool { return !alive(pidA) })
	if !alive(e.executorPID(b)) {
		t.Error("task b's process, the most recently used, was stopped")
	}
	if _, err := e.tc.Prompt(e.ctx, a, task.Prompt{Text: "back to a"}, ""); err != nil {
		t.Fatal(err)
	}
	st := e.waitTurns(a, 2)
	if st.Totals.FailedTurns != 0 {
		t.Fatalf("task a after eviction: %+v", st)
	}
	reqs := e.fake.MainRequests()
	var sawA1 bool
	for _, m := range reqs[len(reqs)-1].Messages {
		sawA1 = sawA1 || strings.Contains(m.Text(), "a1")
	}
	if !sawA1 {
		t.Error("task a's resumed turn lost its earlier exchange")
	}
}

// A prompt sent twice with the same request id (a client retrying after a
// lost answer) is queued once.
func TestPromptRetryIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	e.fake.Enqueue(fa.Reply(fa.Text("one")), fa.Reply(fa.Text("two")))
	id := e.taskID("idempotent")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "first"}, "start-1"); err != nil {
		t.Fatal(err)
	}
	a1, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "second"}, "req-1")
	if err != nil {
		t.Fatal(err)
	}
	a2, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "second"}, "req-1")
	if err != nil {
		t.Fatal(err)
	}
	if a1 != a2 {
		t.Errorf("the retry got %+v, the first call %+v", a2, a1)
	}
	st := e.waitTurns(id, 2)
	if st.Turn != 2 || st.Totals.Turns != 2 {
		t.Errorf("turns: given %d, ended %d; want 2 and 2", st.Turn, st.Totals.Turns)
	}
	if n := e.fake.Unscripted(); n != 0 {
		t.Errorf("%d unexpected model requests", n)
	}
}

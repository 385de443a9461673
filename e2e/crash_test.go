package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// crashMidTurn runs turn 1, starts turn 2 with the model's answer held open,
// calls crash, and checks that turn 2 completes by itself from the last good
// message, with the prompt in the transcript once and the cost counted once.
func crashMidTurn(t *testing.T, e *env, id string, crash func(pid int), restart func()) {
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	e.fake.Enqueue(
		fa.Reply(fa.Text("turn one done")),
		fa.Reply(fa.Text("PARTIAL-OUTPUT-OF-A-LOST-ATTEMPT"), fa.Text("never finished")).WithHold(1, release),
		fa.Reply(fa.Text("turn two done")),
	)
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "prompt one"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(id, 1)
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "prompt two survives"}, ""); err != nil {
		t.Fatal(err)
	}
	// Wait until the partial output of attempt 1 is in the log.
	e.waitFor("partial output in the log", func() bool {
		_, ok := streamed(e.events(id), 2, "PARTIAL-OUTPUT")
		return ok
	})
	pid := e.executorPID(id)
	if !alive(pid) {
		t.Fatalf("no live claude process recorded for the task (pid %d)", pid)
	}
	crash(pid)
	e.waitFor("the first claude process to end", func() bool { return !alive(pid) })
	restart()

	st := e.waitTurns(id, 2)
	if st.Totals.Turns != 2 || st.Totals.FailedTurns != 0 {
		t.Fatalf("state: %+v", st)
	}

	// The log labels the lost attempt's output and marks the retry.
	var retry bool
	var completes []loggedEvent
	for _, ev := range e.events(id) {
		if ev.Turn != 2 {
			continue
		}
		switch ev.Agent.Type {
		case events.TypeTurnRetry:
			retry = ev.Attempt == 2 && ev.Agent.TurnRetry != nil && ev.Agent.TurnRetry.Attempt == 1
		case events.TypeComplete:
			completes = append(completes, ev)
		}
	}
	attempt, partial := streamed(e.events(id), 2, "PARTIAL-OUTPUT")
	partial = partial && attempt == 1
	if !retry || !partial {
		t.Errorf("turn_retry logged for attempt 2: %v; partial output labelled attempt 1: %v", retry, partial)
	}
	// Every tool call the log opened, it closed.
	open := map[string]bool{}
	for _, ev := range e.events(id) {
		switch ev.Agent.Type {
		case events.TypeToolCall:
			open[ev.Agent.ToolCallID] = true
		case events.TypeToolUpdate:
			delete(open, ev.Agent.ToolCallID)
		}
	}
	if len(open) != 0 {
		t.Errorf("tool calls left open in the log: %v", open)
	}
	if len(completes) != 1 || completes[0].Attempt < 2 {
		t.Fatalf("turn 2 completes: %+v", completes)
	}

	// The retried request showed the model the conversation without the lost
	// attempt, and with prompt two exactly once.
	reqs := e.fake.MainRequests()
	final := reqs[len(reqs)-1]
	var body strings.Builder
	for _, m := range final.Messages {
		body.WriteString(m.Text())
		body.WriteString("\n")
	}
	if strings.Contains(body.String(), "PARTIAL-OUTPUT") {
		t.Errorf("the retried turn still carries the lost attempt's output:\n%s", body.String())
	}
	if n := strings.Count(body.String(), "prompt two survives"); n != 1 {
		t.Errorf("the retried request holds prompt two %d times:\n%s", n, body.String())
	}
	if !strings.Contains(body.String(), "turn one done") {
		t.Errorf("the retried request lost turn one:\n%s", body.String())
	}

	// The CLI's own transcript holds the prompt once.
	// The CLI's own transcript: the conversation it resumes from (the chain
	// of entries ending at the committed position) holds prompt two once and
	// nothing of the lost attempt. The file itself is append-only: a lost
	// attempt's entries stay in it on a dead branch that nothing resumes.
	chain := e.transcriptChain(e.configDir, st.SessionID, st.LastMessageUUID)
	if len(chain) == 0 {
		t.Fatalf("the transcript has no entry %s", st.LastMessageUUID)
	}
	if n := promptCount(chain, "prompt two survives"); n != 1 {
		t.Errorf("the transcript's conversation holds prompt two %d times", n)
	}
	if n := promptCount(chain, "prompt one"); n != 1 {
		t.Errorf("the transcript's conversation holds prompt one %d times", n)
	}
	for _, m := range chain {
		if b, _ := json.Marshal(m); strings.Contains(string(b), "PARTIAL-OUTPUT") {
			t.Errorf("the transcript's conversation holds the lost attempt's output: %s", b)
		}
	}

	// Cost counted once: the turns table, the workflow and the complete events agree.
	turn2, err := store.GetTurn(e.ctx, e.db(), id, 2)
	if err != nil {
		t.Fatal(err)
	}
	if turn2.Status != task.TurnCompleted || turn2.Attempts < 2 || !near(turn2.CostUSD, completes[0].Agent.Data.CostUSD) {
		t.Errorf("turn 2 record: %+v, complete cost %.6f", turn2, completes[0].Agent.Data.CostUSD)
	}
	totals, err := store.TaskTotals(e.ctx, e.db(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !near(totals.CostUSD, st.Totals.CostUSD) {
		t.Errorf("cost: turns table %.6f, workflow %.6f", totals.CostUSD, st.Totals.CostUSD)
	}
}

// The worker is killed with SIGKILL in the middle of a turn; a new worker on
// the same host finishes the turn by itself.
func TestWorkerKilledMidTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := "host-" + e.queue
	w := e.startWorker(host)
	crashMidTurn(t, e, e.taskID("worker-killed"), func(int) { w.kill() }, func() { e.startWorker(host) })
}

// The CLI process is killed in the middle of a turn; the same worker retries.
func TestCLIKilledMidTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	crashMidTurn(t, e, e.taskID("cli-killed"), func(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }, func() {})
}

package e2e

import (
	"context"
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
)

var longTurns = flag.Int("long.turns", 210, "TestLongTaskAcrossContinueAsNew: the task's turns (make soak: 1000)")

// longPrompt is the prompt of turn k of the long task: no prompt's text holds another's.
func longPrompt(k int) string { return fmt.Sprintf("prompt %05d of the long task.", k) }

// longPromptRE finds the long task's prompts in a request's JSON.
var longPromptRE = regexp.MustCompile(`prompt (\d{5}) of the long task\.`)

// longToolCommand is the command the model runs in the long task's supervised turns.
const longToolCommand = "echo granted-for-the-rest-of-the-task"

// eventCollector drains a drover task watch into a list, so that the watch never waits for the
// test to read it.
type eventCollector struct {
	mu    sync.Mutex
	lines []eventLine
	done  chan struct{}
}

func collect(w *watcher) *eventCollector {
	c := &eventCollector{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ev := range w.lines {
			c.mu.Lock()
			c.lines = append(c.lines, ev)
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *eventCollector) seen() []eventLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]eventLine(nil), c.lines...)
}

// A supervised task of -long.turns turns (make test: 210; make soak: 1,000) on one worker, its
// workflow continuing as new every 100 turns on the real Temporal server. Across the runs:
//   - the fake API received each prompt in exactly one request that ends with it, and the
//     conversation of the last request holds every prompt once;
//   - the event log has no gap, and a drover task watch opened before the first continue-as-new
//     printed every event of it to the end;
//   - an approval asked in the last turn of the first run, granted for the rest of the task, covers
//     the same command near the end: no second request, the grant in the last run's state;
//   - a budget of -long.turns turns set after the first turn refuses the next prompt at the end;
//   - Temporal holds more than one run of the workflow, each but the last continued as new.
func TestLongTaskAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	n := *longTurns
	if n < 201 {
		t.Fatalf("-long.turns=%d: the task must span at least two continue-as-new (201 turns)", n)
	}
	const grantTurn = 100 // the last turn of the first run
	useTurn := n - 2      // a turn of the last run
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n)*5*time.Second+4*time.Minute) // a guard against a hang
	t.Cleanup(cancel)
	e.ctx = ctx
	e.setResponder(func(r *fa.Request) (fa.Response, bool) {
		if r.Class != fa.ClassMain {
			return fa.Response{}, false
		}
		last := r.Messages[len(r.Messages)-1]
		text := r.LastUserText()
		switch {
		case len(last.ToolResults()) > 0:
			return fa.Reply(fa.Text("the command ran")), true
		case strings.Contains(text, longPrompt(grantTurn)) || strings.Contains(text, longPrompt(useTurn)):
			return fa.Reply(fa.UseBash(longToolCommand)), true
		default:
			return fa.Reply(fa.Text("ok")), true
		}
	})
	e.startWorker("host-" + e.queue)
	id := e.taskID("long")
	if _, err := e.tc.Start(e.ctx, id, e.supervisedParams(), task.Prompt{Text: longPrompt(1)}, ""); err != nil {
		t.Fatal(err)
	}
	watched := collect(e.watch(id, 0))
	idle := func() task.State {
		t.Helper()
		st, err := e.tc.WaitIdle(e.ctx, id, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	idle()
	if _, err := e.tc.UpdateBudget(e.ctx, id, task.BudgetChange{MaxTurns: ptr(n)}); err != nil {
		t.Fatal(err)
	}
	for k := 2; k <= n; k++ {
		if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: longPrompt(k)}, ""); err != nil {
			t.Fatalf("turn %d: %v", k, err)
		}
		if k == grantTurn {
			r := e.waitAwaiting(id, 1)[0]
			if r.Tool != "Bash" || len(r.Suggestions) == 0 {
				t.Fatalf("turn %d: the request %+v", k, r)
			}
			if _, _, err := e.decider().Decide(e.ctx, id, task.Decision{RequestID: r.RequestID, Allow: true,
				Always: r.Suggestions[0].Key, By: "alice"}, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		if st := idle(); st.Totals.Turns != k || st.Totals.FailedTurns != 0 {
			t.Fatalf("after turn %d: %d turns, %d failed (%s)", k, st.Totals.Turns, st.Totals.FailedTurns, st.LastError)
		}
	}

	// The budget set after the first turn refuses the turn after the last.
	st := idle()
	if st.Status != task.StatusBudgetExhausted || st.BudgetExhausted == nil || st.BudgetExhausted.Bound != task.BoundTurns {
		t.Fatalf("after %d turns with a budget of %d: %+v", n, n, st)
	}
	_, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: longPrompt(n + 1)}, "")
	refusedForBudget(t, err)
	if len(st.Grants) != 1 {
		t.Errorf("the last run's state holds grants %+v, want the one given in turn %d", st.Grants, grantTurn)
	}

	// The runs: the first continued as new, and so on to the current one.
	runs := e.workflowRuns(id)
	if runs < 3 {
		t.Errorf("the workflow has %d runs after %d turns, want at least 3", runs, n)
	}

	// The API: each prompt once. A request that is not a tool's result is its turn's: the newest
	// prompt it carries is the turn's.
	reqs := e.fake.MainRequests()
	ending := make([]int, n+2)
	for _, r := range reqs {
		if len(r.Messages[len(r.Messages)-1].ToolResults()) > 0 {
			continue
		}
		newest := 0
		for _, m := range r.Messages {
			if m.Role != "user" {
				continue
			}
			for _, raw := range m.Content {
				for _, sub := range longPromptRE.FindAllSubmatch(raw, -1) {
					k, _ := strconv.Atoi(string(sub[1]))
					newest = max(newest, k)
				}
			}
		}
		if newest >= 1 && newest <= n+1 {
			ending[newest]++
		}
	}
	if ending[n+1] != 0 {
		t.Errorf("the prompt refused for the budget reached the API")
	}
	final := reqs[len(reqs)-1]
	for k := 1; k <= n; k++ {
		if c := ending[k]; c != 1 {
			t.Errorf("prompt %d was sent to the API in %d requests (the first request's messages: %s)", k, c, firstMessages(reqs))
		}
		if c := final.PromptCount(longPrompt(k)); c != 1 {
			t.Errorf("the last request's conversation holds prompt %d %d times", k, c)
		}
	}

	// The log: gapless, one request asked, and everything printed by the watch.
	log := e.events(id)
	asked := 0
	for i, ev := range log {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: a gap in the log", i+1, ev.Seq)
		}
		if ev.Agent.Type == events.TypePermissionRequest {
			asked++
		}
	}
	if asked != 1 {
		t.Errorf("%d permission requests in the log, want 1: the grant of turn %d did not cover turn %d", asked, grantTurn, useTurn)
	}
	ranTwice := 0
	for _, r := range reqs {
		for _, tr := range r.Messages[len(r.Messages)-1].ToolResults() {
			if strings.Contains(tr.Content, "granted-for-the-rest-of-the-task") {
				ranTwice++
			}
		}
	}
	if ranTwice != 2 {
		t.Errorf("the granted command's output reached the API %d times, want 2", ranTwice)
	}
	e.waitFor("the watch to print the whole log", func() bool { return len(watched.seen()) >= len(log) })
	got := watched.seen()
	for i, ev := range log {
		if got[i].Seq != ev.Seq || got[i].Type != ev.Type {
			t.Fatalf("the watch printed event %d as seq %d %s, the log holds seq %d %s", i+1, got[i].Seq, got[i].Type, ev.Seq, ev.Type)
		}
	}
	t.Logf("%d turns in %d runs, %d events, the watch printed %d", n, runs, len(log), len(got))
}

// workflowRuns follows the task's workflow from its first run through each continue-as-new, as
// Temporal holds them, and returns how many runs it has.
func (e *env) workflowRuns(id string) int {
	e.t.Helper()
	desc, err := e.tc.Temporal.DescribeWorkflow(e.ctx, id, "")
	if err != nil {
		e.t.Fatal(err)
	}
	info := desc.RawResponse.GetWorkflowExecutionInfo()
	current, run := info.GetExecution().GetRunId(), info.GetFirstRunId()
	for runs := 1; ; runs++ {
		if run == current {
			return runs
		}
		it := e.tc.Temporal.GetWorkflowHistory(e.ctx, id, run, false, enums.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
		next := ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				e.t.Fatal(err)
			}
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
		}
		if next == "" {
			e.t.Fatalf("run %d (%s) of %s did not continue as new, and is not the current run %s", runs, run, id, current)
		}
		run = next
	}
}

// firstMessages describes the messages of the first of reqs, for a failure.
func firstMessages(reqs []fa.Request) string {
	var out []string
	for _, m := range reqs[0].Messages {
		out = append(out, fmt.Sprintf("%s %v %.200q", m.Role, m.BlockTypes(), m.Text()))
	}
	return strings.Join(out, "; ")
}

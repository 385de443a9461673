package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// continuedText is what the prompt that continues a cut turn says (workflows.continueAfterBudget).
const continuedText = "Your budget was raised"

// waitSpent waits until the task has spent its budget and runs nothing.
func (e *env) waitSpent(id string) task.State {
	e.t.Helper()
	var st task.State
	e.waitFor("task "+id+" to spend its budget", func() bool {
		var err error
		st, err = e.tc.State(e.ctx, id)
		return err == nil && st.Status == task.StatusBudgetExhausted && st.RunningTurn == 0
	})
	return st
}

// budgetEvents are the task's budget_exhausted events.
func (e *env) budgetEvents(id string) []events.BudgetSpent {
	var out []events.BudgetSpent
	for _, ev := range e.events(id) {
		if ev.Agent.Type == events.TypeBudgetExhausted && ev.Agent.Budget != nil {
			out = append(out, *ev.Agent.Budget)
		}
	}
	return out
}

// refusedForBudget asserts that err is the typed refusal of a task whose budget is spent.
func refusedForBudget(t *testing.T, err error) {
	t.Helper()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != task.ErrTypeBudgetExhausted {
		t.Fatalf("a prompt to a task that spent its budget: %v, want a %s error", err, task.ErrTypeBudgetExhausted)
	}
}

// billedEqualsLedger asserts that what the task, and Postgres, say it was billed is what the fake
// API billed, every answer whole.
func (e *env) billedEqualsLedger(id string, st task.State) fa.LedgerTotals {
	e.t.Helper()
	led := fa.SumLedger(e.fake.Ledger())
	if led.Incomplete != 0 {
		e.t.Errorf("the ledger has %d answers cut short", led.Incomplete)
	}
	if !nearCost(st.Totals.BilledCostUSD(), led.CostUSD) {
		e.t.Errorf("the task was billed $%.9f (turns $%.9f, failed attempts $%.9f); the fake API billed $%.9f in %d answers",
			st.Totals.BilledCostUSD(), st.Totals.CostUSD, st.Totals.FailedAttemptsCostUSD, led.CostUSD, led.Responses)
	}
	spend, err := store.TaskSpend(e.ctx, e.db(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	if !nearCost(spend.BilledUSD(), led.CostUSD) {
		e.t.Errorf("Postgres says the task was billed $%.9f; the fake API billed $%.9f", spend.BilledUSD(), led.CostUSD)
	}
	return led
}

// A turn that crosses the task's cost budget is cut after the answer that crossed it: its tool
// does not run, the task's status is budget_exhausted with what it spent (the fake API's
// ledger), and prompts are refused. Raising the budget (drover task budget) continues the cut
// turn.
func TestBudgetCutsTheTurnThatCrossesIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	marker := filepath.Join(e.workspace, "tool-ran")
	var followUps atomic.Int32
	e.setResponder(func(r *fa.Request) (fa.Response, bool) {
		if r.Class != fa.ClassMain {
			return fa.Response{}, false
		}
		last := r.Messages[len(r.Messages)-1]
		switch text := r.LastUserText(); {
		case strings.Contains(text, continuedText):
			return fa.Reply(fa.Text("continuing")).WithUsage(fa.Usage{InputTokens: 2000, OutputTokens: 50}), true
		case len(last.ToolResults()) > 0:
			// The cut turn asks nothing more of the API; should it, the answer would come too late.
			followUps.Add(1)
			return fa.Reply(fa.Text("too late")).WithDelay(time.Minute), true
		case strings.Contains(text, "first"):
			return fa.Reply(fa.Text("one")).WithUsage(fa.Usage{InputTokens: 1000, OutputTokens: 100}), true
		case strings.Contains(text, "second"):
			return fa.Reply(fa.ToolUse("Bash", map[string]any{"command": "touch " + marker})).
				WithUsage(fa.Usage{InputTokens: 50_000, OutputTokens: 200}), true
		}
		return fa.Reply(fa.Text("unexpected")), true
	})
	id := e.taskID("budget-cost")
	p := e.params()
	p.Budget = task.Budget{MaxCostUSD: 0.05}
	if _, err := e.tc.Start(e.ctx, id, p, task.Prompt{Text: "first"}, ""); err != nil {
		t.Fatal(err)
	}
	if st := e.waitTurns(id, 1); st.Status != task.StatusIdle {
		t.Fatalf("after the first turn, within budget: %+v", st)
	}
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "second"}, ""); err != nil {
		t.Fatal(err)
	}
	st := e.waitSpent(id)
	x := st.BudgetExhausted
	if x == nil || x.Bound != task.BoundCost || !x.Cut || x.Turn != 2 || x.Budget.MaxCostUSD != 0.05 {
		t.Fatalf("the spent budget: %+v", x)
	}
	led := e.billedEqualsLedger(id, st)
	if led.Responses != 2 || !nearCost(x.CostUSD, led.CostUSD) {
		t.Errorf("the budget says $%.9f was spent; the fake API billed $%.9f in %d answers", x.CostUSD, led.CostUSD, led.Responses)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the tool of the answer that crossed the budget ran (%v)", err)
	}
	rec, err := store.GetTurn(e.ctx, e.db(), id, 2)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != task.TurnInterrupted {
		t.Errorf("turn 2 record: %s, want interrupted", rec.Status)
	}
	if evs := e.budgetEvents(id); len(evs) != 1 || evs[0].Bound != string(task.BoundCost) || !evs[0].Cut || !nearCost(evs[0].CostUSD, led.CostUSD) {
		t.Errorf("budget events in the log: %+v", evs)
	}
	_, err = e.tc.Prompt(e.ctx, id, task.Prompt{Text: "third"}, "")
	refusedForBudget(t, err)
	show, err := e.droverCLI("task", "show", id)
	if err != nil || !strings.Contains(show, "budget_exhausted") || !strings.Contains(show, "max_cost_usd at turn 2 (cut)") {
		t.Errorf("task show: %v\n%s", err, show)
	}

	out, err := e.droverCLI("task", "budget", id, "--budget-cost", "5")
	if err != nil || !strings.Contains(out, "budget $5.0000") {
		t.Fatalf("drover task budget: %v\n%s", err, out)
	}
	st = e.waitTurns(id, 3)
	if st.Status != task.StatusIdle || st.BudgetExhausted != nil {
		t.Fatalf("after the raise: %+v", st)
	}
	reqs := e.fake.MainRequests()
	if !strings.Contains(reqs[len(reqs)-1].LastUserText(), continuedText) {
		t.Errorf("the cut turn was not continued: the last request says %q", reqs[len(reqs)-1].LastUserText())
	}
	led = e.billedEqualsLedger(id, st)
	if led.Responses != 3 {
		t.Errorf("the fake API billed %d answers, want 3", led.Responses)
	}
	if n := followUps.Load(); n != 0 {
		t.Logf("the cut turn sent %d requests after its tool was denied", n)
	}
}

// An attempt that fails after the API billed an answer is retried; what it was billed counts in
// the task's total, which equals the fake API's ledger: whether the CLI reported it (an API
// error ends the attempt), was killed before it could (the host prices what the stream said),
// or died with its worker (what the attempt had recorded in Postgres stays).
func TestBudgetCountsFailedAttempts(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"api-error", "killed", "worker-killed"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			host := "host-" + e.queue
			w := e.startWorker(host)
			var failed atomic.Bool
			followed := make(chan struct{})
			var once atomic.Bool
			e.setResponder(func(r *fa.Request) (fa.Response, bool) {
				if r.Class != fa.ClassMain {
					return fa.Response{}, false
				}
				last := r.Messages[len(r.Messages)-1]
				switch {
				case failed.Load() || strings.Contains(r.LastUserText(), "again"):
					return fa.Reply(fa.Text("done")).WithUsage(fa.Usage{InputTokens: 3000, OutputTokens: 30}), true
				case len(last.ToolResults()) > 0:
					// The billed answer's tool ran; the attempt fails on the next request.
					if once.CompareAndSwap(false, true) {
						close(followed)
					}
					if how == "api-error" {
						failed.Store(true)
						return fa.Fail(500, "api_error", 0), true
					}
					return fa.Reply(fa.Text("never sent")).WithDelay(time.Minute), true
				}
				return fa.Reply(fa.ToolUse("Bash", map[string]any{"command": "true"})).
					WithUsage(fa.Usage{InputTokens: 20_000, OutputTokens: 100}), true
			})
			id := e.taskID("budget-retry-" + how)
			if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "work"}, ""); err != nil {
				t.Fatal(err)
			}
			if how != "api-error" {
				select {
				case <-followed:
				case <-e.ctx.Done():
					t.Fatal("the attempt never asked for its next answer")
				}
				pid := e.executorPID(id)
				if pid <= 0 {
					t.Fatal("no claude process recorded")
				}
				failed.Store(true)
				if how == "worker-killed" {
					w.kill()
					e.waitFor("the claude process to die with its worker", func() bool { return !alive(pid) })
					e.startWorker(host)
				} else if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
			st := e.waitTurns(id, 1)
			if st.Totals.FailedTurns != 0 || st.Totals.FailedAttemptsCostUSD <= 0 {
				t.Fatalf("after the retried turn: %+v", st.Totals)
			}
			rec, err := store.GetTurn(e.ctx, e.db(), id, 1)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Attempts < 2 {
				t.Errorf("turn 1 ran %d attempts, want a retry", rec.Attempts)
			}
			led := e.billedEqualsLedger(id, st)
			if !nearCost(st.Totals.CostUSD, rec.CostUSD) || nearCost(st.Totals.CostUSD, led.CostUSD) {
				t.Errorf("the turn cost $%.9f (record $%.9f); the ledger $%.9f must also hold the failed attempt's", st.Totals.CostUSD, rec.CostUSD, led.CostUSD)
			}
		})
	}
}

// A worker's default budget bounds what a task's own leaves unset: here its turns. The task
// stops after them, says so, refuses prompts, and goes on once its own budget leaves room. A
// duration budget cuts a turn whose tool outlasts it.
func TestBudgetTurnsFromTheWorkerAndDuration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-"+e.queue, "--default-budget-turns", "1", "--default-budget-cost", "100")
	e.setResponder(func(r *fa.Request) (fa.Response, bool) {
		if r.Class != fa.ClassMain {
			return fa.Response{}, false
		}
		last := r.Messages[len(r.Messages)-1]
		switch text := r.LastUserText(); {
		case len(last.ToolResults()) > 0 && !strings.Contains(text, continuedText):
			return fa.Reply(fa.Text("slept")), true
		case strings.Contains(text, "sleep"):
			return fa.Reply(fa.ToolUse("Bash", map[string]any{"command": "timeout 120 tail -f /dev/null"})), true
		default:
			return fa.Reply(fa.Text("ok: " + text)), true
		}
	})

	id := e.taskID("budget-turns")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "one"}, ""); err != nil {
		t.Fatal(err)
	}
	st := e.waitSpent(id)
	x := st.BudgetExhausted
	if x == nil || x.Bound != task.BoundTurns || x.Cut || x.Turns != 1 || x.Budget != (task.Budget{MaxCostUSD: 100, MaxTurns: 1}) {
		t.Fatalf("the spent budget: %+v", x)
	}
	if st.Budget != (task.Budget{MaxCostUSD: 100, MaxTurns: 1}) {
		t.Errorf("the task's budget shows %+v, want the worker's default", st.Budget)
	}
	if evs := e.budgetEvents(id); len(evs) != 1 || evs[0].Bound != string(task.BoundTurns) || evs[0].MaxTurns != 1 {
		t.Errorf("budget events in the log: %+v", evs)
	}
	_, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "two"}, "")
	refusedForBudget(t, err)
	if _, err := e.tc.UpdateBudget(e.ctx, id, task.BudgetChange{MaxTurns: ptr(0)}); err != nil {
		t.Fatal(err)
	}
	if st, err := e.tc.State(e.ctx, id); err != nil || st.Status != task.StatusBudgetExhausted {
		t.Fatalf("removing the task's own bound leaves the worker's: %+v %v", st, err)
	}
	b, err := e.tc.UpdateBudget(e.ctx, id, task.BudgetChange{MaxTurns: ptr(5)})
	if err != nil || b != (task.Budget{MaxCostUSD: 100, MaxTurns: 5}) {
		t.Fatalf("raising the budget: %+v %v", b, err)
	}
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "two"}, ""); err != nil {
		t.Fatal(err)
	}
	st = e.waitTurns(id, 2)
	if st.Status != task.StatusIdle {
		t.Fatalf("after the raise: %+v", st)
	}

	// The next turn's tool sleeps past the duration left.
	limit := st.Totals.WorkDuration + 4*time.Second
	if _, err := e.tc.UpdateBudget(e.ctx, id, task.BudgetChange{MaxDuration: &limit}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "sleep"}, ""); err != nil {
		t.Fatal(err)
	}
	st = e.waitSpent(id)
	x = st.BudgetExhausted
	if x == nil || x.Bound != task.BoundDuration || !x.Cut || x.Turn != 3 || x.Budget.MaxDuration != limit {
		t.Fatalf("the spent budget: %+v", x)
	}
	if rec, err := store.GetTurn(e.ctx, e.db(), id, 3); err != nil || rec.Status != task.TurnInterrupted {
		t.Errorf("turn 3 record: %+v %v, want interrupted", rec, err)
	}
	e.billedEqualsLedger(id, st)
}

func ptr[T any](v T) *T { return &v }

package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// testOAuthToken is the claude.ai token limit tests hand the CLI: a subscription, whose usage
// limits the CLI reports in rate_limit_event. No log may show it.
const testOAuthToken = "sk-ant-oat01-e2e-limits-secret"

// startSubscriptionWorker runs `drover worker` as host hostID with the CLI on the subscription
// testOAuthToken instead of an API key.
func (e *env) startSubscriptionWorker(hostID string, extraArgs ...string) *workerProc {
	e.t.Helper()
	cmd := exec.Command(suite.drover, append([]string{"worker", "--keep-alive", "2m"}, extraArgs...)...)
	environ := slices.DeleteFunc(e.workerEnv(hostID, "debug"), func(kv string) bool { return strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") })
	cmd.Env = append(environ, "CLAUDE_CODE_OAUTH_TOKEN="+testOAuthToken)
	w := launchWorker(e.t, e.t, hostID, cmd)
	e.t.Cleanup(func() {
		if strings.Contains(w.log.String(), testOAuthToken) {
			e.t.Errorf("worker %s logged the OAuth token", hostID)
		}
	})
	return w
}

// messages are the Messages requests of cs (count_tokens, which no limit refuses and nothing
// bills, left out).
func messages(cs fa.Calls) fa.Calls {
	return cs.Class(fa.ClassMain, fa.ClassSubagent, fa.ClassCompact, fa.ClassAuxiliary)
}

// subscription is the fake API's account of testOAuthToken.
var subscription = fa.OAuthAccount(testOAuthToken)

// startTasks starts one task per prompt and returns their ids.
func (e *env) startTasks(name string, prompts ...string) []string {
	e.t.Helper()
	ids := make([]string, len(prompts))
	for i, p := range prompts {
		ids[i] = e.taskID(fmt.Sprintf("%s-%d", name, i))
		if _, err := e.tc.Start(e.ctx, ids[i], e.params(), task.Prompt{Text: p}, ""); err != nil {
			e.t.Fatal(err)
		}
	}
	return ids
}

// waitStatus waits until the task shows status and returns its state.
func (e *env) waitStatus(id string, status task.Status) task.State {
	e.t.Helper()
	var st task.State
	e.waitFor(fmt.Sprintf("task %s to show %s", id, status), func() bool {
		var err error
		st, err = e.tc.State(e.ctx, id)
		return err == nil && st.Status == status
	})
	return st
}

// waitEvents returns the task's wait events.
func waitEvents(evs []loggedEvent) []events.Wait {
	var out []events.Wait
	for _, ev := range evs {
		if ev.Agent.Type == events.TypeWait && ev.Agent.Wait != nil {
			out = append(out, *ev.Agent.Wait)
		}
	}
	return out
}

// pauseAccount runs n tasks named name to their first turn, then sets a five-hour usage limit on
// account that resets in resetIn (whole seconds) and prompts each task again ("second prompt i"),
// the first alone: each must wait for the limit, all before the reset, and then finish its second
// turn. It returns the tasks, the reset, when the limit was set, and each task's state as it
// began to wait.
func (e *env) pauseAccount(name string, n int, account fa.Account, resetIn time.Duration) (ids []string, reset, limitedFrom time.Time, waiting []task.State) {
	e.t.Helper()
	warm := make([]string, n)
	for i := range warm {
		warm[i] = fmt.Sprintf("warm up %d", i)
	}
	ids = e.startTasks(name, warm...)
	for _, id := range ids {
		e.waitTurns(id, 1)
	}
	reset = time.Now().Add(resetIn).Truncate(time.Second)
	e.fake.SetLimit(account, fa.UsageLimit(fa.WindowFiveHour, reset))
	limitedFrom = time.Now()
	for i, id := range ids {
		if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: fmt.Sprintf("second prompt %d", i)}, ""); err != nil {
			e.t.Fatal(err)
		}
		if i == 0 {
			waiting = append(waiting, e.waitStatus(id, task.StatusWaitingForLimit))
		}
	}
	for _, id := range ids[1:] {
		waiting = append(waiting, e.waitStatus(id, task.StatusWaitingForLimit))
	}
	if time.Now().After(reset) {
		e.t.Fatal("the tasks took until the reset to pause; the test proves nothing")
	}
	for _, id := range ids {
		e.waitTurns(id, 2)
	}
	return ids, reset, limitedFrom, waiting
}

// oneRefusedThenOneAlone checks the fake's log of the account's Messages requests: between
// limitedFrom and reset the one refused, no other refused at all, and after the reset at least
// one main request per task (n), the first going alone. It returns the main requests after the
// reset.
func oneRefusedThenOneAlone(t *testing.T, calls fa.Calls, limitedFrom, reset time.Time, n int) fa.Calls {
	t.Helper()
	if before := calls.Started(limitedFrom, reset); len(before) != 1 || before[0].Limit != fa.LimitUsage {
		t.Fatalf("requests between the limit and its reset: %+v; want the one refused", before)
	}
	if got := len(calls.Limited()); got != 1 {
		t.Errorf("%d requests refused by the limit, want 1", got)
	}
	after := calls.Started(reset, time.Now().Add(time.Hour)).Class(fa.ClassMain)
	if len(after) < n {
		t.Fatalf("%d main requests after the reset, want one per task", len(after))
	}
	if !after[0].End.After(after[0].Start) || after[1].Start.Before(after[0].End) {
		t.Errorf("after the reset, the first request (%s–%s) did not go alone: the next began %s", after[0].Start, after[0].End, after[1].Start)
	}
	return after
}

// checkResumed checks that each task came through the limit idle, with no failed turn, and with
// its second prompt once in its conversation; it returns the tasks' cost.
func (e *env) checkResumed(ids []string) (cost float64) {
	e.t.Helper()
	for i, id := range ids {
		st, err := e.tc.State(e.ctx, id)
		if err != nil {
			e.t.Fatal(err)
		}
		if st.Totals.FailedTurns != 0 || st.LastError != "" || st.Status != task.StatusIdle {
			e.t.Errorf("task %s after the limit: %+v", id, st)
		}
		cost += st.Totals.CostUSD
		chain := e.transcriptChain(e.configDir, st.SessionID, st.LastMessageUUID)
		if got := promptCount(chain, fmt.Sprintf("second prompt %d", i)); got != 1 {
			e.t.Errorf("task %s: the second prompt is %d times in the conversation, want once", id, got)
		}
	}
	return cost
}

// A subscription's five-hour limit, reached by one task's turn, pauses every task of the
// account: the task waits (waiting_for_limit, the reset in its state and its log), the other
// tasks' turns wait before they call the API, and nothing reaches the API until the reset. Then
// every turn finishes by itself, spread out, its prompt once in the conversation and its cost
// counted once.
func TestUsageLimitPausesTheAccountUntilItsReset(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startSubscriptionWorker("host-" + e.queue)
	const n = 5
	ids, reset, limitedFrom, waiting := e.pauseAccount("usage", n, subscription, 12*time.Second)
	if w := waiting[0].Wait; w == nil || w.Reason != task.WaitUsageLimit || !w.ResetsAt.Equal(reset) || w.LimitType != "five_hour" ||
		w.Turn != 2 || w.RetryAt.Before(reset) {
		t.Fatalf("the limited task's wait: %+v; want usage_limit five_hour until %s", w, reset)
	}
	for i, st := range waiting[1:] {
		if !st.Wait.ResetsAt.Equal(reset) {
			t.Fatalf("task %s waits until %s, want the account's reset %s", ids[i+1], st.Wait.ResetsAt, reset)
		}
	}

	// The fake's own log: one request refused, none other until the reset; the reset asked about
	// once; then one request goes first and alone, and the tasks resume spread out.
	calls := messages(e.fake.Calls().Of(subscription))
	after := oneRefusedThenOneAlone(t, calls, limitedFrom, reset, n)
	if got := calls.MaxPerReset(); got != 1 {
		t.Errorf("the announced reset was asked about %d times, want once", got)
	}
	if spread := after[len(after)-1].Start.Sub(after[0].Start); spread < time.Second {
		t.Errorf("the tasks resumed within %s of each other, want them spread out", spread)
	}
	cost := e.checkResumed(ids)
	if billed := e.fake.LedgerTotals().CostUSD; fmt.Sprintf("%.9f", billed) != fmt.Sprintf("%.9f", cost) {
		t.Errorf("the tasks count %.9f USD, the API billed %.9f", cost, billed)
	}
	// The task that met the limit logged its wait, with the reason and the reset, and its end.
	logged := e.events(ids[0])
	for _, ev := range logged {
		if ev.Turn == 2 && ev.Agent.Type != events.TypeMessageChunk {
			t.Logf("turn %d attempt %d seq %d: %s", ev.Turn, ev.Attempt, ev.Seq, ev.Payload)
		}
	}
	waits := waitEvents(logged)
	if len(waits) != 2 || waits[0].Phase != events.WaitStarted || waits[0].Reason != string(task.WaitUsageLimit) ||
		!waits[0].ResetsAt.Equal(reset) || waits[1].Phase != events.WaitEnded {
		t.Errorf("wait events of the limited task: %+v", waits)
	}
}

// A weekly limit days away: every task of the account waits for it, no task is failed, and
// across all of them the account asks the API about that reset once. When an operator knows it
// is over (drover account resume) they all finish.
func TestWeeklyLimitWaitsWithoutAsking(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startSubscriptionWorker("host-" + e.queue)
	reset := time.Now().Add(3 * 24 * time.Hour).Truncate(time.Second)
	e.fake.SetLimit(subscription, fa.UsageLimit(fa.WindowSevenDay, reset).HeldPastReset())
	first := e.startTasks("weekly-first", "first of the week")
	st := e.waitStatus(first[0], task.StatusWaitingForLimit)
	if st.Wait.LimitType != "seven_day" || !st.Wait.ResetsAt.Equal(reset) {
		t.Fatalf("wait: %+v", st.Wait)
	}
	others := e.startTasks("weekly", "second of the week", "third of the week")
	for _, id := range others {
		e.waitStatus(id, task.StatusWaitingForLimit)
	}
	time.Sleep(3 * time.Second) // long enough for a retry the workflows must not make
	calls := messages(e.fake.Calls().Of(subscription))
	if len(calls) != 1 || calls.MaxPerReset() != 1 {
		t.Fatalf("requests while the weekly limit holds: %d (at most %d per reset); want the one refused", len(calls), calls.MaxPerReset())
	}
	ids := append(first, others...)
	for _, id := range ids {
		st, err := e.tc.State(e.ctx, id)
		if err != nil || st.Status != task.StatusWaitingForLimit || st.Totals.FailedTurns != 0 {
			t.Fatalf("task %s while the limit holds: %+v, %v", id, st, err)
		}
	}
	accts, err := store.ListAccounts(e.ctx, e.db())
	if err != nil || len(accts) != 1 || accts[0].Reason != task.WaitUsageLimit || accts[0].Waiting != 3 {
		t.Fatalf("accounts: %+v, %v", accts, err)
	}
	e.fake.LiftLimit(subscription)
	e.mustDrover("account", "resume", accts[0].AccountID, "--spread", "200ms")
	for _, id := range ids {
		if st := e.waitTurns(id, 1); st.Totals.FailedTurns != 0 {
			t.Errorf("task %s: %+v", id, st)
		}
	}
	if got := messages(e.fake.Calls().Of(subscription)).MaxPerReset(); got != 1 {
		t.Errorf("the weekly reset was asked about %d times", got)
	}
}

// A spend cap: the task waits for an operator (waiting_for_spend_cap) without asking the API
// again, and finishes once `drover account resume` says the cap was raised.
func TestSpendCapWaitsForTheOperator(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startSubscriptionWorker("host-" + e.queue)
	e.fake.SetLimit(subscription, fa.SpendCapLimit(""))
	ids := e.startTasks("spend-cap", "spend some")
	st := e.waitStatus(ids[0], task.StatusWaitingForSpendCap)
	if st.Wait == nil || st.Wait.Reason != task.WaitSpendCap || !st.Wait.RetryAt.IsZero() {
		t.Fatalf("wait: %+v", st.Wait)
	}
	time.Sleep(2 * time.Second)
	if calls := messages(e.fake.Calls().Of(subscription)); len(calls) != 1 {
		t.Fatalf("%d requests while the spend cap holds, want the one refused", len(calls))
	}
	out := e.mustDrover("account", "list")
	if !strings.Contains(out, "spend_cap") {
		t.Fatalf("account list does not show the cap:\n%s", out)
	}
	accts, err := store.ListAccounts(e.ctx, e.db())
	if err != nil || len(accts) != 1 {
		t.Fatalf("accounts: %+v, %v", accts, err)
	}
	e.fake.LiftLimit(subscription)
	e.mustDrover("account", "resume", accts[0].AccountID)
	if st := e.waitTurns(ids[0], 1); st.Totals.FailedTurns != 0 || st.Status != task.StatusIdle {
		t.Fatalf("after resume: %+v", st)
	}
}

// Six tasks on an account of two turns at once, over two hosts: the API never has more than two
// of the account's requests in flight, and the others queue (queued_for_account, with their
// place). A host killed while it holds a slot does not keep it: once its lease has run out, the
// account runs two turns at once again, although the task that held the slot never comes back.
func TestAccountConcurrencyCapAcrossHosts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setResponder(func(r *fa.Request) (fa.Response, bool) {
		return fa.Reply(fa.Text("done")).WithDelay(1500 * time.Millisecond), true
	})
	hostA := "host-a-" + e.queue
	a := e.startSubscriptionWorker(hostA, "--account-max-concurrent-turns", "2")
	prompts := make([]string, 6)
	for i := range prompts {
		prompts[i] = fmt.Sprintf("job %d", i)
	}
	var (
		mu     sync.Mutex
		queued []task.Wait
	)
	stop := make(chan struct{})
	var watch sync.WaitGroup
	ids := e.startTasks("cap", prompts...)
	watch.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			for _, id := range ids {
				if st, err := e.tc.State(e.ctx, id); err == nil && st.Status == task.StatusQueuedForAccount && st.Wait != nil {
					mu.Lock()
					queued = append(queued, *st.Wait)
					mu.Unlock()
				}
			}
		}
	})
	var held []string
	e.waitFor("host a to hold a slot", func() bool {
		rows, err := e.db().Query(e.ctx, `SELECT task_id FROM account_slots WHERE host_id = $1`, hostA)
		if err != nil {
			return false
		}
		held, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err == nil && len(held) > 0
	})
	// Host a took every task; b takes them over when a dies.
	e.startSubscriptionWorker("host-b-"+e.queue, "--account-max-concurrent-turns", "2")
	a.kill()
	// The tasks whose slots the dead host held never come back for them.
	for _, id := range held {
		if err := e.tc.Cancel(e.ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	var rest []string
	for _, id := range ids {
		if !slices.Contains(held, id) {
			rest = append(rest, id)
			if st := e.waitTurns(id, 1); st.Totals.FailedTurns != 0 {
				t.Errorf("task %s: %+v", id, st)
			}
		}
	}
	close(stop)
	watch.Wait()
	accts, err := store.ListAccounts(e.ctx, e.db())
	if err != nil || len(accts) != 1 {
		t.Fatalf("accounts: %+v, %v", accts, err)
	}
	e.waitFor("the dead host's leases to run out", func() bool {
		ac, err := store.GetAccount(e.ctx, e.db(), accts[0].AccountID)
		return err == nil && ac.Running == 0
	})
	again := time.Now()
	for _, id := range rest {
		if _, err := e.tc.Prompt(e.ctx, id, task.Prompt{Text: "once more"}, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range rest {
		if st := e.waitTurns(id, 2); st.Totals.FailedTurns != 0 {
			t.Errorf("task %s: %+v", id, st)
		}
	}

	main := e.fake.Calls().Of(subscription).Class(fa.ClassMain)
	if got := main.MaxInFlight(); got > 2 {
		t.Errorf("%d of the account's requests in flight at once, over its 2", got)
	}
	if got := main.Started(again, time.Now().Add(time.Hour)).MaxInFlight(); got != 2 {
		t.Errorf("after the dead host's leases ran out, %d requests in flight at most; want the account's 2", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(queued) == 0 || queued[0].Reason != task.WaitConcurrency || queued[0].Position < 1 {
		t.Errorf("no task was seen queued for its account with a position: %+v", queued)
	}
}

// A limit that outlasts its announced reset: after the reset exactly one turn asks (and is
// refused again); the other waiting tasks send nothing, nothing is marked failed, and the account
// waits for its next look rather than asking again at once.
func TestLimitPastItsResetIsAskedAboutOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startSubscriptionWorker("host-" + e.queue)
	// The first task's CLI is started before the limit is set, so that the limit is met by a
	// warm process and the reset need not allow for a CLI's start on a loaded machine; the
	// other tasks are held by the account before they start one.
	ids := e.startTasks("held-first", "warm up")
	e.waitTurns(ids[0], 1)
	reset := time.Now().Add(20 * time.Second).Truncate(time.Second)
	e.fake.SetLimit(subscription, fa.UsageLimit(fa.WindowFiveHour, reset).HeldPastReset())
	limitedFrom := time.Now()
	if _, err := e.tc.Prompt(e.ctx, ids[0], task.Prompt{Text: "first"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(ids[0], task.StatusWaitingForLimit)
	ids = append(ids, e.startTasks("held", "second", "third")...)
	for _, id := range ids[1:] {
		e.waitStatus(id, task.StatusWaitingForLimit)
	}
	if time.Now().After(reset) {
		t.Fatal("the tasks took until the reset to pause; the test proves nothing")
	}
	e.waitFor("one turn to ask after the reset", func() bool {
		return len(messages(e.fake.Calls().Of(subscription)).Started(reset, time.Now().Add(time.Hour))) > 0
	})
	time.Sleep(8 * time.Second) // the others' turns come back within their jitter; they must not ask
	calls := messages(e.fake.Calls().Of(subscription)).Started(limitedFrom, time.Now().Add(time.Hour))
	if len(calls) != 2 || len(calls.Limited()) != 2 || len(calls.Started(reset, time.Now().Add(time.Hour))) != 1 {
		t.Fatalf("requests: %d (%d refused, %d after the reset); want the first refusal and one look after the reset",
			len(calls), len(calls.Limited()), len(calls.Started(reset, time.Now().Add(time.Hour))))
	}
	for _, id := range ids {
		st, err := e.tc.State(e.ctx, id)
		if err != nil || st.Status != task.StatusWaitingForLimit || st.Totals.FailedTurns != 0 {
			t.Fatalf("task %s after the limit outlasted its reset: %+v, %v; want it waiting", id, st, err)
		}
	}
	accts, err := store.ListAccounts(e.ctx, e.db())
	if err != nil || len(accts) != 1 {
		t.Fatalf("accounts: %+v, %v", accts, err)
	}
	look := calls.Started(reset, time.Now().Add(time.Hour))[0]
	if next := accts[0].BlockedUntil; !next.After(look.Start.Add(engine.DefaultLimitRecheckFirst)) {
		t.Fatalf("the account's next look is at %s; want it the first recheck after the refused look (%s)", next, look.Start)
	}
	e.fake.LiftLimit(subscription)
	e.mustDrover("account", "resume", accts[0].AccountID, "--spread", "200ms")
	for i, id := range ids {
		want := 1
		if i == 0 {
			want = 2 // its warm-up turn, then "first"
		}
		if st := e.waitTurns(id, want); st.Totals.FailedTurns != 0 {
			t.Errorf("task %s: %+v", id, st)
		}
	}
}

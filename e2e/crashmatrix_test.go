package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// crashCase is one point of a turn at which the worker is SIGKILLed. Turn 1 of the task commits
// normally; the worker dies in turn 2, and a new worker of the same host finishes it.
type crashCase struct {
	name string
	// args are the worker's extra flags.
	args []string
	// attempt1 scripts the fake API for the first attempt of turn 2, before its prompt is sent.
	attempt1 func(c *crashRun)
	// reach waits until the worker stands at the case's point and checks that it does.
	reach func(c *crashRun)
	// attempt2 runs once the worker is dead and its CLI's tree gone: it checks what the dead
	// attempt left behind and scripts the fake for the retry.
	attempt2 func(c *crashRun)
	// committedBy is the attempt whose result the turn keeps: 2, or 1 when the first attempt's
	// commit reached Postgres.
	committedBy int
	// check holds the case's own checks, once the turn is over.
	check func(c *crashRun)
}

// crashRun is one crash case in progress.
type crashRun struct {
	*env
	proxy *pgtest.Proxy
	tool  *toolScript
	host  string
	id    string
	w     *workerProc
	// prompt is turn 2's.
	prompt string
	// markTurn2 and markKill are the fake's request marks before turn 2 and at the kill: the
	// requests of the first attempt of turn 2 lie between them, the retry's after markKill.
	markTurn2, markKill int
	// lost is the killed attempt's id.
	lost string
	// release ends the holds of the fake's answers that the case no longer needs; closed when
	// the test ends.
	release chan struct{}
	// proceed lets the first attempt's answer finish (cases that hold the commit).
	proceed chan struct{}
}

// TestCrashMatrix SIGKILLs the worker at each point of a turn, restarts it (same host) and checks
// that the turn finishes by itself within seconds: the prompt once in every request the API
// receives and once in the CLI's resumed transcript, the cost counted once (drover's turns table,
// the workflow and the committing attempt's complete events agree with the fake's ledger of
// billed answers), no tool call left open in the log, the log gapless, no process of the CLI's
// tree left, and Temporal saying the lost attempt was reported failed by the restarted worker
// (WorkerLost), not timed out.
//
// What the CLI does when a retry follows a lost attempt: the retry resumes the session where the
// turn began and sends the prompt again, so the model answers the prompt again from scratch. A
// tool the lost attempt ran (or was running) runs again, once more, but never beside its first
// run: the guard kills the CLI's whole tree when the worker dies, before the new worker starts.
func TestCrashMatrix(t *testing.T) {
	t.Parallel()
	for _, cc := range crashCases {
		t.Run(cc.name, func(t *testing.T) {
			t.Parallel()
			runCrash(t, cc)
		})
	}
}

var crashCases = []crashCase{
	{
		// (a) Before the prompt is written to the CLI. Processes are not kept between turns, so
		// turn 2 starts a CLI of its own (resuming turn 1's session). The worker is killed once
		// the executor row is 'starting' (the attempt has claimed the task), the CLI process
		// runs, and the fake has received no request of turn 2. The point is checked after the
		// kill from the dead worker's whole log: the engine logs "claude started" once the CLI
		// answered its initialize request, right before it writes the prompt; the line is absent
		// for the attempt, so the prompt was never written.
		name:        "before-prompt",
		args:        []string{"--keep-alive", "-1s"},
		committedBy: 2,
		attempt1:    func(c *crashRun) {},
		reach: func(c *crashRun) {
			deadline := time.Now().Add(time.Minute)
			for {
				x, err := store.GetExecutor(c.ctx, c.db(), c.id)
				if err == nil && x.Turn == 2 && x.Status == store.ExecutorStarting && cliProcessOf(c.host) != 0 {
					break
				}
				if time.Now().After(deadline) {
					c.t.Fatal("turn 2's CLI never ran while its attempt was starting")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if n := c.fake.Mark() - c.markTurn2; n != 0 {
				c.t.Fatalf("the fake already had %d requests of turn 2: the CLI was past its start", n)
			}
		},
		attempt2: func(c *crashRun) {
			if c.w.logLine(`msg="claude started"`, "turn=2", "attempt=1") {
				c.t.Fatal(`the lost worker logged "claude started" for turn 2's first attempt: its prompt may have been written`)
			}
			if n := c.fake.Mark() - c.markTurn2; n != 0 {
				c.t.Fatalf("the lost attempt reached the fake (%d requests)", n)
			}
			c.fake.Enqueue(fa.Reply(fa.Text("turn two done")))
		},
	},
	{
		// (b) While text streams: the fake holds the answer after its first text block, which is
		// in the log when the worker is killed.
		name:        "text-streaming",
		committedBy: 2,
		attempt1: func(c *crashRun) {
			c.fake.Enqueue(fa.Reply(fa.Text("PARTIAL-OUTPUT-OF-A-LOST-ATTEMPT"), fa.Text("never finished")).WithHold(1, c.release))
		},
		reach: func(c *crashRun) {
			c.waitFor("the partial answer in the log", func() bool {
				return hasText(turnEvents(c.events(c.id), 2, 1), "PARTIAL-OUTPUT")
			})
			if n := len(c.fake.LedgerSince(c.markTurn2)); n != 0 {
				c.t.Fatalf("the held answer has ended already (%d ledger entries)", n)
			}
		},
		attempt2: func(c *crashRun) { c.fake.Enqueue(fa.Reply(fa.Text("turn two done"))) },
		check: func(c *crashRun) {
			c.noLostOutputResumed("PARTIAL-OUTPUT")
		},
	},
	{
		// (c) While a tool runs: the model asks for a Bash command that records its pid and its
		// child's, then sleeps 30 s. The worker is killed once both pids are recorded; the
		// guard kills the tool's processes with the CLI. The retry sends the prompt again and
		// the model asks for the same command again: the tool runs a second time, and the
		// markers show the first run never reached its end and none of its processes was
		// alive when the second started.
		name:        "tool-running",
		committedBy: 2,
		attempt1: func(c *crashRun) {
			c.tool.setSleep(30)
			c.fake.Enqueue(fa.Reply(fa.Text("running the tool"), fa.UseBash(c.tool.command())))
		},
		reach: func(c *crashRun) {
			c.waitFor("the tool's first run to start its child", func() bool {
				runs := c.tool.runs()
				return len(runs) == 1 && runs[0].child != 0
			})
			if r := c.tool.runs()[0]; !alive(r.pid) || !alive(r.child) {
				c.t.Fatalf("the tool's processes %v are not running", r.pids())
			}
		},
		attempt2: func(c *crashRun) {
			if r := c.tool.runs()[0]; anyAlive(r.pids()) {
				c.t.Fatalf("the first run's processes %v outlived the worker's CLI tree", r.pids())
			}
			c.tool.setSleep(0)
			c.fake.Enqueue(fa.Reply(fa.UseBash(c.tool.command())), fa.Reply(fa.Text("turn two done")))
		},
		check: func(c *crashRun) {
			runs := c.checkToolRanTwice()
			if runs[0].ended() {
				c.t.Errorf("the first run reached its end marker: it was not cut by the crash")
			}
			c.checkLostToolCallClosed()
		},
	},
	{
		// (d) After the tool ran and before the model answered its result: the tool (a quick
		// run of the same script) has written its end marker and the CLI's next request, which
		// carries the tool's result, has reached the fake, which answers nothing while the
		// worker is killed. The retry sends the prompt again; the model asks for the tool
		// again: it runs a second time, after the first ended.
		name:        "tool-result-unanswered",
		committedBy: 2,
		attempt1: func(c *crashRun) {
			c.tool.setSleep(0)
			c.fake.Enqueue(fa.Reply(fa.UseBash(c.tool.command())))
			// The queue is empty for the follow-up request: it waits here, unanswered.
			c.setResponder(func(r *fa.Request) (fa.Response, bool) {
				if r.Class != fa.ClassMain {
					return fa.Response{}, false
				}
				<-c.release
				return fa.Reply(fa.Text("too late")), true
			})
		},
		reach: func(c *crashRun) {
			c.waitFor("the tool's result to reach the fake", func() bool {
				runs := c.tool.runs()
				if len(runs) != 1 || !runs[0].ended() {
					return false
				}
				return slices.ContainsFunc(c.requestsSince(c.markTurn2), func(r fa.Request) bool { return len(r.ToolResults()) > 0 })
			})
		},
		attempt2: func(c *crashRun) {
			c.fake.Enqueue(fa.Reply(fa.UseBash(c.tool.command())), fa.Reply(fa.Text("turn two done")))
		},
		check: func(c *crashRun) {
			runs := c.checkToolRanTwice()
			if !runs[0].ended() || !runs[0].end.Before(runs[1].start) {
				c.t.Errorf("the first run ended at %v, the second started at %v: want the first over before", runs[0].end, runs[1].start)
			}
		},
	},
	{
		// (e) After the result and before the commit: the proxy between the worker and
		// Postgres holds the "begin" of the commit's transaction. By then the engine has stored
		// the turn's events, the complete event included; Postgres has seen nothing of the
		// commit (no open transaction), and the turn's record still says running.
		name:        "result-stored-before-commit",
		committedBy: 2,
		attempt1:    holdFirstAnswer,
		reach: func(c *crashRun) {
			c.holdCommitAt(pgtest.SimpleQuery("begin"), pgtest.HoldBefore)
			if len(completes(turnEvents(c.events(c.id), 2, 1))) != 1 {
				c.t.Fatal("the first attempt's complete event is not stored")
			}
			if n, q := c.openTransactions(); n != 0 {
				c.t.Fatalf("Postgres has %d open transactions (%q): the commit had begun", n, q)
			}
			c.turnStatusIs(task.TurnRunning)
		},
		attempt2: func(c *crashRun) { c.fake.Enqueue(fa.Reply(fa.Text("turn two done"))) },
		check: func(c *crashRun) {
			// The lost attempt's complete stays in the log, labelled attempt 1; it is not counted.
			if n := len(completes(turnEvents(c.events(c.id), 2, 1))); n != 1 {
				c.t.Errorf("turn 2 attempt 1 has %d complete events in the log, want its one", n)
			}
		},
	},
	{
		// (f) During the commit, before it is applied: the proxy holds the commit's "commit".
		// Postgres has run the transaction's statements (one session of the database sits idle
		// in a transaction whose last statement updated the turn's record or the session's
		// mirror) but not committed
		// them. The worker dies; the proxy drops the held "commit" and closes the connection, so
		// Postgres rolls the transaction back and the retry runs the turn again.
		name:        "commit-in-flight",
		committedBy: 2,
		attempt1:    holdFirstAnswer,
		reach: func(c *crashRun) {
			c.holdCommitAt(pgtest.SimpleQuery("commit"), pgtest.HoldBefore)
			n, q := c.openTransactions()
			// The commit's last statement records the turn, or the session's mirror with it.
			if n != 1 || !strings.Contains(q, "task_turns") && !strings.Contains(q, "session_mirrors") {
				c.t.Fatalf("Postgres has %d open transactions, the last statement %q: want the commit's", n, q)
			}
			c.turnStatusIs(task.TurnRunning)
		},
		attempt2: func(c *crashRun) {
			c.waitFor("Postgres to roll the lost commit back", func() bool { n, _ := c.openTransactions(); return n == 0 })
			c.turnStatusIs(task.TurnRunning)
			c.fake.Enqueue(fa.Reply(fa.Text("turn two done")))
		},
	},
	{
		// (f') During the commit, after it is applied: the proxy passes the "commit" on and
		// holds Postgres's answer. The turn's record is committed (seen from another
		// connection) but the worker never learns it. The retry finds the turn committed and
		// answers from its record: no new request reaches the API, and the CLI does not run.
		name:        "commit-applied-unacknowledged",
		committedBy: 1,
		attempt1:    holdFirstAnswer,
		reach: func(c *crashRun) {
			c.holdCommitAt(pgtest.SimpleQuery("commit"), pgtest.HoldReplies)
			c.waitFor("the commit to be applied", func() bool {
				rec, err := store.GetTurn(c.ctx, c.db(), c.id, 2)
				return err == nil && rec.Status == task.TurnCompleted
			})
		},
		attempt2: func(c *crashRun) {},
		check: func(c *crashRun) {
			if n := len(c.requestsSince(c.markKill)); n != 0 {
				c.t.Errorf("the retry of a committed turn sent %d requests to the API", n)
			}
		},
	},
}

// holdFirstAnswer holds the first attempt's answer after its first block, until proceed.
func holdFirstAnswer(c *crashRun) {
	c.fake.Enqueue(fa.Reply(fa.Text("FIRST-ATTEMPT-ANSWER"), fa.Text("and its end")).WithHold(1, c.proceed))
}

// holdCommitAt waits for the first attempt's answer to stream, arms the proxy to hold the
// worker's next transaction at msg, lets the answer finish, and waits for the hold.
func (c *crashRun) holdCommitAt(msg []byte, mode pgtest.HoldMode) {
	c.t.Helper()
	c.waitFor("the first attempt's answer to stream", func() bool {
		return hasText(turnEvents(c.events(c.id), 2, 1), "FIRST-ATTEMPT-ANSWER")
	})
	held := c.proxy.HoldAt(msg, mode)
	close(c.proceed)
	select {
	case <-held:
	case <-c.ctx.Done():
		c.t.Fatal("the worker never committed the turn")
	}
	if n := fa.SumLedger(c.fake.LedgerSince(c.markTurn2)).Responses; n != 1 {
		c.t.Fatalf("the fake billed %d whole answers in turn 2, want the first attempt's one", n)
	}
}

func runCrash(t *testing.T, cc crashCase) {
	e := newEnv(t)
	c := &crashRun{env: e, host: "host-" + e.queue, id: e.taskID("crash"),
		release: make(chan struct{}), proceed: make(chan struct{})}
	t.Cleanup(func() { close(c.release) }) // before the fake closes: it waits for held answers
	c.proxy = pgtest.NewProxy(t, pgtest.AdminAddr())
	e.workerDSN = c.proxy.DSN(e.dsn)
	c.tool = newToolScript(t, e.world, 0)
	c.w = e.startWorker(c.host, cc.args...)

	e.fake.Enqueue(fa.Reply(fa.Text("turn one done")))
	if _, err := e.tc.Start(e.ctx, c.id, e.params(), task.Prompt{Text: "prompt one"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitTurns(c.id, 1)

	c.prompt = "prompt two survives " + cc.name
	c.markTurn2 = e.fake.Mark()
	cc.attempt1(c)
	if _, err := e.tc.Prompt(e.ctx, c.id, task.Prompt{Text: c.prompt}, ""); err != nil {
		t.Fatal(err)
	}
	cc.reach(c)
	x, err := store.GetExecutor(e.ctx, e.db(), c.id)
	if err != nil || x.Turn != 2 || !strings.HasSuffix(x.AttemptID, "/1") {
		t.Fatalf("executor row at the kill: %+v, %v; want turn 2's first attempt", x, err)
	}
	c.lost = x.AttemptID

	killed := time.Now()
	c.w.kill()
	c.markKill = e.fake.Mark()
	// The worker's guard kills the CLI's whole tree (tools and their children) when the worker
	// dies, before any new worker starts.
	e.waitWithin(15*time.Second, "the lost attempt's CLI tree to end", func() bool { return len(taggedProcesses(c.host)) == 0 })
	t.Logf("%s: SIGKILL to the CLI's tree gone: %s", cc.name, time.Since(killed).Round(time.Millisecond))
	cc.attempt2(c)

	c.w = e.startWorker(c.host, cc.args...)
	recovery := e.waitRetry(c.id, c.lost).Sub(killed)
	// How soon is a figure, not asserted: that the restarted worker, not the 10 s heartbeat
	// timeout, ended the lost attempt is checked on Temporal's record (checkRecovered).
	t.Logf("%s: SIGKILL to retry begun: %s", cc.name, recovery.Round(time.Millisecond))
	st := e.waitTurns(c.id, 2)
	c.checkRecovered(cc, st)
	if cc.check != nil {
		cc.check(c)
	}
	c.w.stop()
	if left := taggedProcesses(c.host); len(left) != 0 {
		t.Errorf("processes of the host's CLI trees left after its worker stopped: %v", left)
	}
}

// checkRecovered checks what every crash case promises once the turn is over.
func (c *crashRun) checkRecovered(cc crashCase, st task.State) {
	t := c.t
	t.Helper()
	if st.Totals.Turns != 2 || st.Totals.FailedTurns != 0 {
		t.Fatalf("state after the crash: %+v", st)
	}
	rec2, err := store.GetTurn(c.ctx, c.db(), c.id, 2)
	if err != nil {
		t.Fatal(err)
	}
	if rec2.Status != task.TurnCompleted || rec2.Attempts != cc.committedBy {
		t.Errorf("turn 2: %s after %d attempts that ran it, want completed after %d", rec2.Status, rec2.Attempts, cc.committedBy)
	}
	// Temporal's own record: the lost attempt was ended by the restarted worker's report.
	if got := c.retryFailures(c.id); !slices.Equal(got, []string{task.ErrTypeWorkerLost}) {
		t.Errorf("RunTurn retries were caused by %v, want one %s", got, task.ErrTypeWorkerLost)
	}

	// The prompt once in every request of turn 2 the API received, and in the final
	// conversation, which holds turn 1 as well.
	reqs := c.requestsSince(c.markTurn2)
	for _, r := range reqs {
		if n := r.PromptCount(c.prompt); n != 1 {
			t.Errorf("request %d carries the prompt %d times", r.Seq, n)
		}
	}
	all := c.fake.MainRequests()
	final := all[len(all)-1]
	if final.PromptCount(c.prompt) != 1 || final.PromptCount("prompt one") != 1 {
		t.Errorf("the final request carries prompt two %d times and prompt one %d times",
			final.PromptCount(c.prompt), final.PromptCount("prompt one"))
	}
	// The CLI's own transcript: the conversation it resumes from holds each prompt once.
	chain := c.transcriptChain(c.configDir, st.SessionID, st.LastMessageUUID)
	if promptCount(chain, c.prompt) != 1 || promptCount(chain, "prompt one") != 1 {
		t.Errorf("the transcript's conversation holds prompt two %d times and prompt one %d times",
			promptCount(chain, c.prompt), promptCount(chain, "prompt one"))
	}

	evs := c.checkLogWhole(c.id)
	if !slices.ContainsFunc(turnEvents(evs, 2, 2), func(ev loggedEvent) bool { return ev.Agent.Type == events.TypeTurnRetry }) && cc.committedBy == 2 {
		t.Error("the retry logged no turn_retry")
	}

	// Cost counted once: the turns table, the workflow, and the complete events of the
	// attempts that committed agree with each other and with the fake's ledger of the answers
	// those attempts were billed.
	done1 := completes(turnEvents(evs, 1, 1))
	done2 := completes(turnEvents(evs, 2, cc.committedBy))
	if len(done1) != 1 || len(done2) != 1 {
		t.Fatalf("complete events: turn 1 %d, turn 2 attempt %d %d; want one each", len(done1), cc.committedBy, len(done2))
	}
	cost1, cost2 := done1[0].Agent.Data.CostUSD, done2[0].Agent.Data.CostUSD
	totals, err := store.TaskTotals(c.ctx, c.db(), c.id)
	if err != nil {
		t.Fatal(err)
	}
	if !near(totals.CostUSD, cost1+cost2) || !near(st.Totals.CostUSD, cost1+cost2) || !near(rec2.CostUSD, cost2) {
		t.Errorf("cost: turns table %.6f (turn 2 %.6f), workflow %.6f, complete events %.6f + %.6f",
			totals.CostUSD, rec2.CostUSD, st.Totals.CostUSD, cost1, cost2)
	}
	ledger1 := fa.SumLedger(c.ledgerBetween(0, c.markTurn2))
	ledger2 := fa.SumLedger(c.ledgerBetween(c.markKill, 1<<30))
	if cc.committedBy == 1 {
		ledger2 = fa.SumLedger(c.ledgerBetween(c.markTurn2, c.markKill))
	}
	if !near(cost1, ledger1.CostUSD) || !near(cost2, ledger2.CostUSD) {
		t.Errorf("cost: turn 1 %.6f, ledger %.6f; turn 2 %.6f, ledger of the committing attempt %.6f",
			cost1, ledger1.CostUSD, cost2, ledger2.CostUSD)
	}
	if int64(ledger2.Usage.OutputTokens) != rec2.OutputTokens {
		t.Errorf("turn 2 output tokens: record %d, ledger %d", rec2.OutputTokens, ledger2.Usage.OutputTokens)
	}
	if n := c.fake.Unscripted(); n != 0 {
		t.Errorf("%d requests found nothing scripted", n)
	}
}

// requestsSince returns the main requests after mark.
func (c *crashRun) requestsSince(mark int) []fa.Request {
	var out []fa.Request
	for _, r := range c.fake.MainRequests() {
		if r.Seq > mark {
			out = append(out, r)
		}
	}
	return out
}

// ledgerBetween returns the ledger entries of the requests after from, up to to.
func (c *crashRun) ledgerBetween(from, to int) []fa.LedgerEntry {
	var out []fa.LedgerEntry
	for _, e := range c.fake.LedgerSince(from) {
		if e.Seq <= to {
			out = append(out, e)
		}
	}
	return out
}

// turnStatusIs checks turn 2's record as another connection sees it.
func (c *crashRun) turnStatusIs(want task.TurnStatus) {
	c.t.Helper()
	rec, err := store.GetTurn(c.ctx, c.db(), c.id, 2)
	if err != nil {
		c.t.Fatal(err)
	}
	if rec.Status != want {
		c.t.Fatalf("turn 2 is %s, want %s", rec.Status, want)
	}
}

// noLostOutputResumed checks that nothing of the lost attempt's output reached the conversation
// the retry resumed: not the final request, not the transcript's chain; the log keeps it,
// labelled with the lost attempt.
func (c *crashRun) noLostOutputResumed(text string) {
	c.t.Helper()
	all := c.fake.MainRequests()
	for _, m := range all[len(all)-1].Messages {
		if strings.Contains(m.Text(), text) {
			c.t.Errorf("the final request carries the lost attempt's output: %q", m.Text())
		}
	}
	st, err := c.tc.State(c.ctx, c.id)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, m := range c.transcriptChain(c.configDir, st.SessionID, st.LastMessageUUID) {
		if promptCount([]map[string]any{m}, text) > 0 {
			c.t.Errorf("the transcript's conversation holds the lost attempt's output")
		}
	}
	evs := c.events(c.id)
	if !hasText(turnEvents(evs, 2, 1), text) || hasText(turnEvents(evs, 2, 2), text) {
		c.t.Error("the log does not label the lost attempt's output with attempt 1")
	}
}

// checkToolRanTwice checks that the tool ran exactly twice, the second run to its end, with no
// process of the first alive when the second started, and returns the runs.
func (c *crashRun) checkToolRanTwice() []toolRun {
	c.t.Helper()
	runs := c.tool.runs()
	if len(runs) != 2 {
		c.t.Fatalf("the tool ran %d times, want twice (once per attempt): %+v", len(runs), runs)
	}
	if runs[1].live != "" {
		c.t.Errorf("processes %s of the first run were alive when the second started", runs[1].live)
	}
	if !runs[1].ended() || !runs[0].start.Before(runs[1].start) {
		c.t.Errorf("runs: %+v", runs)
	}
	if anyAlive(runs[0].pids()) || anyAlive(runs[1].pids()) {
		c.t.Errorf("tool processes still run: %v %v", runs[0].pids(), runs[1].pids())
	}
	return runs
}

// checkLostToolCallClosed checks that the lost attempt's tool call is closed in the log by the
// retry, as lost.
func (c *crashRun) checkLostToolCallClosed() {
	c.t.Helper()
	evs := c.events(c.id)
	var lostCall string
	for _, ev := range turnEvents(evs, 2, 1) {
		if ev.Agent.Type == events.TypeToolCall {
			lostCall = ev.Agent.ToolCallID
		}
	}
	if lostCall == "" {
		c.t.Fatal("the lost attempt logged no tool call")
	}
	closed := slices.ContainsFunc(turnEvents(evs, 2, 2), func(ev loggedEvent) bool {
		return ev.Agent.Type == events.TypeToolUpdate && ev.Agent.ToolCallID == lostCall &&
			ev.Agent.ToolStatus == events.ToolError && strings.Contains(ev.Agent.ToolError, "lost")
	})
	if !closed {
		c.t.Error("the retry did not close the lost attempt's tool call as lost")
	}
}

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	workflowpb "go.temporal.io/api/workflow/v1"

	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// A worker SIGKILLed while it runs the turns of two tasks comes back (same host) and has both
// turns retried within seconds, not after the 10 s heartbeat timeout: it reports the attempts
// it lost as failed through their task tokens as it starts, and Temporal's record of why each
// attempt ended says so (WorkerLost, not a heartbeat timeout).
func TestRestartedWorkerRetriesItsTurnsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := "host-" + e.queue
	w := e.startWorker(host)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	ids := []string{e.taskID("first"), e.taskID("second")}
	e.setResponder(func(r *fa.Request) (fa.Response, bool) {
		if r.Class != fa.ClassMain {
			return fa.Response{}, false
		}
		return fa.Reply(fa.Text("STREAMING "+r.LastUserText()), fa.Text("never finished")).WithHold(1, release), true
	})
	for _, id := range ids {
		if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "question of " + id}, ""); err != nil {
			t.Fatal(err)
		}
	}
	lost := map[string]string{}
	for _, id := range ids {
		e.waitFor("the turn of "+id+" to stream", func() bool { return hasText(e.events(id), "STREAMING") })
		x, err := store.GetExecutor(e.ctx, e.db(), id)
		if err != nil {
			t.Fatal(err)
		}
		lost[id] = x.AttemptID
	}
	// The retries send the same prompts: from now on they are answered at once.
	e.setResponder(func(r *fa.Request) (fa.Response, bool) {
		if r.Class != fa.ClassMain {
			return fa.Response{}, false
		}
		return fa.Reply(fa.Text("answered after the restart")), true
	})
	// The kill waits until both turns' heartbeats are fresh on Temporal's record, so the
	// restarted worker has most of the 10 s heartbeat timeout to report them, even on a loaded
	// machine where a worker takes seconds to start.
	e.waitFreshHeartbeats(ids, 4*time.Second)
	killed := time.Now()
	w.kill()
	e.startWorker(host)
	for _, id := range ids {
		took := e.waitRetry(id, lost[id]).Sub(killed)
		// A figure: the behaviour is checked below on Temporal's record (WorkerLost, which a
		// retry after the heartbeat timeout would not show), not by a time.
		t.Logf("%s: SIGKILL to retry begun: %s", id, took.Round(time.Millisecond))
	}
	for _, id := range ids {
		st := e.waitTurns(id, 1)
		if st.Totals.FailedTurns != 0 {
			t.Errorf("%s: %+v", id, st)
		}
		if got := e.retryFailures(id); !slices.Equal(got, []string{task.ErrTypeWorkerLost}) {
			t.Errorf("%s: RunTurn retries were caused by %v, want one %s", id, got, task.ErrTypeWorkerLost)
		}
	}
}

// Postgres is unreachable for 30 s in the middle of a turn: the worker's DATABASE_URL points at
// a proxy that the test cuts (every connection broken, new ones refused) while text streams. The
// model's answer completes during the outage (the fake's ledger bills it whole and the CLI
// writes it to its transcript while the turn's record still says running); the proxy is
// restored 30 s after the cut. The turn completes in its first attempt and no event is lost:
// the message_chunk texts of the log are the text blocks the fake served, in order, each once,
// and the log's sequence numbers have no gap.
func TestDatabaseUnreachableMidTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	proxy := pgtest.NewProxy(t, pgtest.AdminAddr())
	e.workerDSN = proxy.DSN(e.dsn)
	e.startWorker("host-" + e.queue)

	var served []string
	var blocks []fa.Block
	for i := range 12 {
		served = append(served, fmt.Sprintf("outage chunk %02d of the answer", i+1))
		blocks = append(blocks, fa.Text(served[i]))
	}
	release := make(chan struct{})
	e.fake.Enqueue(fa.Reply(blocks...).WithHold(3, release))
	id := e.taskID("pg-outage")
	if _, err := e.tc.Start(e.ctx, id, e.params(), task.Prompt{Text: "answer through the outage"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the first chunks in the log", func() bool { return hasText(e.events(id), served[2]) })

	proxy.Cut()
	cut := time.Now()
	close(release)
	e.waitFor("the answer to complete during the outage", func() bool {
		whole := slices.ContainsFunc(e.fake.Ledger(), func(l fa.LedgerEntry) bool {
			return l.Class == fa.ClassMain && l.Completed && l.Blocks == len(served)
		})
		return whole && transcriptHolds(e.configDir, served[len(served)-1])
	})
	rec, err := store.GetTurn(e.ctx, e.db(), id, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != task.TurnRunning || hasText(e.events(id), served[len(served)-1]) {
		t.Fatalf("during the outage the turn is %s and its last chunk is stored: the outage did not hold", rec.Status)
	}
	select {
	case <-time.After(30*time.Second - time.Since(cut)):
	case <-e.ctx.Done():
		t.Fatal(e.ctx.Err())
	}
	if proxy.Refused() == 0 {
		t.Fatal("the worker never tried to reach Postgres during the outage")
	}
	t.Logf("connections refused during the 30 s outage: %d", proxy.Refused())
	proxy.Restore()

	st := e.waitTurns(id, 1)
	t.Logf("outage restored to turn ended: %s", time.Since(cut.Add(30*time.Second)).Round(time.Millisecond))
	if st.Totals.FailedTurns != 0 {
		t.Fatalf("state: %+v", st)
	}
	// Every piece of the served text is in the log once, in order: the text the log streamed
	// for the answer is the served blocks, whole.
	evs := e.checkLogWhole(id)
	var logged []string
	for _, m := range messagesOf(evs) {
		logged = append(logged, m.Text)
	}
	if want := strings.Join(served, ""); len(logged) != 1 || logged[0] != want {
		t.Errorf("the text in the log:\n%q\nserved:\n%q", logged, want)
	}
	rec, err = store.GetTurn(e.ctx, e.db(), id, 1)
	if err != nil {
		t.Fatal(err)
	}
	led := fa.SumLedger(e.fake.Ledger())
	done := completes(evs)
	if rec.Status != task.TurnCompleted || rec.Attempts != 1 || len(done) != 1 ||
		!near(rec.CostUSD, led.CostUSD) || !near(done[0].Agent.Data.CostUSD, led.CostUSD) {
		t.Errorf("turn record %s after %d attempts, cost %.6f; %d complete events; ledger %.6f",
			rec.Status, rec.Attempts, rec.CostUSD, len(done), led.CostUSD)
	}
}

// transcriptHolds reports whether a session transcript under configDir holds text.
func transcriptHolds(configDir, text string) bool {
	files, _ := filepath.Glob(filepath.Join(configDir, "projects", "*", "*.jsonl"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), text) {
			return true
		}
	}
	return false
}

// waitFreshHeartbeats waits until Temporal's record holds, for every task of ids, a heartbeat of
// its running RunTurn received at most within ago (a worker sends them every 2 s).
func (e *env) waitFreshHeartbeats(ids []string, within time.Duration) {
	e.t.Helper()
	e.waitFor("fresh heartbeats of the running turns", func() bool {
		for _, id := range ids {
			d, err := e.tc.Temporal.DescribeWorkflow(e.ctx, id, "")
			if err != nil || d.RawResponse == nil {
				return false
			}
			if !slices.ContainsFunc(d.RawResponse.GetPendingActivities(), func(a *workflowpb.PendingActivityInfo) bool {
				return a.GetActivityType().GetName() == task.ActivityRunTurn && time.Since(a.GetLastHeartbeatTime().AsTime()) <= within
			}) {
				return false
			}
		}
		return true
	})
}

package e2e

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"

	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// Any host continues any task. Each test runs two `drover worker` processes, hosts A and B, each
// with its own HOME and CLI config folder, sharing the world's workspace. Host A starts alone and
// runs the task's first turn, so the task's turns belong to it; B starts afterwards and takes
// the task only when A is lost or drains. The session reaches B through its mirror in Postgres
// alone: B's config folder holds nothing of it before.

// pair is a test's two hosts.
type pair struct {
	*env
	a, b         string // host ids
	dirsA, dirsB hostDirs
}

func newPair(t *testing.T) *pair {
	t.Helper()
	e := newEnv(t)
	return &pair{env: e, a: "a-" + e.queue, b: "b-" + e.queue, dirsA: e.newHostDirs("a"), dirsB: e.newHostDirs("b")}
}

// startA starts host A's worker with extra flags and waits until it polls.
func (p *pair) startA(args ...string) *workerProc { return p.startHost(p.a, p.dirsA, args...) }

// startB starts host B's worker with extra flags and waits until it polls.
func (p *pair) startB(args ...string) *workerProc { return p.startHost(p.b, p.dirsB, args...) }

func (p *pair) startHost(id string, dirs hostDirs, args ...string) *workerProc {
	p.t.Helper()
	w := p.startWorkerIn(id, dirs, args...)
	p.waitFor("worker "+id+" to start", func() bool {
		if w.exited() {
			p.t.Fatalf("worker %s exited:\n%s", id, w.log.String())
		}
		return w.logLine(`msg="drover worker started"`)
	})
	return w
}

// firstTurnOnA starts the task with prompt on host A (the only worker), answered with answer,
// and waits until the turn is committed there.
func (p *pair) firstTurnOnA(id, prompt, answer string) task.State {
	p.t.Helper()
	p.fake.Enqueue(fa.Reply(fa.Text(answer)))
	if _, err := p.tc.Start(p.ctx, id, p.params(), task.Prompt{Text: prompt}, ""); err != nil {
		p.t.Fatal(err)
	}
	st := p.waitTurnsOK(id, 1)
	p.executorOn(id, 1, p.a)
	if st.SessionID == "" || st.Totals.FailedTurns != 0 {
		p.t.Fatalf("turn 1: %+v", st)
	}
	return st
}

// waitTurnsOK waits until the task has ended n turns, none of them failed.
func (p *pair) waitTurnsOK(id string, n int) task.State {
	p.t.Helper()
	var st task.State
	p.waitFor(fmt.Sprintf("task %s to end %d turns", id, n), func() bool {
		var err error
		st, err = p.tc.State(p.ctx, id)
		if err == nil && st.Totals.FailedTurns != 0 {
			p.t.Fatalf("a turn failed: %s", st.LastError)
		}
		return err == nil && st.Totals.Turns >= n && st.RunningTurn == 0 && len(st.Pending) == 0
	})
	return st
}

// waitStreamed waits until an attempt of turn streamed text, failing when a turn fails.
func (p *pair) waitStreamed(id string, turn int, text string) {
	p.t.Helper()
	p.waitFor(fmt.Sprintf("%q in turn %d's log", text, turn), func() bool {
		if st, err := p.tc.State(p.ctx, id); err == nil && st.Totals.FailedTurns != 0 {
			p.t.Fatalf("a turn failed: %s", st.LastError)
		}
		return hasText(turnEvents(p.events(id), turn, 0), text)
	})
}

// executorOn checks that the task's executor row says host ran (or runs) turn.
func (p *pair) executorOn(id string, turn int, host string) store.Executor {
	p.t.Helper()
	x, err := store.GetExecutor(p.ctx, p.db(), id)
	if err != nil {
		p.t.Fatal(err)
	}
	if x.Turn != turn || x.HostID != host {
		p.t.Fatalf("executor row: turn %d on host %s, want turn %d on %s", x.Turn, x.HostID, turn, host)
	}
	return x
}

// drainMove sends w SIGTERM while it runs turn of the task, and returns how long until host to
// claims the turn on the executor row (polled every 100 ms).
func (p *pair) drainMove(w *workerProc, id string, turn int, to string) time.Duration {
	p.t.Helper()
	start := time.Now()
	w.term()
	p.waitFor(fmt.Sprintf("host %s to claim turn %d", to, turn), func() bool {
		x, err := store.GetExecutor(p.ctx, p.db(), id)
		return err == nil && x.Turn == turn && x.HostID == to
	})
	return time.Since(start).Round(time.Millisecond)
}

// sessionFilesIn lists the files of a session in a CLI config folder: its transcript, the
// session's folder beside it and its file-history backups.
func sessionFilesIn(configDir, sessionID string) []string {
	var out []string
	roots := []string{filepath.Join(configDir, "file-history", sessionID)}
	for _, t := range transcriptFiles(configDir, sessionID) {
		out = append(out, t)
		roots = append(roots, strings.TrimSuffix(t, ".jsonl"))
	}
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				out = append(out, path)
			}
			return nil
		})
	}
	return out
}

// runTurnEnds lists, in history order, how the RunTurn activities of the task that did not
// complete ended in Temporal's record: an application failure's type, or "timeout:" and the
// timeout's kind.
func (e *env) runTurnEnds(taskID string) []string {
	e.t.Helper()
	var out []string
	e.walkRunTurns(taskID, func(ev *historypb.HistoryEvent) {
		if a := ev.GetActivityTaskFailedEventAttributes(); a != nil {
			out = append(out, a.GetFailure().GetApplicationFailureInfo().GetType())
		}
		if ev.GetActivityTaskCanceledEventAttributes() != nil {
			out = append(out, "canceled")
		}
		if a := ev.GetActivityTaskTimedOutEventAttributes(); a != nil {
			f := a.GetFailure()
			for f.GetTimeoutFailureInfo() == nil && f.GetCause() != nil {
				f = f.GetCause()
			}
			out = append(out, "timeout:"+f.GetTimeoutFailureInfo().GetTimeoutType().String())
		}
	})
	return out
}

// logLineOf returns the first line of the worker's log that holds every one of parts, or "".
func (w *workerProc) logLineOf(parts ...string) string {
	for line := range strings.Lines(w.log.String()) {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// logAttr returns the value of key in a line of the worker's text log.
func logAttr(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if strings.HasPrefix(line, key+"=") {
		i = -1
	} else if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		if j := strings.Index(v[1:], `"`); j >= 0 {
			return v[1 : j+1]
		}
	}
	v, _, _ = strings.Cut(v, " ")
	return v
}

// logTime returns when a line of the worker's log was written.
func (e *env) logTime(line string) time.Time {
	e.t.Helper()
	at, err := time.Parse(time.RFC3339Nano, logAttr(line, "time"))
	if err != nil {
		e.t.Fatalf("the log line %q has no time: %v", line, err)
	}
	return at
}

// mainRequestsSince returns the fake's main requests after mark.
func mainRequestsSince(f *fa.Server, mark int) []fa.Request {
	var out []fa.Request
	for _, r := range f.MainRequests() {
		if r.Seq > mark {
			out = append(out, r)
		}
	}
	return out
}

// ledgerBetween returns the fake's ledger entries of the requests after from, up to to.
func ledgerBetween(f *fa.Server, from, to int) []fa.LedgerEntry {
	var out []fa.LedgerEntry
	for _, e := range f.LedgerSince(from) {
		if e.Seq <= to {
			out = append(out, e)
		}
	}
	return out
}

// carries reports whether a message of role in r holds text.
func carries(r fa.Request, role, text string) bool {
	return slices.ContainsFunc(r.Messages, func(m fa.Message) bool { return m.Role == role && strings.Contains(m.Text(), text) })
}

// chainHolds reports whether an entry of the transcript chain holds text.
func chainHolds(chain []map[string]any, text string) bool {
	return slices.ContainsFunc(chain, func(m map[string]any) bool {
		b, _ := json.Marshal(m["message"])
		return bytes.Contains(b, []byte(text))
	})
}

// checkCostOnce checks that the task's cost is counted once: turn's record, the turns table's
// total and the workflow's agree, and turn's cost is what the fake billed for the answers of
// the attempt that committed it (the requests after mark, up to through).
func (p *pair) checkCostOnce(id string, turn int, st task.State, mark, through int) {
	p.t.Helper()
	recs, err := store.ListTurns(p.ctx, p.db(), id)
	if err != nil {
		p.t.Fatal(err)
	}
	sum := 0.0
	for _, r := range recs {
		sum += r.CostUSD
	}
	rec := recs[turn-1]
	totals, err := store.TaskTotals(p.ctx, p.db(), id)
	if err != nil {
		p.t.Fatal(err)
	}
	if !near(totals.CostUSD, sum) || !near(st.Totals.CostUSD, sum) {
		p.t.Errorf("cost: turns %.6f in all, turns table total %.6f, workflow %.6f", sum, totals.CostUSD, st.Totals.CostUSD)
	}
	billed := fa.SumLedger(ledgerBetween(p.fake, mark, through))
	if !near(rec.CostUSD, billed.CostUSD) || rec.CostUSD <= 0 {
		p.t.Errorf("turn %d cost %.6f, the fake billed the committing attempt %.6f (%d answers)", turn, rec.CostUSD, billed.CostUSD, billed.Responses)
	}
	if int64(billed.Usage.OutputTokens) != rec.OutputTokens {
		p.t.Errorf("turn %d output tokens: record %d, ledger %d", turn, rec.OutputTokens, billed.Usage.OutputTokens)
	}
}

// TestHostLostTurnFinishesElsewhere: host A is SIGKILLed while its answer to turn 2 streams and
// never comes back. Host B sees A's beat go stale, reports A's attempt failed as HostLost, takes
// the turn, restores the session from its mirror into its own empty config folder and resumes
// at turn 1's commit. The model sees turn 1 (its unique words reach the API from B), the prompt
// is once in what B sent and in B's resumed transcript, and the cost is counted once.
func TestHostLostTurnFinishesElsewhere(t *testing.T) {
	t.Parallel()
	p := newPair(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the fake closes: it waits for held answers
	id := p.taskID("lost")
	wa := p.startA()

	const prompt1 = "Remember the word QUILLFEATHER for later."
	st1 := p.firstTurnOnA(id, prompt1, "Remembered: TANGERINE-ORBIT.")
	wb := p.startB()
	if files := sessionFilesIn(p.dirsB.configDir, st1.SessionID); len(files) != 0 {
		t.Fatalf("host B holds files of the session before it ran any turn: %v", files)
	}

	const prompt2 = "prompt two survives the loss of its host"
	markTurn2 := p.fake.Mark()
	p.fake.Enqueue(fa.Reply(fa.Text("PARTIAL-ANSWER-OF-A"), fa.Text("never finished")).WithHold(1, release))
	if _, err := p.tc.Prompt(p.ctx, id, task.Prompt{Text: prompt2}, ""); err != nil {
		t.Fatal(err)
	}
	p.waitStreamed(id, 2, "PARTIAL-ANSWER-OF-A")
	p.executorOn(id, 2, p.a)
	// The held answer left the queue; this one is B's.
	p.fake.Enqueue(fa.Reply(fa.Text("turn two done on B")))

	killed := time.Now()
	wa.kill()
	p.waitWithin(15*time.Second, "A's CLI tree to end", func() bool { return len(taggedProcesses(p.a)) == 0 })
	markKill := p.fake.Mark()

	var claimed, done time.Time
	p.waitFor("turn 2 to complete on B", func() bool {
		if x, err := store.GetExecutor(p.ctx, p.db(), id); err == nil && claimed.IsZero() && x.HostID == p.b && x.Turn == 2 {
			claimed = time.Now()
		}
		rec, err := store.GetTurn(p.ctx, p.db(), id, 2)
		if err == nil && rec.Status == task.TurnCompleted {
			done = time.Now()
			return true
		}
		if err == nil && rec.Finished() {
			t.Fatalf("turn 2 ended %s: %s", rec.Status, rec.Error)
		}
		return false
	})
	st := p.waitTurnsOK(id, 2)
	started := wb.logLineOf(`msg="claude started"`, "turn=2")
	if started == "" {
		t.Fatal(`B logged no "claude started" for turn 2`)
	}
	// B reports A's attempt through its task token when Temporal still has it open; when A's
	// heartbeat timed out first, its retry waits unstarted on A's queue and only the task's
	// host_lost signal (always sent) moves it. Either way the workflow reassigns as HostLost.
	reported := wb.logLineOf("reported an attempt of a lost host as failed", "lost_host="+p.a)
	signalled := wb.logLineOf("the turn's host is lost; moving the turn")
	reassigned := wb.logLineOf("host stopped running the turn; assigning another", "reason="+task.ErrTypeHostLost)
	if claimed.IsZero() {
		claimed = done
	}
	// From the SIGKILL: B reports A's attempt (A's beat is stale), the workflow reassigns the
	// turn (logged by whichever worker runs the workflow task; B here, A being dead), B claims
	// the turn on the executor row (polled every 100 ms), B's CLI runs, the turn is committed.
	since := func(line string) string {
		if line == "" {
			return "none"
		}
		return p.logTime(line).Sub(killed).Round(time.Millisecond).String()
	}
	t.Logf("figure: failover_reported=%s failover_signalled=%s failover_reassigned=%s failover_claim=%s failover_cli_started=%s failover_turn_done=%s",
		since(reported), since(signalled), since(reassigned), claimed.Sub(killed).Round(time.Millisecond), since(started),
		done.Sub(killed).Round(time.Millisecond))
	if reassigned == "" || reported == "" && signalled == "" {
		t.Fatal("B did not hand A's turn on (no report, no signal), or the workflow did not reassign the turn for it")
	}

	if st.Totals.Turns != 2 || st.Totals.FailedTurns != 0 || st.SessionID != st1.SessionID {
		t.Fatalf("state: %+v; want two turns of session %s", st, st1.SessionID)
	}
	p.executorOn(id, 2, p.b)
	// Temporal's record: A's attempt ended as HostLost, reported by B, or A's RunTurn was
	// cancelled by the workflow on B's signal; nothing else failed.
	if got := p.runTurnEnds(id); !slices.Equal(got, []string{task.ErrTypeHostLost}) && !slices.Equal(got, []string{"canceled"}) {
		t.Errorf("RunTurn attempts ended %v, want one %s (or cancelled on the host_lost signal)", got, task.ErrTypeHostLost)
	}
	if !wb.logLine("restored the session from its mirror", "session_id="+st.SessionID) {
		t.Error("B did not restore the session from its mirror")
	}

	// What B sent: the model saw turn 1 (the prompt's word and the answer's), and the prompt of
	// turn 2 once.
	reqs := mainRequestsSince(p.fake, markKill)
	if len(reqs) == 0 {
		t.Fatal("B sent no request")
	}
	for _, r := range reqs {
		if n := r.PromptCount(prompt2); n != 1 {
			t.Errorf("request %d from B carries prompt two %d times", r.Seq, n)
		}
		if r.PromptCount(prompt1) != 1 || !carries(r, "user", "QUILLFEATHER") || !carries(r, "assistant", "TANGERINE-ORBIT") {
			t.Errorf("request %d from B does not carry turn 1 once: the model did not see the earlier turn", r.Seq)
		}
		if carries(r, "assistant", "PARTIAL-ANSWER-OF-A") {
			t.Errorf("request %d from B carries the lost attempt's partial answer", r.Seq)
		}
	}
	// B's own transcript, now written: the conversation it resumed holds each prompt once.
	chain := p.transcriptChain(p.dirsB.configDir, st.SessionID, st.LastMessageUUID)
	if promptCount(chain, prompt2) != 1 || promptCount(chain, prompt1) != 1 || !chainHolds(chain, "turn two done on B") {
		t.Errorf("B's transcript conversation: prompt two %d times, prompt one %d times, B's answer there %v",
			promptCount(chain, prompt2), promptCount(chain, prompt1), chainHolds(chain, "turn two done on B"))
	}

	rec2, err := store.GetTurn(p.ctx, p.db(), id, 2)
	if err != nil {
		t.Fatal(err)
	}
	if rec2.Attempts != 2 {
		t.Errorf("turn 2 ran %d attempts, want 2 (A's lost one and B's)", rec2.Attempts)
	}
	p.checkCostOnce(id, 1, st, 0, markTurn2)
	p.checkCostOnce(id, 2, st, markKill, 1<<30)
	if lost := fa.SumLedger(ledgerBetween(p.fake, markTurn2, markKill)); lost.Responses != 0 || lost.Incomplete != 1 {
		t.Errorf("A's attempt: %d billed answers, %d cut; want its held answer cut", lost.Responses, lost.Incomplete)
	}
	if n := p.fake.Unscripted(); n != 0 {
		t.Errorf("%d requests found nothing scripted", n)
	}
	p.checkLogWhole(id)
	if left := taggedProcesses(p.a); len(left) != 0 {
		t.Errorf("processes of A's CLI trees outlived it: %v", left)
	}
}

// TestTaskMovesAcrossHostsWithStaleCopy: a task's three turns run on A, then B, then A again. A
// drains in the middle of turn 2 (B finishes it) and comes back with the same host id and config
// folder, whose transcript stops before B's turn; B drains in the middle of turn 3 and A finishes
// it. A must resume from the mirror's newer state, never from its own stale file.
func TestTaskMovesAcrossHostsWithStaleCopy(t *testing.T) {
	t.Parallel()
	p := newPair(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	id := p.taskID("moves")
	drain := []string{"--drain-timeout", "1s"}
	wa := p.startA(drain...)

	const prompt1 = "turn one: the word is AMBERLIGHT"
	st1 := p.firstTurnOnA(id, prompt1, "answer one: AMBERLIGHT noted")
	wb := p.startB(drain...)

	// Turn 2 starts on A, which drains; B takes it.
	const prompt2 = "turn two: the word is COBALTRIVER"
	p.fake.Enqueue(fa.Reply(fa.Text("A-ON-TURN-TWO"), fa.Text("never finished")).WithHold(1, release))
	if _, err := p.tc.Prompt(p.ctx, id, task.Prompt{Text: prompt2}, ""); err != nil {
		t.Fatal(err)
	}
	p.waitStreamed(id, 2, "A-ON-TURN-TWO")
	p.fake.Enqueue(fa.Reply(fa.Text("turn two answered by B: SAFFRONTIDE")))
	moved := p.drainMove(wa, id, 2, p.b)
	p.waitFor("A to exit", wa.exited)
	p.waitTurnsOK(id, 2)
	p.executorOn(id, 2, p.b)

	// A comes back as itself: its config folder still holds its copy of the session, which
	// knows nothing of B's turn.
	stale := transcriptFiles(p.dirsA.configDir, st1.SessionID)
	if len(stale) != 1 {
		t.Fatalf("A's copy of the session: %v", stale)
	}
	if b, err := os.ReadFile(stale[0]); err != nil || bytes.Contains(b, []byte("SAFFRONTIDE")) {
		t.Fatalf("A's copy is not stale (%v): it holds B's turn", err)
	}
	wa = p.startA(drain...)

	// Turn 3 starts on B (the task's host now), which drains; A takes it.
	const prompt3 = "turn three: what were the words?"
	p.fake.Enqueue(fa.Reply(fa.Text("B-ON-TURN-THREE"), fa.Text("never finished")).WithHold(1, release))
	if _, err := p.tc.Prompt(p.ctx, id, task.Prompt{Text: prompt3}, ""); err != nil {
		t.Fatal(err)
	}
	p.waitStreamed(id, 3, "B-ON-TURN-THREE")
	p.executorOn(id, 3, p.b)
	p.fake.Enqueue(fa.Reply(fa.Text("turn three done on A")))
	markMove := p.fake.Mark()
	movedBack := p.drainMove(wb, id, 3, p.a)
	t.Logf("figure: drain_move_a_to_b=%s drain_move_b_to_a=%s", moved, movedBack)
	st := p.waitTurnsOK(id, 3)
	p.waitFor("B to exit", wb.exited)
	p.executorOn(id, 3, p.a)
	if st.Totals.Turns != 3 || st.Totals.FailedTurns != 0 || st.SessionID != st1.SessionID {
		t.Fatalf("state: %+v", st)
	}

	restored := wa.logLineOf("restored the session from its mirror", "turn=3", "session_id="+st.SessionID)
	if restored == "" {
		t.Fatal("A did not restore the session from its mirror before turn 3")
	}
	t.Logf("A's restore: %s", restored)
	// What A sent for turn 3 holds B's turn 2, and every prompt once.
	reqs := mainRequestsSince(p.fake, markMove)
	if len(reqs) == 0 {
		t.Fatal("A sent no request for turn 3")
	}
	for _, r := range reqs {
		if !carries(r, "assistant", "SAFFRONTIDE") {
			t.Errorf("request %d from A lacks B's turn 2: A resumed its stale copy", r.Seq)
		}
		for _, pr := range []string{prompt1, prompt2, prompt3} {
			if n := r.PromptCount(pr); n != 1 {
				t.Errorf("request %d from A carries %q %d times", r.Seq, pr, n)
			}
		}
	}
	// A's own transcript was replaced by the mirror's before the resume: the conversation it
	// holds now runs through B's turn 2 to A's turn 3.
	chain := p.transcriptChain(p.dirsA.configDir, st.SessionID, st.LastMessageUUID)
	if !chainHolds(chain, "SAFFRONTIDE") || !chainHolds(chain, "turn three done on A") {
		t.Errorf("A's transcript conversation lacks B's turn 2 or its own turn 3 (%d entries)", len(chain))
	}
	for _, pr := range []string{prompt1, prompt2, prompt3} {
		if n := promptCount(chain, pr); n != 1 {
			t.Errorf("A's transcript conversation holds %q %d times", pr, n)
		}
	}
	if got := p.runTurnEnds(id); !slices.Equal(got, []string{task.ErrTypeWorkerStopping, task.ErrTypeWorkerStopping}) {
		t.Errorf("RunTurn attempts ended %v, want two %s (A's drain, then B's)", got, task.ErrTypeWorkerStopping)
	}
	p.checkCostOnce(id, 3, st, markMove, 1<<30)
	if left := taggedProcesses(p.b); len(left) != 0 {
		t.Errorf("processes of B's CLI trees outlived it: %v", left)
	}
	p.checkLogWhole(id)
}

// TestDrainLongAndShort: SIGTERM reaches host A while turn 2 runs a long Bash tool. With a drain
// timeout longer than the tool, the turn finishes on A, which exits afterwards, and B never runs
// it. With a short one, A stops the turn at the timeout, its CLI and tool with it, and B finishes
// the turn from turn 1's commit (the model asks for the tool again there). No process of A's
// CLI trees outlives A either way, and the cost is counted once.
func TestDrainLongAndShort(t *testing.T) {
	t.Parallel()
	t.Run("long", func(t *testing.T) {
		t.Parallel()
		runDrain(t, "2m", 8)
	})
	t.Run("short", func(t *testing.T) {
		t.Parallel()
		runDrain(t, "2s", 60)
	})
}

func runDrain(t *testing.T, drainTimeout string, toolSeconds int) {
	p := newPair(t)
	long := toolSeconds < 30
	id := p.taskID("drain")
	tool := newToolScript(t, p.world, toolSeconds)
	wa := p.startA("--drain-timeout", drainTimeout)

	const prompt1 = "turn one: the word is HELIOTROPE"
	p.firstTurnOnA(id, prompt1, "noted HELIOTROPE")
	wb := p.startB()

	const prompt2 = "turn two: run the long tool"
	markTurn2 := p.fake.Mark()
	p.fake.Enqueue(fa.Reply(fa.Text("running the tool"), fa.UseBash(tool.command())))
	if long {
		p.fake.Enqueue(fa.Reply(fa.Text("turn two done on A")))
	}
	if _, err := p.tc.Prompt(p.ctx, id, task.Prompt{Text: prompt2}, ""); err != nil {
		t.Fatal(err)
	}
	p.waitFor("the tool's first run to start its child", func() bool {
		runs := tool.runs()
		return len(runs) == 1 && runs[0].child != 0
	})
	p.executorOn(id, 2, p.a)
	if !long {
		// B's attempt resumes at turn 1 and sends the prompt again: the model asks for the tool
		// again, which runs quickly this time.
		tool.setSleep(0)
		p.fake.Enqueue(fa.Reply(fa.UseBash(tool.command())), fa.Reply(fa.Text("turn two done on B")))
	}
	markTerm := p.fake.Mark()
	termAt := time.Now()
	wa.term()
	p.waitFor("A to exit", wa.exited)
	t.Logf("figure: drain_timeout=%s sigterm_to_exit=%s", drainTimeout, time.Since(termAt).Round(time.Millisecond))
	// No process of A's trees (CLIs, tools, their children) outlives A.
	if left := taggedProcesses(p.a); len(left) != 0 {
		t.Errorf("processes of A's CLI trees outlived it: %v", left)
	}
	if pid := cliProcessOf(p.a); pid != 0 {
		t.Errorf("A's CLI %d outlived it", pid)
	}
	if !wa.logLine(`msg="draining: no new turns; waiting for the running ones"`, "running=1") {
		t.Error("A did not drain a running turn")
	}
	for _, r := range tool.runs() {
		if anyAlive(r.pids()) {
			t.Errorf("the tool's processes %v outlived A", r.pids())
		}
	}

	if long {
		// The turn was over when A exited: it finished there.
		rec, err := store.GetTurn(p.ctx, p.db(), id, 2)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != task.TurnCompleted || rec.Attempts != 1 {
			t.Fatalf("turn 2 when A exited: %s after %d attempts, want completed by A's one", rec.Status, rec.Attempts)
		}
		st := p.waitTurnsOK(id, 2)
		p.executorOn(id, 2, p.a)
		runs := tool.runs()
		if len(runs) != 1 || !runs[0].ended() || !runs[0].end.After(termAt) {
			t.Errorf("the tool ran %d times (%+v), want once, to its end after the SIGTERM", len(runs), runs)
		}
		if wa.logLine("drain timeout") {
			t.Error("A stopped the turn at its drain timeout")
		}
		if wb.logLine(`msg="claude started"`) {
			t.Error("B ran turn 2")
		}
		if got := p.runTurnEnds(id); len(got) != 0 {
			t.Errorf("RunTurn attempts ended %v, want none failed", got)
		}
		p.checkCostOnce(id, 2, st, markTurn2, 1<<30)
	} else {
		st := p.waitTurnsOK(id, 2)
		p.executorOn(id, 2, p.b)
		if st.Totals.FailedTurns != 0 {
			t.Fatalf("state: %+v", st)
		}
		if !wa.logLine("drain timeout: stopped the turns still running", "turns=1") {
			t.Error("A did not stop the turn at its drain timeout")
		}
		if !wb.logLine("restored the session from its mirror", "turn=2") {
			t.Error("B did not restore the session from its mirror")
		}
		// The tool ran twice: A's run was cut and none of its processes lived when B's started.
		runs := tool.runs()
		if len(runs) != 2 || runs[0].ended() || !runs[1].ended() || runs[1].live != "" {
			t.Errorf("tool runs: %+v; want A's cut, B's to its end, none of A's alive at B's start", runs)
		}
		for _, r := range mainRequestsSince(p.fake, markTerm) {
			if r.PromptCount(prompt2) != 1 || r.PromptCount(prompt1) != 1 || !carries(r, "assistant", "noted HELIOTROPE") {
				t.Errorf("request %d from B does not carry turn 1 and prompt two once each", r.Seq)
			}
		}
		chain := p.transcriptChain(p.dirsB.configDir, st.SessionID, st.LastMessageUUID)
		if promptCount(chain, prompt2) != 1 || promptCount(chain, prompt1) != 1 {
			t.Errorf("B's transcript conversation holds prompt two %d times, prompt one %d times",
				promptCount(chain, prompt2), promptCount(chain, prompt1))
		}
		if got := p.runTurnEnds(id); !slices.Equal(got, []string{task.ErrTypeWorkerStopping}) {
			t.Errorf("RunTurn attempts ended %v, want one %s", got, task.ErrTypeWorkerStopping)
		}
		p.checkCostOnce(id, 2, st, markTerm, 1<<30)
	}
	if n := p.fake.Unscripted(); n != 0 {
		t.Errorf("%d requests found nothing scripted", n)
	}
	p.checkLogWhole(id)
}

// TestCorruptMirrorIsRefused: after turn 1 commits on A, one of the session's mirrored chunks is
// altered (its bytes still inflate, to different content of the same size: only the hash tells)
// or deleted; A dies; B, which has no copy of the session, gets turn 2 once A's queue is found
// unserved. B refuses the mirror: the turn fails as SessionMirrorCorrupt after one attempt, the
// task's last error says so, nothing of the session is written in B's config folder and the CLI
// never starts for the turn.
func TestCorruptMirrorIsRefused(t *testing.T) {
	t.Parallel()
	t.Run("altered-chunk", func(t *testing.T) {
		t.Parallel()
		runCorrupt(t, func(p *pair, session, path string, seq int) {
			var data []byte
			var size int
			err := p.db().QueryRow(p.ctx, `SELECT data, data_size FROM session_chunks WHERE session_id = $1 AND path = $2 AND seq = $3`,
				session, path, seq).Scan(&data, &size)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(data)))
			if err != nil || len(raw) != size {
				t.Fatalf("the chunk does not inflate to its %d bytes: %d, %v", size, len(raw), err)
			}
			i := bytes.Index(raw, []byte("IRIDESCENT"))
			if i < 0 {
				t.Fatal("the chunk does not hold turn 1's prompt")
			}
			copy(raw[i:], "IRIDESCENX")
			var buf bytes.Buffer
			fw, _ := flate.NewWriter(&buf, flate.DefaultCompression)
			_, _ = fw.Write(raw)
			_ = fw.Close()
			tag, err := p.db().Exec(p.ctx, `UPDATE session_chunks SET data = $4 WHERE session_id = $1 AND path = $2 AND seq = $3`,
				session, path, seq, buf.Bytes())
			if err != nil || tag.RowsAffected() != 1 {
				t.Fatalf("altering the chunk: %v, %v", tag, err)
			}
		})
	})
	t.Run("missing-chunk", func(t *testing.T) {
		t.Parallel()
		runCorrupt(t, func(p *pair, session, path string, seq int) {
			tag, err := p.db().Exec(p.ctx, `DELETE FROM session_chunks WHERE session_id = $1 AND path = $2 AND seq = $3`, session, path, seq)
			if err != nil || tag.RowsAffected() != 1 {
				t.Fatalf("deleting the chunk: %v, %v", tag, err)
			}
		})
	})
}

func runCorrupt(t *testing.T, corrupt func(p *pair, session, path string, seq int)) {
	p := newPair(t)
	id := p.taskID("corrupt")
	wa := p.startA()
	st1 := p.firstTurnOnA(id, "turn one: the word is IRIDESCENT", "noted")
	wb := p.startB()

	// The transcript's last chunk.
	var path string
	var seq int
	err := p.db().QueryRow(p.ctx, `SELECT path, seq FROM session_chunks
		WHERE session_id = $1 AND path LIKE 'projects/%' AND path LIKE '%.jsonl' AND path NOT LIKE 'projects/%/%/%'
		ORDER BY seq DESC LIMIT 1`, st1.SessionID).Scan(&path, &seq)
	if err != nil {
		t.Fatalf("the transcript's last chunk: %v", err)
	}
	corrupt(p, st1.SessionID, path, seq)

	wa.kill()
	p.waitWithin(15*time.Second, "A's CLI tree to end", func() bool { return len(taggedProcesses(p.a)) == 0 })
	mark := p.fake.Mark()
	if _, err := p.tc.Prompt(p.ctx, id, task.Prompt{Text: "turn two must not run"}, ""); err != nil {
		t.Fatal(err)
	}
	prompted := time.Now()
	st := p.waitTurns(id, 2)
	// A died idle: once its beat is stale, B tells the task its host is lost; the turn, if it
	// was already waiting on A's queue, is cancelled there and given to B.
	t.Logf("figure: idle_host_lost_prompt_to_turn_end=%s", time.Since(prompted).Round(time.Millisecond))
	t.Logf("last error: %s", st.LastError)
	if st.Totals.FailedTurns != 1 || !strings.Contains(st.LastError, task.ErrTypeSessionMirrorCorrupt) ||
		!strings.Contains(st.LastError, "corrupt") || !strings.Contains(st.LastError, path) {
		t.Errorf("state: %d failed turns, last error %q; want turn 2 failed as %s naming %s",
			st.Totals.FailedTurns, st.LastError, task.ErrTypeSessionMirrorCorrupt, path)
	}
	p.executorOn(id, 2, p.b)
	// B refused the mirror, once: no retry (after, maybe, the turn's wait on A's queue was
	// cancelled by the host_lost signal).
	if got := p.runTurnEnds(id); !slices.Equal(got, []string{task.ErrTypeSessionMirrorCorrupt}) &&
		!slices.Equal(got, []string{"canceled", task.ErrTypeSessionMirrorCorrupt}) {
		t.Errorf("RunTurn attempts ended %v, want one %s (after A's queue was given up)", got, task.ErrTypeSessionMirrorCorrupt)
	}
	if got := p.retryFailures(id); len(got) != 0 {
		t.Errorf("RunTurn was retried after %v", got)
	}
	if !wb.logLine("turn attempt failed", "turn=2", "error_type="+task.ErrTypeSessionMirrorCorrupt, "retryable=false") {
		t.Error("B did not log the refused mirror")
	}
	// Nothing of the session reached B's config folder, and the CLI never ran for the turn.
	if files := sessionFilesIn(p.dirsB.configDir, st1.SessionID); len(files) != 0 {
		t.Errorf("B's config folder holds files of the session: %v", files)
	}
	if left, _ := filepath.Glob(filepath.Join(p.dirsB.configDir, "projects", "*", ".restore-*")); len(left) != 0 {
		t.Errorf("B left restore files behind: %v", left)
	}
	if wb.logLine(`msg="claude started"`) {
		t.Error("B started the CLI")
	}
	if n := p.fake.Mark() - mark; n != 0 {
		t.Errorf("the fake received %d requests after turn 1", n)
	}
}

// TestMirrorSizeAndRestore measures what the session mirror stores per turn of a conversation
// with a tool whose large output the CLI keeps apart (tool-results/), and how long host B takes
// to restore the whole session when the task moves there.
func TestMirrorSizeAndRestore(t *testing.T) {
	t.Parallel()
	p := newPair(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	id := p.taskID("size")
	wa := p.startA("--drain-timeout", "1s")

	st := p.firstTurnOnA(id, "turn one: count to twenty thousand next", "I will count with seq when asked.")
	var prevStored, prevRaw int64
	size := func(turn int) {
		chunks, stored, raw, err := store.MirrorSize(p.ctx, p.db(), st.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		var local int64
		for _, f := range sessionFilesIn(p.dirsA.configDir, st.SessionID) {
			if fi, err := os.Stat(f); err == nil {
				local += fi.Size()
			}
		}
		t.Logf("figure: mirror_turn=%d stored_delta=%d raw_delta=%d stored_total=%d raw_total=%d chunks=%d local_files_bytes=%d",
			turn, stored-prevStored, raw-prevRaw, stored, raw, chunks, local)
		prevStored, prevRaw = stored, raw
	}
	size(1)

	p.fake.Enqueue(fa.Reply(fa.Text("Counting."), fa.UseBash("seq 1 20000")),
		fa.Reply(fa.Text("The numbers run from 1 to 20000.")))
	if _, err := p.tc.Prompt(p.ctx, id, task.Prompt{Text: "turn two: run seq 1 20000"}, ""); err != nil {
		t.Fatal(err)
	}
	p.waitTurnsOK(id, 2)
	size(2)
	var results []string
	rows, err := p.db().Query(p.ctx, `SELECT DISTINCT path FROM session_chunks WHERE session_id = $1 AND path LIKE '%tool-results/%'`, st.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		results = append(results, s)
	}
	if rows.Err() != nil || len(results) != 1 {
		t.Fatalf("mirrored tool results: %v, %v; want the seq output's file", results, rows.Err())
	}

	p.fake.Enqueue(fa.Reply(fa.Text(strings.Repeat("A longer answer that sums up the count and what it shows. ", 40))))
	if _, err := p.tc.Prompt(p.ctx, id, task.Prompt{Text: "turn three: sum it up"}, ""); err != nil {
		t.Fatal(err)
	}
	p.waitTurnsOK(id, 3)
	size(3)

	// Turn 4 moves to B, whose config folder is empty: the whole session is restored there.
	wb := p.startB()
	p.fake.Enqueue(fa.Reply(fa.Text("A-ON-TURN-FOUR"), fa.Text("never finished")).WithHold(1, release))
	if _, err := p.tc.Prompt(p.ctx, id, task.Prompt{Text: "turn four: and now?"}, ""); err != nil {
		t.Fatal(err)
	}
	p.waitStreamed(id, 4, "A-ON-TURN-FOUR")
	p.fake.Enqueue(fa.Reply(fa.Text("turn four done on B")))
	wa.term()
	p.waitTurnsOK(id, 4)
	p.executorOn(id, 4, p.b)
	line := wb.logLineOf("restored the session from its mirror", "turn=4")
	if line == "" {
		t.Fatal("B did not restore the session")
	}
	took, err := time.ParseDuration(logAttr(line, "took"))
	if err != nil {
		t.Fatalf("restore line %q: %v", line, err)
	}
	_, stored, raw, _ := store.MirrorSize(p.ctx, p.db(), st.SessionID)
	t.Logf("figure: restore_took=%s restore_files=%s mirror_stored=%d mirror_raw=%d", took, logAttr(line, "files"), stored, raw)

	// The tool's output file came to B as A wrote it.
	a, errA := os.ReadFile(filepath.Join(p.dirsA.configDir, results[0]))
	b, errB := os.ReadFile(filepath.Join(p.dirsB.configDir, results[0]))
	if errors.Join(errA, errB) != nil || !bytes.Equal(a, b) || !bytes.Contains(b, []byte("\n20000")) {
		t.Errorf("the tool result on B (%d bytes, %v) is not A's (%d bytes, %v)", len(b), errB, len(a), errA)
	}
	if n := p.fake.Unscripted(); n != 0 {
		t.Errorf("%d requests found nothing scripted", n)
	}
}

package e2e

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

var (
	soakN    = flag.Int("soak.n", 3, "TestSoak: how many times to kill the worker, once per turn (make soak: 50)")
	soakSeed = flag.Uint64("soak.seed", 0, "TestSoak: the seed of the kill points (0: from the clock)")
)

// soakPhase is where in a turn TestSoak kills the worker.
type soakPhase int

const (
	// phaseStarting: a random moment in the first 400 ms after the prompt was accepted (the
	// turn is scheduled, the CLI starts, the prompt is written).
	phaseStarting soakPhase = iota
	// phaseStreaming: the model's answer is half streamed.
	phaseStreaming
	// phaseTool: a Bash tool's command runs.
	phaseTool
	// phaseAfterTool: the tool ran and its result reached the API; the model's answer waits.
	phaseAfterTool
	// phaseAnywhere: a random moment in the first 2 s of a turn that streams text, runs a
	// short tool and streams again.
	phaseAnywhere
	numPhases
)

func (p soakPhase) String() string {
	return [...]string{"starting", "streaming text", "tool running", "after the tool", "anywhere"}[p]
}

// The worker is SIGKILLed in the middle of -soak.n turns of one task, each time at a random
// point, and started again; every turn must finish by itself with its prompt once in the
// conversation the API receives and in the CLI's transcript, its cost counted once, the event
// log without gaps, and no process of a lost attempt left running once the turn runs again.
// The test prints a table of what it saw.
func TestSoak(t *testing.T) {
	t.Parallel()
	n := *soakN
	if n < 1 {
		t.Fatalf("-soak.n=%d: want at least one kill", n)
	}
	t.Logf("soak: %d kills", n)
	s := &soakScript{loopScript: newLoopScript[soakPhase]()}
	// The timeout is a safety net: on a loaded machine one kill and its retry take a minute or two.
	l := newWorkerLoop(t, "soak", *soakSeed, envGuard+time.Duration(n)*2*time.Minute, s)
	e, id, host, rng := l.e, l.id, l.host, l.rng
	orphanPIDs := map[int]bool{}

	// Every phase comes once in each round of numPhases turns, in a random order; the first
	// kill of all is while a tool runs, the point most likely to leave a process behind.
	order := []soakPhase{phaseTool}
	rep := soakReport{kills: n}
	for k := 1; k <= n; k++ {
		if len(order) == 0 || k == 2 {
			order = []soakPhase{phaseStarting, phaseStreaming, phaseTool, phaseAfterTool, phaseAnywhere}
			if k == 2 {
				order = slices.DeleteFunc(order, func(p soakPhase) bool { return p == phaseTool })
			}
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		phase := order[0]
		order = order[1:]
		s.setPoint(k, phase)

		accepted := l.prompt(k, soakPrompt(k))
		s.waitForPhase(e, id, k, phase, accepted, rng)

		// Kill: remember the processes of the host's CLIs, kill the worker, and wait until the
		// CLI it ran is gone before the next answers count as the retry's.
		before := tagged(host + "/")
		killedAt := time.Now()
		l.w.kill()
		e.waitFor("the killed worker's CLI to end", func() bool {
			for _, p := range before {
				if len(p.args) > 0 && p.args[0] == suite.claudeBin && alive(p.pid) {
					return false
				}
			}
			return true
		})
		s.markStopped(k)
		l.startWorker()

		// The turn runs again once the model is asked again.
		var again time.Time
		e.waitFor(fmt.Sprintf("turn %d to run again", k), func() bool {
			again = s.firstRetryRequest(k)
			return !again.IsZero()
		})
		rep.recover = append(rep.recover, again.Sub(killedAt))
		if at, ok := retryLogged(e, id, k); ok {
			rep.retry = append(rep.retry, at.Sub(killedAt))
		}
		orphans := survivors(before, soakMarker(k, 0))
		for _, p := range orphans {
			orphanPIDs[p.pid] = true
		}
		if len(orphans) > 0 {
			t.Errorf("turn %d (%s): processes of the lost attempt still run after the worker came back: %v", k, phase, orphans)
		}
		rep.phases = append(rep.phases, phase)
		e.waitTurns(id, k)
	}
	rep.check(t, e, id, s) // queries the workflow: a worker must run
	l.w.stop()
	if left := tagged(host + "/"); len(left) > 0 {
		for _, p := range left {
			orphanPIDs[p.pid] = true
		}
		t.Errorf("processes of the host still run after its worker stopped: %v", left)
	}
	rep.orphans = len(orphanPIDs)
	t.Log("soak results\n" + rep.table())
	if rep.failing() {
		t.Error("soak: some row that must be zero is not")
	}
}

func soakPrompt(k int) string { return fmt.Sprintf("soak turn %d: carry on", k) }

// soakMarker marks the tool command of turn k's attempt after kills kills, so that its
// processes can be found by their command line.
func soakMarker(k, kills int) string { return fmt.Sprintf("soakmark-%d-%d", k, kills) }

// soakScript answers the main conversation of TestSoak: per turn, by phase, and quickly once
// the turn has been killed. It keeps its own ledger of every answer it gave.
type soakScript struct {
	loopScript[soakPhase] // its stopped counts the kills of each turn
	served                []servedAnswer
}

// servedAnswer is one request of the main conversation the fake API answered: which turn
// and attempt it belonged to. What it was billed is in the fake's ledger, under seq.
type servedAnswer struct {
	seq         int
	turn, kills int // the turn, and how often it had been killed when the answer was asked for
	at          time.Time
	userTexts   []string // the text of every user message of the request
	followUp    bool     // the request answered a tool call
}

// firstRetryRequest is when the model was first asked for turn k after its last kill.
func (s *soakScript) firstRetryRequest(k int) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.served {
		if a.turn == k && a.kills == s.stopped[k] && a.kills > 0 {
			return a.at
		}
	}
	return time.Time{}
}

func (s *soakScript) respond(r *fa.Request) (fa.Response, bool) {
	if r.Class != fa.ClassMain {
		return fa.Response{}, false
	}
	k, users := turnOf(r, "soak turn ")
	followUp := len(r.Messages) > 0 && len(r.Messages[len(r.Messages)-1].ToolResults()) > 0

	s.mu.Lock()
	defer s.mu.Unlock()
	kills := s.stopped[k]
	u := fa.Usage{InputTokens: 100 + k, OutputTokens: 10 + kills, CacheReadInputTokens: 1000 + k, CacheCreationInputTokens: 20}
	s.served = append(s.served, servedAnswer{seq: r.Seq, turn: k, kills: kills, at: time.Now(), userTexts: users, followUp: followUp})
	lost := fmt.Sprintf("soak-%d-lost-%d", k, kills)
	var resp fa.Response
	switch {
	case kills > 0 || k == 0:
		resp = fa.Reply(fa.Text(fmt.Sprintf("soak turn %d done", k)))
	case s.point[k] == phaseStarting:
		resp = fa.Reply(fa.Text(lost), fa.Text("and more")).WithHold(1, s.never)
	case s.point[k] == phaseStreaming:
		resp = fa.Reply(fa.Text(lost), fa.Text("never sent")).WithHold(1, s.never)
	case s.point[k] == phaseTool && !followUp:
		resp = fa.Reply(fa.UseBash("echo " + soakMarker(k, kills) + "; sleep 60"))
	case s.point[k] == phaseAfterTool && !followUp:
		resp = fa.Reply(fa.UseBash("echo " + soakMarker(k, kills)))
	case s.point[k] == phaseAnywhere && !followUp:
		resp = fa.Reply(fa.Text(lost+" first"), fa.UseBash("echo "+soakMarker(k, kills)+"; sleep 0.5")).WithDelay(20 * time.Millisecond)
	default: // the answer after a tool, held until the kill
		resp = fa.Reply(fa.Text(lost+" after the tool"), fa.Text("never sent")).WithHold(1, s.never)
	}
	return resp.WithUsage(u), true
}

// waitForPhase returns at the kill point of turn k.
func (s *soakScript) waitForPhase(e *env, id string, k int, phase soakPhase, accepted time.Time, rng *rand.Rand) {
	jitter := func(max time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(max))) }
	switch phase {
	case phaseStarting:
		time.Sleep(time.Until(accepted.Add(jitter(400 * time.Millisecond))))
		return
	case phaseAnywhere:
		time.Sleep(time.Until(accepted.Add(jitter(2 * time.Second))))
		return
	case phaseStreaming:
		lost := fmt.Sprintf("soak-%d-lost-0", k)
		e.waitFor("the answer to stream", func() bool { return logged(e, id, k, lost) })
	case phaseTool:
		e.waitFor("the tool to run", func() bool { return len(withMarker(soakMarker(k, 0))) > 0 })
	case phaseAfterTool:
		e.waitFor("the tool's result to reach the API", func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return slices.ContainsFunc(s.served, func(a servedAnswer) bool { return a.turn == k && a.kills == 0 && a.followUp })
		})
	}
	time.Sleep(jitter(200 * time.Millisecond))
}

// logged reports whether a message of turn k streamed text holding text, however the log cut
// it into events.
func logged(e *env, id string, k int, text string) bool {
	_, ok := streamed(e.events(id), k, text)
	return ok
}

// retryLogged is when the log recorded the retry of turn k.
func retryLogged(e *env, id string, k int) (time.Time, bool) {
	evs, err := store.ListEvents(e.ctx, e.db(), id, 0, 0)
	if err != nil {
		return time.Time{}, false
	}
	for _, ev := range evs {
		if ev.Turn == k && ev.Type == string(events.TypeTurnRetry) {
			return ev.CreatedAt, true
		}
	}
	return time.Time{}, false
}

// withMarker lists the live processes whose command line holds marker.
func withMarker(marker string) []proc {
	var out []proc
	for _, pid := range allPIDs() {
		if args := cmdline(pid); strings.Contains(strings.Join(args, " "), marker) && alive(pid) {
			out = append(out, proc{pid: pid, args: args})
		}
	}
	return out
}

// survivors lists the processes of before still alive (the same process: same start time),
// and those whose command line holds marker.
func survivors(before []proc, marker string) []proc {
	var out []proc
	seen := map[int]bool{}
	for _, p := range before {
		if alive(p.pid) && sameArgs(cmdline(p.pid), p.args) {
			out = append(out, p)
			seen[p.pid] = true
		}
	}
	for _, p := range withMarker(marker) {
		if !seen[p.pid] {
			out = append(out, p)
		}
	}
	return out
}

func sameArgs(a, b []string) bool { return slices.Equal(a, b) }

// soakReport is what TestSoak saw.
type soakReport struct {
	kills   int
	phases  []soakPhase
	recover []time.Duration // kill → the model asked again for the turn
	retry   []time.Duration // kill → the retry logged

	finished, unfinished  int
	dupPromptsAPI         int // turns whose prompt an answered request carried more than once
	lostPromptsAPI        int // … or not at all
	lostOutputAPI         int // requests that carried a lost attempt's output
	dupPromptsTranscript  int
	lostPromptsTranscript int
	costMismatches        int // turns whose recorded cost or tokens differ from the API's bill for the final attempt
	completes             int // turns without exactly one complete event
	totalsMismatch        bool
	gaps, dups            int
	openToolCalls         int
	orphans               int
	lostAttemptAnswers    int     // answers the API completed for attempts that were killed (billed, never counted)
	lostAttemptCut        int     // answers to killed attempts cut short
	lostAttemptCostUSD    float64 // the bill of the completed ones
	billedUSD, countedUSD float64 // the API's bill for final attempts; drover's total
	otherBilled           int     // billed answers outside the main conversation
}

// check fills the report from the task's records and the fake API's ledger.
func (r *soakReport) check(t *testing.T, e *env, id string, s *soakScript) {
	t.Helper()
	n := r.kills
	st, err := e.tc.State(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	served := slices.Clone(s.served)
	ledger := map[int]fa.LedgerEntry{}
	for _, le := range e.fake.Ledger() {
		ledger[le.Seq] = le
	}
	killed := map[int]int{}
	for k, v := range s.stopped {
		killed[k] = v
	}
	s.mu.Unlock()

	// Turns.
	var sumCost float64
	for k := 1; k <= n; k++ {
		rec, err := store.GetTurn(e.ctx, e.db(), id, k)
		if err != nil || rec.Status != task.TurnCompleted {
			r.unfinished++
			t.Errorf("turn %d: %+v, %v", k, rec, err)
			continue
		}
		r.finished++
		sumCost += rec.CostUSD
		// What drover recorded is what the API billed for the answers the final attempt got.
		var bill []fa.LedgerEntry
		for _, a := range served {
			if le, ok := ledger[a.seq]; ok && a.turn == k && a.kills == killed[k] {
				bill = append(bill, le)
			}
		}
		want := fa.SumLedger(bill)
		r.billedUSD += want.CostUSD
		got := fa.Usage{InputTokens: int(rec.InputTokens), OutputTokens: int(rec.OutputTokens),
			CacheReadInputTokens: int(rec.CacheReadTokens), CacheCreationInputTokens: int(rec.CacheCreationTokens)}
		if got != want.Usage || !nearCost(rec.CostUSD, want.CostUSD) || want.Responses == 0 || want.Incomplete > 0 {
			r.costMismatches++
			t.Errorf("turn %d: drover recorded %+v for $%.9f; the API billed the final attempt %d answers, %+v for $%.9f (%d cut short)",
				k, got, rec.CostUSD, want.Responses, want.Usage, want.CostUSD, want.Incomplete)
		}
	}
	if st.Totals.Turns != n || st.Totals.FailedTurns != 0 {
		t.Errorf("state: %d turns, %d failed; want %d and 0", st.Totals.Turns, st.Totals.FailedTurns, n)
	}
	totals, err := store.TaskTotals(e.ctx, e.db(), id)
	if err != nil {
		t.Fatal(err)
	}
	r.countedUSD = totals.CostUSD
	if !nearCost(totals.CostUSD, sumCost) || !nearCost(st.Totals.CostUSD, sumCost) || !nearCost(sumCost, r.billedUSD) {
		r.totalsMismatch = true
		t.Errorf("cost: turns %.9f, turns table total %.9f, workflow %.9f, API bill for final attempts %.9f",
			sumCost, totals.CostUSD, st.Totals.CostUSD, r.billedUSD)
	}
	attributed := map[int]bool{}
	for _, a := range served {
		attributed[a.seq] = true
		le, ok := ledger[a.seq]
		if !ok || a.kills >= killed[a.turn] {
			continue
		}
		if le.Completed {
			r.lostAttemptAnswers++
			r.lostAttemptCostUSD += le.CostUSD
		} else {
			r.lostAttemptCut++
		}
	}
	for seq, le := range ledger {
		if !attributed[seq] && le.Completed {
			r.otherBilled++
			t.Errorf("the API billed an answer outside the main conversation: %+v", le)
		}
	}

	// The conversation the API received: every request of a final attempt carries each prompt
	// so far once, and nothing of a lost attempt.
	for _, a := range served {
		if a.turn == 0 || a.kills != killed[a.turn] {
			continue
		}
		all := strings.Join(a.userTexts, "\n")
		for j := 1; j <= a.turn; j++ {
			switch c := strings.Count(all, soakPrompt(j)); {
			case c > 1:
				r.dupPromptsAPI++
				t.Errorf("a request of turn %d carries prompt %d %d times", a.turn, j, c)
			case c == 0:
				r.lostPromptsAPI++
				t.Errorf("a request of turn %d lacks prompt %d", a.turn, j)
			}
		}
	}
	final := e.fake.MainRequests()
	if len(final) > 0 {
		var body strings.Builder
		for _, m := range final[len(final)-1].Messages {
			body.WriteString(m.Text())
		}
		if strings.Contains(body.String(), "-lost-") {
			r.lostOutputAPI++
			t.Errorf("the last request carries a lost attempt's output")
		}
	}

	// The CLI's transcript: the chain it resumes from holds each prompt once.
	chain := e.transcriptChain(e.configDir, st.SessionID, st.LastMessageUUID)
	for k := 1; k <= n; k++ {
		switch c := promptCount(chain, soakPrompt(k)); {
		case c > 1:
			r.dupPromptsTranscript++
			t.Errorf("the transcript holds prompt %d %d times", k, c)
		case c == 0:
			r.lostPromptsTranscript++
			t.Errorf("the transcript lacks prompt %d", k)
		}
	}
	for _, m := range chain {
		if b, _ := json.Marshal(m); strings.Contains(string(b), "-lost-") {
			r.lostOutputAPI++
			t.Errorf("the transcript's conversation holds a lost attempt's output: %.200s", b)
		}
	}

	// The event log: numbered 1, 2, 3 … without a gap or a repeat, one complete per turn,
	// every tool call closed.
	evs := e.events(id)
	perTurn := map[int]int{}
	open := map[string]bool{}
	for i, ev := range evs {
		want := int64(i + 1)
		switch {
		case i > 0 && ev.Seq == evs[i-1].Seq:
			r.dups++
		case ev.Seq != want && (i == 0 || ev.Seq != evs[i-1].Seq+1):
			r.gaps++
		}
		switch ev.Agent.Type {
		case events.TypeComplete:
			perTurn[ev.Turn]++
		case events.TypeToolCall:
			open[ev.Agent.ToolCallID] = true
		case events.TypeToolUpdate:
			if ev.Agent.ToolStatus == events.ToolComplete || ev.Agent.ToolStatus == events.ToolError {
				delete(open, ev.Agent.ToolCallID)
			}
		}
	}
	if r.gaps+r.dups > 0 {
		t.Errorf("event log: %d gaps, %d repeated sequence numbers", r.gaps, r.dups)
	}
	for k := 1; k <= n; k++ {
		if perTurn[k] != 1 {
			r.completes++
			t.Errorf("turn %d has %d complete events", k, perTurn[k])
		}
	}
	r.openToolCalls = len(open)
	if len(open) > 0 {
		t.Errorf("tool calls left open in the log: %v", open)
	}
}

// nearCost compares dollar amounts summed in different orders.
func nearCost(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(a)) }

// failing reports whether a row that must be zero is not.
func (r *soakReport) failing() bool {
	return r.unfinished > 0 || r.dupPromptsAPI+r.lostPromptsAPI+r.lostOutputAPI > 0 ||
		r.dupPromptsTranscript+r.lostPromptsTranscript > 0 || r.costMismatches+r.completes+r.otherBilled > 0 || r.totalsMismatch ||
		r.gaps+r.dups > 0 || r.openToolCalls > 0 || r.orphans > 0
}

// table renders the report.
func (r *soakReport) table() string {
	var b strings.Builder
	row := func(name, value string) { fmt.Fprintf(&b, "  %-64s %s\n", name, value) }
	perPhase := map[soakPhase]int{}
	for _, p := range r.phases {
		perPhase[p]++
	}
	var phases []string
	for p := range numPhases {
		phases = append(phases, fmt.Sprintf("%s %d", p, perPhase[p]))
	}
	row("worker SIGKILLs (one per turn), by where in the turn", fmt.Sprintf("%d (%s)", r.kills, strings.Join(phases, ", ")))
	row("turns finished by themselves", fmt.Sprintf("%d/%d", r.finished, r.kills))
	row("turns unfinished", strconv.Itoa(r.unfinished))
	row("duplicated prompts in the conversations the API received", strconv.Itoa(r.dupPromptsAPI))
	row("lost prompts in the conversations the API received", strconv.Itoa(r.lostPromptsAPI))
	row("lost attempts' output in the conversation (API, transcript)", strconv.Itoa(r.lostOutputAPI))
	row("duplicated prompts in the CLI's transcript chain", strconv.Itoa(r.dupPromptsTranscript))
	row("lost prompts in the CLI's transcript chain", strconv.Itoa(r.lostPromptsTranscript))
	row("turns whose cost or tokens differ from the API's bill", strconv.Itoa(r.costMismatches))
	row("drover's total cost / the API's bill for final attempts", fmt.Sprintf("$%.6f / $%.6f", r.countedUSD, r.billedUSD))
	row("billed answers outside the main conversation", strconv.Itoa(r.otherBilled))
	row("turns without exactly one complete event", strconv.Itoa(r.completes))
	row("totals (turns table, workflow) differ from the turns or the bill", strconv.FormatBool(r.totalsMismatch))
	row("event-log gaps / repeated sequence numbers", fmt.Sprintf("%d / %d", r.gaps, r.dups))
	row("tool calls left open in the event log", strconv.Itoa(r.openToolCalls))
	row("orphans (a lost attempt's processes alive once it runs again)", strconv.Itoa(r.orphans))
	row("answers billed to killed attempts, not in drover's cost", fmt.Sprintf("%d, $%.6f (%d more cut short)", r.lostAttemptAnswers, r.lostAttemptCostUSD, r.lostAttemptCut))
	row("time to recover, kill → the model asked again (p50 / max)", fmt.Sprintf("%s / %s", percentile(r.recover, 50), percentile(r.recover, 100)))
	row("time to retry, kill → turn_retry logged (p50 / max)", fmt.Sprintf("%s / %s (%d of %d kills)", percentile(r.retry, 50), percentile(r.retry, 100), len(r.retry), r.kills))
	return b.String()
}

// percentile is the p-th percentile of ds, rounded to the millisecond.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return s[i].Round(time.Millisecond)
}

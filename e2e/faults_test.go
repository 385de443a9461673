package e2e

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/faultproxy"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/task"
)

// The network faults a worker and `drover serve` survive (docs/hosts.md, "Network faults"): a
// proxy (internal/testkit/faultproxy) stands on one link, and the fault comes while the task is
// in one phase. The cases are a Latin square (every link meets every fault and every phase, and
// every fault every phase) and the cases beyond it that found a bug; -faults.all runs all 27.

// faultLink is the link the proxy stands on.
type faultLink string

const (
	linkWorkerPostgres faultLink = "worker-postgres"
	linkWorkerTemporal faultLink = "worker-temporal"
	linkServePostgres  faultLink = "serve-postgres"
)

// faultKind is what the proxy does to the link.
type faultKind string

const (
	faultLatency   faultKind = "latency"
	faultReset     faultKind = "reset"
	faultBlackhole faultKind = "blackhole"
)

// faultPhase is what the task does when the fault comes.
type faultPhase string

const (
	duringStreaming faultPhase = "streaming"
	duringApproval  faultPhase = "approval"
	duringLimitWait faultPhase = "limit-wait"
)

const (
	// faultLatencyOf is the delay each way of the latency fault.
	faultLatencyOf = 300 * time.Millisecond
	// faultBlackholeFor is how long a blackhole lasts: longer than every timeout that a silent
	// link trips (RunTurn's heartbeat timeout and a host's staleness, 10 s each), shorter than
	// the 30 s docs/hosts.md names, to keep the suite short.
	faultBlackholeFor = 15 * time.Second
	// faultRecoveryBound is how soon after the link heals the task must end its turn: the bound
	// docs/hosts.md states.
	faultRecoveryBound = 45 * time.Second
	// faultLatencyBound is how soon after a latency begins the task must end its turn while it
	// lasts: every round trip on the link costs twice the latency.
	faultLatencyBound = 2 * time.Minute
)

type faultCase struct {
	link  faultLink
	kind  faultKind
	phase faultPhase
}

func (c faultCase) name() string { return fmt.Sprintf("%s/%s/%s", c.link, c.kind, c.phase) }

// faultsAll runs every link with every fault in every phase rather than the square.
var faultsAll = flag.Bool("faults.all", false, "TestNetworkFaults: every link, fault and phase (27 cases) rather than the Latin square and the cases that found bugs")

// allFaultCases is every link with every fault in every phase.
func allFaultCases() []faultCase {
	var out []faultCase
	for _, l := range []faultLink{linkWorkerPostgres, linkWorkerTemporal, linkServePostgres} {
		for _, k := range []faultKind{faultLatency, faultReset, faultBlackhole} {
			for _, p := range []faultPhase{duringStreaming, duringApproval, duringLimitWait} {
				out = append(out, faultCase{l, k, p})
			}
		}
	}
	return out
}

var faultCases = []faultCase{
	{linkWorkerPostgres, faultLatency, duringStreaming},
	{linkWorkerPostgres, faultReset, duringApproval},
	{linkWorkerPostgres, faultBlackhole, duringLimitWait},
	{linkWorkerTemporal, faultLatency, duringApproval},
	{linkWorkerTemporal, faultReset, duringLimitWait},
	{linkWorkerTemporal, faultBlackhole, duringStreaming},
	{linkServePostgres, faultLatency, duringLimitWait},
	{linkServePostgres, faultReset, duringStreaming},
	{linkServePostgres, faultBlackhole, duringApproval},
	// Beyond the square: a decision sent through the API as its database connections reset.
	{linkServePostgres, faultReset, duringApproval},
	// A worker silent to Temporal longer than the heartbeat timeout while a request waits: the
	// retry takes the running turn over rather than sending the prompt again.
	{linkWorkerTemporal, faultBlackhole, duringApproval},
}

// Each case: the task ends its turn by itself, or waits visibly while it must (the API shows the
// request or the wait); no event is lost or doubled (the log is gapless, the text it streamed is
// what the fake API served, each once; through `drover serve`, the event stream delivers the
// log, each event once, in order); the prompt reached the API in one answered request and no
// request carried it twice; and the turn ends within faultRecoveryBound of the link's healing.
func TestNetworkFaults(t *testing.T) {
	t.Parallel()
	cases := faultCases
	if *faultsAll {
		cases = allFaultCases()
	}
	for _, c := range cases {
		t.Run(c.name(), func(t *testing.T) {
			t.Parallel()
			newFaultRun(t, c).run()
		})
	}
}

// faultRun is one case of TestNetworkFaults.
type faultRun struct {
	faultCase
	e      *env
	proxy  *faultproxy.Proxy
	api    *apiServer
	stream *sseFollower
	id     string
	prompt string
	healed time.Time
}

func newFaultRun(t *testing.T, c faultCase) *faultRun {
	e := newEnv(t)
	r := &faultRun{faultCase: c, e: e, id: e.taskID("fault"), prompt: "work through the " + string(c.kind)}
	switch c.link {
	case linkWorkerPostgres, linkServePostgres:
		r.proxy = faultproxy.New(t, pgtest.AdminAddr())
	case linkWorkerTemporal:
		r.proxy = faultproxy.New(t, e.temporal)
	}
	if c.link == linkWorkerPostgres {
		e.workerDSN = dsnVia(t, e.dsn, r.proxy.Addr())
	}
	r.startWorker()
	// The serve cases read the task through `drover serve`, which reaches Postgres through the
	// proxy; the others read it from Postgres directly.
	if c.link == linkServePostgres {
		r.api = e.startAPI("DROVER_DATABASE_URL=" + dsnVia(t, e.dsn, r.proxy.Addr()))
	} else {
		r.api = e.startAPI()
	}
	return r
}

// dsnVia is the database URL dsn pointed at addr.
func dsnVia(t *testing.T, dsn, addr string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// startWorker runs the case's worker: on the subscription for a limit wait (with short rechecks),
// and through the proxy when it stands between the worker and Temporal.
func (r *faultRun) startWorker() {
	e := r.e
	args := []string{"worker", "--keep-alive", "2m"}
	environ := e.workerEnv("host-"+e.queue, "debug")
	if r.phase == duringLimitWait {
		args = append(args, "--limit-recheck-first", "2s", "--limit-recheck", "4s")
		environ = slices.DeleteFunc(environ, func(kv string) bool { return strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") })
		environ = append(environ, "CLAUDE_CODE_OAUTH_TOKEN="+testOAuthToken)
	}
	if r.link == linkWorkerTemporal {
		environ = setEnv(environ, "TEMPORAL_ADDRESS="+r.proxy.Addr())
	}
	cmd := exec.Command(suite.drover, args...)
	cmd.Env = environ
	launchWorker(e.t, e.t, "host-"+e.queue, cmd)
}

func (r *faultRun) run() {
	switch r.phase {
	case duringStreaming:
		r.streaming()
	case duringApproval:
		r.approval()
	case duringLimitWait:
		r.limitWait()
	}
	if r.kind != faultReset && r.proxy.Held() == 0 {
		r.e.t.Errorf("the %s held nothing on %s: the fault met no traffic", r.kind, r.link)
	}
	r.proxy.Heal()
	r.checkPromptOnce()
	r.checkStream()
}

// inject follows the task's event stream through `drover serve` and, once the stream delivers,
// starts the case's fault.
func (r *faultRun) inject() {
	r.stream = followEvents(r.e, r.api, r.id)
	r.e.waitFor("the event stream to deliver", func() bool { return r.stream.count() > 0 })
	r.e.t.Logf("%s: %s on %s", r.phase, r.kind, r.link)
	switch r.kind {
	case faultLatency:
		r.proxy.SetLatency(faultLatencyOf)
	case faultReset:
		if n := r.proxy.Reset(); n == 0 {
			r.e.t.Fatalf("no connection was open through the proxy to reset")
		}
	case faultBlackhole:
		r.proxy.Blackhole()
	}
}

// heal ends the fault once it has lasted its time: a blackhole faultBlackholeFor from inject
// (at), a reset at once (with a second reset of what was opened since). Latency stays until the
// turn has ended.
func (r *faultRun) heal(at time.Time) {
	switch r.kind {
	case faultBlackhole:
		r.sleepUntil(at.Add(faultBlackholeFor))
	case faultReset:
		r.proxy.Reset()
	}
	if r.kind != faultLatency {
		r.proxy.Heal()
	}
	r.healed = time.Now()
}

// sleepUntil waits until t: the fault's length is the test's input, not a wait for a witness.
func (r *faultRun) sleepUntil(t time.Time) {
	select {
	case <-time.After(time.Until(t)):
	case <-r.e.ctx.Done():
		r.e.t.Fatal(r.e.ctx.Err())
	}
}

// waitEnded waits until the task has ended its turn, within faultRecoveryBound of the healing
// (faultLatencyBound of a latency's start, the latency lasting).
func (r *faultRun) waitEnded() task.State {
	e := r.e
	e.t.Helper()
	bound := faultRecoveryBound
	if r.kind == faultLatency {
		bound = faultLatencyBound
	}
	ctx, cancel := context.WithDeadline(e.ctx, r.healed.Add(bound))
	defer cancel()
	for {
		st, err := e.tc.State(ctx, r.id)
		if err == nil && st.Totals.Turns >= 1 && st.RunningTurn == 0 && len(st.Pending) == 0 {
			e.t.Logf("healed (a latency: begun) to turn ended: %s", time.Since(r.healed).Round(100*time.Millisecond))
			return st
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("the turn did not end within %s of the healing (state %+v, %v)", bound, st, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// streaming: the fault comes while the answer streams; the answer completes meanwhile.
func (r *faultRun) streaming() {
	e := r.e
	var served []string
	var blocks []fa.Block
	for i := range 12 {
		served = append(served, fmt.Sprintf("faulty link chunk %02d of the answer", i+1))
		blocks = append(blocks, fa.Text(served[i]))
	}
	release := make(chan struct{})
	e.fake.Enqueue(fa.Reply(blocks...).WithHold(3, release))
	r.start(e.params())
	e.waitFor("the first chunks in the log", func() bool { return hasText(e.events(r.id), served[2]) })
	at := time.Now()
	r.inject()
	close(release)
	e.waitFor("the answer to complete", func() bool {
		return slices.ContainsFunc(e.fake.Ledger(), func(l fa.LedgerEntry) bool {
			return l.Class == fa.ClassMain && l.Completed && l.Blocks == len(served)
		})
	})
	r.heal(at)
	if st := r.waitEnded(); st.Totals.FailedTurns != 0 {
		e.t.Errorf("state after the fault: %+v", st)
	}
	evs := e.checkLogWhole(r.id)
	var logged []string
	for _, m := range messagesOf(evs) {
		logged = append(logged, m.Text)
	}
	if want := strings.Join(served, ""); len(logged) != 1 || logged[0] != want {
		e.t.Errorf("the text in the log:\n%q\nserved:\n%q", logged, want)
	}
	if n := len(completes(evs)); n != 1 {
		e.t.Errorf("the log has %d complete events, want 1", n)
	}
}

// approval: the fault comes while a request waits for a person, who decides during it.
func (r *faultRun) approval() {
	e := r.e
	marker := filepath.Join(e.workspace, "approved.txt")
	e.fake.Enqueue(
		fa.Reply(fa.Text("I will write the marker."), fa.UseBash("echo approved > "+marker)),
		fa.Reply(fa.Text("Marker written.")),
	)
	r.start(e.supervisedParams())
	req := e.waitAwaiting(r.id, 1)[0]
	r.waitVisible(`"pending_approvals":1`)
	at := time.Now()
	r.inject()
	if r.link == linkServePostgres {
		// The person decides through the API, whose database link is faulty: the answer may
		// come only once the link heals.
		done := make(chan reply, 1)
		go func() { done <- r.decideThroughAPI(req.RequestID) }()
		r.heal(at)
		if rep := <-done; rep.status != http.StatusOK {
			e.t.Fatalf("the decision through the API: %d %s", rep.status, rep.body)
		}
	} else {
		// Recorded at once; delivered when the task's worker hears of it, maybe after the fault.
		if _, _, err := e.decider().Decide(e.ctx, r.id, task.Decision{RequestID: req.RequestID, Allow: true, By: "alice"}, time.Second); err != nil {
			e.t.Fatal(err)
		}
		r.heal(at)
	}
	if st := r.waitEnded(); st.Totals.FailedTurns != 0 {
		e.t.Errorf("state after the fault: %+v", st)
	}
	if b, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(b)) != "approved" {
		e.t.Errorf("the approved tool did not run: %q, %v", b, err)
	}
	evs := e.checkLogWhole(r.id)
	var asked, decided int
	for _, ev := range evs {
		switch ev.Agent.Type {
		case events.TypePermissionRequest:
			asked++
		case events.TypePermissionDecision:
			decided++
		}
	}
	if asked != 1 || decided != 1 {
		e.t.Errorf("the log holds %d permission requests and %d decisions, want 1 and 1", asked, decided)
	}
	r.checkTextsOnce(evs, "I will write the marker.", "Marker written.")
}

// decideThroughAPI allows the request through `drover serve` as a client does: an answer 503
// (the server lost its database connection) is tried again after its Retry-After, or a second.
func (r *faultRun) decideThroughAPI(requestID string) reply {
	for {
		rep := r.api.call("POST", "/api/v1/tasks/"+r.id+"/approvals/"+requestID, `{"decision":"allow","by":"alice"}`)
		if rep.status != http.StatusServiceUnavailable || r.e.ctx.Err() != nil {
			return rep
		}
		r.e.t.Logf("the decision was answered %d %s; trying again", rep.status, rep.body)
		wait := time.Second
		if s, err := strconv.Atoi(rep.header.Get("Retry-After")); err == nil {
			wait = time.Duration(s) * time.Second
		}
		select {
		case <-time.After(wait):
		case <-r.e.ctx.Done():
		}
	}
}

// limitWait: the fault comes while the task waits for its account's usage limit, which holds
// past its reset until the test lifts it, during the fault.
func (r *faultRun) limitWait() {
	e := r.e
	reset := time.Now().Add(2 * time.Second).Truncate(time.Second)
	e.fake.SetLimit(subscription, fa.UsageLimit(fa.WindowFiveHour, reset).HeldPastReset())
	e.fake.Enqueue(fa.Reply(fa.Text("Done after the wait.")))
	r.start(e.params())
	e.waitStatus(r.id, task.StatusWaitingForLimit)
	r.waitVisible(`"status":"waiting_for_limit"`)
	at := time.Now()
	r.inject()
	e.fake.LiftLimit(subscription)
	r.heal(at)
	if st := r.waitEnded(); st.Totals.FailedTurns != 0 || st.LastError != "" {
		e.t.Errorf("state after the wait and the fault: %+v", st)
	}
	r.checkTextsOnce(e.checkLogWhole(r.id), "Done after the wait.")
}

// start starts the task with the case's prompt.
func (r *faultRun) start(p task.Params) {
	if _, err := r.e.tc.Start(r.e.ctx, r.id, p, task.Prompt{Text: r.prompt}, ""); err != nil {
		r.e.t.Fatal(err)
	}
}

// waitVisible waits until `drover serve` shows the task with want in its JSON: a person sees
// what the task waits for.
func (r *faultRun) waitVisible(want string) {
	r.e.waitFor("the API to show the task with "+want, func() bool {
		rep := r.api.call("GET", "/api/v1/tasks/"+r.id, "")
		return rep.status == http.StatusOK && strings.Contains(string(rep.body), want)
	})
}

// checkTextsOnce checks that each text streamed once in the log.
func (r *faultRun) checkTextsOnce(evs []loggedEvent, texts ...string) {
	msgs := messagesOf(evs)
	for _, text := range texts {
		n := 0
		for _, m := range msgs {
			n += strings.Count(m.Text, text)
		}
		if n != 1 {
			r.e.t.Errorf("the log streamed %q %d times, want once", text, n)
		}
	}
}

// checkPromptOnce checks the fake API's record: one answered request sent the prompt (it was
// the request's newest user text) and no request carried it twice.
func (r *faultRun) checkPromptOnce() {
	e := r.e
	billed := map[int]bool{}
	for _, l := range e.fake.Ledger() {
		billed[l.Seq] = true
	}
	sent := 0
	for _, req := range e.fake.MainRequests() {
		if c := req.PromptCount(r.prompt); c > 1 {
			e.t.Errorf("request %d carries the prompt %d times", req.Seq, c)
		}
		if billed[req.Seq] && asks(req, r.prompt) {
			sent++
		}
	}
	if sent != 1 {
		e.t.Errorf("%d answered requests sent the prompt, want 1", sent)
	}
}

// asks reports whether the request's newest user message holds prompt as a text block of its own:
// the request that sends the prompt, not one that carries it as history.
func asks(req fa.Request, prompt string) bool {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			return fa.Request{Messages: req.Messages[i : i+1]}.PromptCount(prompt) == 1
		}
	}
	return false
}

// checkStream checks that the event stream of `drover serve` delivered the log from where it
// was first opened: each event once, in order, over one connection.
func (r *faultRun) checkStream() {
	e := r.e
	evs := e.events(r.id)
	e.waitFor("the event stream to deliver the whole log", func() bool { return r.stream.count() >= len(evs) })
	got := r.stream.stop()
	if len(got) != len(evs) {
		e.t.Fatalf("the stream delivered %d events, the log holds %d", len(got), len(evs))
	}
	for i, ev := range evs {
		if got[i].id != strconv.FormatInt(ev.Seq, 10) || got[i].event != ev.Type {
			e.t.Fatalf("stream event %d is %s %s, the log's is %d %s", i, got[i].id, got[i].event, ev.Seq, ev.Type)
		}
	}
	// The stream outlives the fault: the client never had to reconnect.
	if n := r.stream.connections(); n != 1 {
		e.t.Errorf("the stream delivered %d events over %d connections, want 1", len(got), n)
	}
}

// sseFollower reads a task's event stream as a browser's EventSource does: it reconnects after
// the server's retry hint with Last-Event-ID when the stream ends.
type sseFollower struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	got   []sseEvent
	conns int
}

// followEvents starts following the task's event stream through s.
func followEvents(e *env, s *apiServer, taskID string) *sseFollower {
	ctx, cancel := context.WithCancel(e.ctx)
	f := &sseFollower{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for ctx.Err() == nil {
			f.follow(ctx, s, taskID)
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second): // the stream's retry hint
			}
		}
	}()
	e.t.Cleanup(func() { f.stop() })
	return f
}

// follow reads one connection of the stream until it ends.
func (f *sseFollower) follow(ctx context.Context, s *apiServer, taskID string) {
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/api/v1/tasks/"+taskID+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	f.mu.Lock()
	f.conns++
	if n := len(f.got); n > 0 {
		req.Header.Set("Last-Event-ID", f.got[n-1].id)
	}
	f.mu.Unlock()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return
	}
	br := bufio.NewReader(resp.Body)
	var cur sseEvent
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && cur.id != "":
			f.mu.Lock()
			f.got = append(f.got, cur)
			f.mu.Unlock()
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
}

func (f *sseFollower) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.got)
}

func (f *sseFollower) connections() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.conns
}

// stop ends following and returns what was delivered.
func (f *sseFollower) stop() []sseEvent {
	f.cancel()
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

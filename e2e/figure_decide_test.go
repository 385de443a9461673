package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/bench"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/taskview"
)

// Figure D1 of `make bench`: how long a person's decision on a supervised task's permission
// request takes to reach the waiting CLI. A supervised task's turn calls Write a number of times,
// each on a new file; each call waits for a person, and the benchmark approves it as `drover task
// approve` does (taskclient.Decider: the decision recorded in Postgres, then the decide_later
// signal).
//
// The witness of "reached the CLI" is the fake Messages API: an approved call runs, and the CLI
// sends its result in its next request. The fake's responder notes when that request arrives, so
// a decision's latency is Decide called → the fake receives the next request. That interval holds
// the whole of drover's path (the record in Postgres and the signal, the workflow's check, the
// delivery activity, Postgres and its notification, the waiting attempt's answer) and then the
// CLI's own work
// (writing the file, building and sending the next request). The baseline measures that last part
// alone: the same CLI, started as drover starts a supervised task's, with the same hooks, whose
// can_use_tool requests this process answers straight from its handler; its interval runs from
// the answer's write to the CLI's stdin to the same next request at the fake. Both sides wait the
// same "thinking" time before deciding, so that each CLI is idle alike when the answer comes, and
// the pairs alternate which side goes first. The tool is Write, not Bash, because the CLI's own
// share is then small and steady (a shell's start varies with the machine's load).

// decideThink is how long a side waits between a request showing and its decision (not
// measured): a person never decides within milliseconds, and the worker's own bookkeeping of the
// request (the workflow's signal, the search attributes) is over by then.
const decideThink = 100 * time.Millisecond

// decisionsPerRun is how many decisions each side makes in each pair: at least 101 a side in all,
// so that the p99 is not merely the slowest decision, or 2 a pair in a quick run.
func decisionsPerRun(runs int) int {
	if *benchQuick {
		return 2
	}
	return max(4, int(math.Ceil(101/float64(runs))))
}

// BenchmarkFigureD1 reports the rows of figure D1: p99 (goal ≤ 500 ms) and p50 of the decision
// latency through drover, with the direct answer's as baseline.
func BenchmarkFigureD1(b *testing.B) {
	runs := figureRuns(b)
	perRun := decisionsPerRun(runs)
	sc := newDecideScript()
	e := newDecideEnv(b, sc)
	sc.dir = e.workspace

	direct, err := startDirectCLI(e, sc, decideThink)
	if err != nil {
		b.Fatal(err)
	}
	e.startWorker("host-" + e.queue)
	dv := &droverDecider{e: e, sc: sc, taskID: e.taskID("d1"), think: decideThink}

	// Warm-up, not measured: each CLI's first call of the tool, the worker's first decision (its
	// LISTEN connection, its Temporal pollers).
	if _, err := direct.batch(e.ctx, "warm", 1); err != nil {
		b.Fatal(err)
	}
	if _, _, err := dv.batch("warm", 1); err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	var base, drover [][]time.Duration
	var updates latencies
	for i := range runs {
		runDirect := func() error {
			lat, err := direct.batch(e.ctx, fmt.Sprint(i), perRun)
			base = append(base, lat)
			return err
		}
		runDrover := func() error {
			lat, upd, err := dv.batch(fmt.Sprint(i), perRun)
			drover = append(drover, lat)
			updates = append(updates, upd...)
			return err
		}
		first, second := runDirect, runDrover
		if i%2 == 1 {
			first, second = runDrover, runDirect
		}
		if err := first(); err != nil {
			b.Fatal(err)
		}
		if err := second(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()

	note := fmt.Sprintf("%d decisions a side; Decide itself returned after %.0f ms (p50)",
		runs*perRun, ms(updates.percentile(50)))
	const what = "decision: sent → CLI's next request (baseline: answered directly)"
	p99 := decisionRow("D1", what+", p99", 99, base, drover, bench.DroverAtMost(500, "ms"))
	p50 := decisionRow("D1 p50", what+", p50", 50, base, drover, bench.DroverAtMost(500, "ms"))
	p99.Note, p50.Note = note, note
	for _, side := range []struct {
		name string
		lat  [][]time.Duration
	}{{"direct", base}, {"drover", drover}} {
		b.Logf("%s decisions, ms: %s", side.name, sortedMs(slices.Concat(side.lat...)))
	}
	b.Logf("drover's Decide calls, ms: %s", sortedMs(updates))
	reportRows(b, p99, p50)
	b.ReportMetric(p99.Drover, "p99-ms")
	b.ReportMetric(p50.Drover, "p50-ms")

	if err := direct.proc.Stop(context.WithoutCancel(e.ctx)); err != nil {
		b.Logf("stopping the direct CLI: %v", err)
	}
	if err := e.closeTask(dv.taskID); err != nil {
		b.Fatal(err)
	}
}

// sortedMs prints durations in ms, sorted.
func sortedMs(ds []time.Duration) string {
	ds = slices.Sorted(slices.Values(ds))
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.1f", ms(d))
	}
	return strings.Join(parts, " ")
}

// decisionRow is a row of the p-th percentile of decision latencies measured in interleaved
// pairs: baseline and drover are the percentiles of all the decisions of each side, the ratio the
// median of the pairs' drover ÷ baseline percentiles.
func decisionRow(figure, what string, p float64, base, drover [][]time.Duration, goal bench.Goal) bench.Row {
	var allBase, allDrover latencies
	ratios := make([]float64, len(base))
	for i := range base {
		allBase, allDrover = append(allBase, base[i]...), append(allDrover, drover[i]...)
		ratios[i] = ms(latencies(drover[i]).percentile(p)) / ms(latencies(base[i]).percentile(p))
	}
	return bench.Row{Figure: figure, What: what, Unit: "ms",
		Baseline: ms(allBase.percentile(p)), Drover: ms(allDrover.percentile(p)), Ratio: bench.Median(ratios),
		Runs: len(base), Goal: goal}
}

// newDecideEnv is newBenchEnv's world with the figure's model answering the main conversation.
func newDecideEnv(tb testing.TB, sc *decideScript) *benchEnv {
	tb.Helper()
	return newBenchEnvWith(tb, "bench-d1-", 20*time.Minute, sc.respond)
}

// decideScript is the model of both sides: it answers the main conversation from its queue, and
// notes when the request carrying each scripted tool call's result arrives.
type decideScript struct {
	dir string // where the scripted calls write: the workspace

	mu      sync.Mutex
	queue   []fa.Response
	arrived map[string]chan time.Time // tool use id → when its result first reached the fake
	noted   map[string]bool
}

func newDecideScript() *decideScript {
	return &decideScript{arrived: map[string]chan time.Time{}, noted: map[string]bool{}}
}

// respond is the fake's Responder.
func (s *decideScript) respond(r *fa.Request) (fa.Response, bool) {
	at := time.Now()
	if r.Class != fa.ClassMain {
		return fa.Response{}, false // auxiliary requests get the automatic answer
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tr := range r.ToolResults() {
		if ch, ok := s.arrived[tr.ToolUseID]; ok && !s.noted[tr.ToolUseID] {
			s.noted[tr.ToolUseID] = true
			ch <- at
		}
	}
	if len(s.queue) == 0 {
		return fa.Response{}, false
	}
	resp := s.queue[0]
	s.queue = s.queue[1:]
	return resp, true
}

// script queues one turn of the model: n Write calls, one after the other, each on a new file of
// the workspace, then benchReply. The calls' ids (and files, which show in the requests'
// summaries) are "toolu_d1_SIDE_LABEL_K".
func (s *decideScript) script(side, label string, n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, n)
	for k := range n {
		id := fmt.Sprintf("toolu_d1_%s_%s_%d", side, label, k)
		ids[k] = id
		s.arrived[id] = make(chan time.Time, 1)
		s.queue = append(s.queue, fa.Reply(fa.ToolUseID(id, "Write",
			map[string]any{"file_path": filepath.Join(s.dir, id+".txt"), "content": id + "\n"})))
	}
	s.queue = append(s.queue, fa.Reply(fa.Text(benchReply)))
	return ids
}

// ran checks, in the workspace, that every call of ids ran: an approval that the CLI did not
// act on would not count as delivered.
func (s *decideScript) ran(ids []string) error {
	for _, id := range ids {
		if b, err := os.ReadFile(filepath.Join(s.dir, id+".txt")); err != nil || string(b) != id+"\n" {
			return fmt.Errorf("the approved call %s did not write its file: %q, %v", id, b, err)
		}
	}
	return nil
}

// arrival waits for the request that carries the result of tool use id.
func (s *decideScript) arrival(ctx context.Context, id string) (time.Time, error) {
	s.mu.Lock()
	ch, ok := s.arrived[id]
	s.mu.Unlock()
	if !ok {
		return time.Time{}, fmt.Errorf("tool use %s was not scripted", id)
	}
	select {
	case at := <-ch:
		return at, nil
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("waiting for the result of %s to reach the fake: %w", id, context.Cause(ctx))
	}
}

// droverDecider is drover's side: one supervised task, whose requests it decides through the
// task's Update.
type droverDecider struct {
	e       *benchEnv
	sc      *decideScript
	taskID  string
	think   time.Duration
	started bool
}

// batch runs one turn of n Write calls, approving each, and returns each decision's latency
// (Decide called → the CLI's next request at the fake) and how long each Decide took.
func (d *droverDecider) batch(label string, n int) (lat, updates []time.Duration, err error) {
	e := d.e
	ids := d.sc.script("drover", label, n)
	prompt := task.Prompt{Text: "Write " + fmt.Sprint(n) + " files (" + label + ")."}
	if !d.started {
		_, err = e.tc.Start(e.ctx, d.taskID, e.supervisedParams(), prompt, "")
		d.started = err == nil
	} else {
		_, err = e.tc.Prompt(e.ctx, d.taskID, prompt, "")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("prompting task %s: %w", d.taskID, err)
	}
	for _, id := range ids {
		r, err := d.waitPending(id)
		if err != nil {
			return nil, nil, err
		}
		time.Sleep(d.think)
		t0 := time.Now()
		dc := &taskclient.Decider{Temporal: e.tc.Temporal, View: taskview.New(e.pool)}
		rec, delivered, err := dc.Decide(e.ctx, d.taskID, task.Decision{RequestID: r.RequestID, Allow: true, By: "bench"}, 30*time.Second)
		returned := time.Now()
		if err != nil || !delivered || rec.Outcome != task.OutcomeAllowed {
			return nil, nil, fmt.Errorf("deciding %s: %+v, delivered %v, %v", id, rec, delivered, err)
		}
		at, err := d.sc.arrival(e.ctx, id)
		if err != nil {
			return nil, nil, err
		}
		lat = append(lat, at.Sub(t0))
		updates = append(updates, returned.Sub(t0))
	}
	st, err := e.tc.WaitIdle(e.ctx, d.taskID, 10*time.Millisecond)
	if err != nil {
		return nil, nil, fmt.Errorf("waiting for task %s: %w", d.taskID, err)
	}
	if st.Totals.FailedTurns != 0 || len(st.Awaiting) != 0 {
		return nil, nil, fmt.Errorf("task %s after the turn: %+v", d.taskID, st)
	}
	if err := d.sc.ran(ids); err != nil {
		return nil, nil, err
	}
	return lat, updates, nil
}

// waitPending waits until the task lists the request of tool use id as waiting for a person.
func (d *droverDecider) waitPending(id string) (task.PendingRequest, error) {
	e := d.e
	for {
		st, err := e.tc.State(e.ctx, d.taskID)
		if err == nil {
			for _, r := range st.Awaiting {
				if strings.Contains(r.Summary, id) {
					return r, nil
				}
			}
		}
		select {
		case <-e.ctx.Done():
			return task.PendingRequest{}, fmt.Errorf("waiting for the request of %s: %w (last state error: %v)", id, context.Cause(e.ctx), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// directCLI is the baseline: a warm CLI started as drover starts a supervised task's (bypass
// mode, permission prompts and drover's hooks over stdio), whose can_use_tool requests this
// process answers itself, allowing each after the thinking time.
type directCLI struct {
	proc  *claudecode.Process
	sc    *decideScript
	think time.Duration

	mu      sync.Mutex
	asked   map[string]string    // the CLI's request id → tool use id, for can_use_tool
	written map[string]time.Time // tool use id → when its allow was written to the CLI's stdin
}

func startDirectCLI(e *benchEnv, sc *decideScript, think time.Duration) (*directCLI, error) {
	d := &directCLI{sc: sc, think: think, asked: map[string]string{}, written: map[string]time.Time{}}
	cmd := e.claudeCommand()
	cmd.DangerouslySkipPermissions = false
	cmd.PermissionMode = claudecode.PermissionBypass
	cmd.PermissionPromptToolStdio = true
	cmd.IncludePartialMessages = true
	c, err := cmd.Build(e.ctx)
	if err != nil {
		return nil, err
	}
	c.SysProcAttr.Pdeathsig = syscall.SIGKILL
	p, err := claudecode.Start(e.ctx, c, claudecode.ProcessConfig{Client: claudecode.ClientConfig{
		Handler: claudecode.HandlerFunc(d.handle), InputTap: d.tap,
	}})
	if err != nil {
		return nil, err
	}
	e.owner.Cleanup(func() { _ = p.Stop(context.Background()) })
	hooks := claudecode.SupervisedHooks("tool_approval", "stop_check")
	if _, err := p.Client().Initialize(e.ctx, claudecode.InitializeRequest{Hooks: hooks}); err != nil {
		return nil, fmt.Errorf("initializing claude: %w (stderr: %s)", err, strings.Join(p.Stderr(), " | "))
	}
	d.proc = p
	return d, nil
}

// handle answers as drover's supervised mode does, with the person's allow given at once.
func (d *directCLI) handle(ctx context.Context, req *claudecode.ControlRequest) (any, error) {
	switch {
	case req.HookCallback != nil:
		switch req.HookCallback.Input.HookEventName {
		case claudecode.HookPreToolUse:
			return claudecode.PreToolUseDecision(claudecode.DecisionAsk, "this task is supervised: a person decides"), nil
		case claudecode.HookStop:
			return claudecode.StopApprove(""), nil
		}
		return claudecode.HookOutput{}, nil
	case req.CanUseTool != nil:
		d.mu.Lock()
		d.asked[req.RequestID] = req.CanUseTool.ToolUseID
		d.mu.Unlock()
		select {
		case <-time.After(d.think):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		return claudecode.AllowTool(req.CanUseTool.Input, req.CanUseTool.ToolUseID), nil
	}
	return nil, fmt.Errorf("unsupported control request %q", req.Subtype)
}

// tap notes when the answer to a can_use_tool request is written to the CLI's stdin.
func (d *directCLI) tap(line []byte) {
	at := time.Now()
	var m struct {
		Type     string `json:"type"`
		Response struct {
			RequestID string `json:"request_id"`
		} `json:"response"`
	}
	if json.Unmarshal(line, &m) != nil || m.Type != "control_response" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if id, ok := d.asked[m.Response.RequestID]; ok {
		d.written[id] = at
		delete(d.asked, m.Response.RequestID)
	}
}

// batch runs one turn of n Write calls, each allowed by the handler, and returns each answer's
// latency (written to stdin → the CLI's next request at the fake).
func (d *directCLI) batch(ctx context.Context, label string, n int) ([]time.Duration, error) {
	ids := d.sc.script("direct", label, n)
	if err := claudeTurn(ctx, d.proc, "Write "+fmt.Sprint(n)+" files ("+label+")."); err != nil {
		return nil, err
	}
	lat := make([]time.Duration, 0, n)
	for _, id := range ids {
		at, err := d.sc.arrival(ctx, id)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		w, ok := d.written[id]
		d.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("no answer to the request of %s was written", id)
		}
		lat = append(lat, at.Sub(w))
	}
	if err := d.sc.ran(ids); err != nil {
		return nil, err
	}
	return lat, nil
}

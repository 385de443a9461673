package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/testkit/fakecli"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// rig is one engine on a fresh database with a scripted CLI.
type rig struct {
	t         *testing.T
	ctx       context.Context
	db        *pgxpool.Pool
	eng       *engine.Engine
	cli       *fakecli.Launcher
	workspace string
	taskID    string
}

func newRig(t *testing.T, script func(c *fakecli.CLI), mutate ...func(*engine.Config)) *rig {
	t.Helper()
	r := &rig{t: t, ctx: t.Context(), db: pgtest.NewPool(t), workspace: t.TempDir(), taskID: "task-" + uuid.NewString()[:8]}
	r.cli = &fakecli.Launcher{Script: script}
	cfg := engine.Config{
		DB: r.db, HostID: "host-" + r.taskID, Claude: engine.Claude{Bin: "claude"}, Launcher: r.cli,
		HeartbeatInterval: 20 * time.Millisecond, StopTimeout: 200 * time.Millisecond, CommitRetry: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.eng = eng
	t.Cleanup(func() { eng.Close(context.Background()) })
	return r
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func promptUUID(taskID string, turn int) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%s/%d", taskID, turn)).String()
}

// req is attempt `attempt` of turn `turn` with prompt text.
func (r *rig) req(turn, attempt int, text string) engine.Request {
	return engine.Request{
		TaskID: r.taskID, Turn: turn, Attempt: attempt, MaxAttempts: 3,
		AttemptID:    fmt.Sprintf("run/%d/%d", turn, attempt),
		AttemptToken: []byte(fmt.Sprintf("token-%d-%d", turn, attempt)),
		Prompt:       task.Prompt{Text: text}, PromptUUID: promptUUID(r.taskID, turn),
		Workspace: r.workspace, Profile: task.Profile{PermissionMode: task.Autonomous},
	}
}

func (r *rig) run(req engine.Request) (task.RunTurnResult, *engine.Error) {
	r.t.Helper()
	res, err := r.eng.RunTurn(r.ctx, req)
	if err == nil {
		return res, nil
	}
	var e *engine.Error
	if !errors.As(err, &e) {
		r.t.Fatalf("RunTurn returned %T %v, want *engine.Error", err, err)
	}
	return res, e
}

func (r *rig) executor() store.Executor {
	r.t.Helper()
	x, err := store.GetExecutor(r.ctx, r.db, r.taskID)
	if err != nil {
		r.t.Fatal(err)
	}
	return x
}

func (r *rig) turn(n int) store.TurnRecord {
	r.t.Helper()
	rec, err := store.GetTurn(r.ctx, r.db, r.taskID, n)
	if err != nil {
		r.t.Fatal(err)
	}
	return rec
}

func (r *rig) events() []events.AgentEvent {
	r.t.Helper()
	evs, err := store.ListEvents(r.ctx, r.db, r.taskID, 0, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	out := make([]events.AgentEvent, len(evs))
	for i, ev := range evs {
		if err := json.Unmarshal(ev.Payload, &out[i]); err != nil {
			r.t.Fatal(err)
		}
	}
	return out
}

func (r *rig) noRow() {
	r.t.Helper()
	if _, err := store.GetExecutor(r.ctx, r.db, r.taskID); !errors.Is(err, store.ErrNotFound) {
		r.t.Fatalf("an executor row was written: %v", err)
	}
}

// reply answers every prompt with a plain successful turn.
func reply(c *fakecli.CLI) {
	c.Serve(func(c *fakecli.CLI, p fakecli.Line) { c.Reply("echo: " + p.Text) })
}

func TestCompletedTurnIsCommittedAndItsProcessKept(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			c.Text("m0", "a moment")
			time.Sleep(200 * time.Millisecond) // long enough for a heartbeat to see the stored events
			c.Reply("echo: " + p.Text)
		})
	})
	var beats, lastSeq atomic.Int64
	req := r.req(1, 1, "hello")
	req.Heartbeat = func(seq int64) {
		beats.Add(1)
		lastSeq.Store(seq)
	}
	res, err := r.run(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != task.TurnCompleted || res.SessionID == "" || res.LastMessageUUID == "" || res.CostUSD != 0.01 ||
		res.InputTokens != 100 || res.OutputTokens != 5 {
		t.Fatalf("result = %+v", res)
	}
	if beats.Load() == 0 {
		t.Error("no heartbeat")
	}
	if lastSeq.Load() == 0 {
		t.Error("no heartbeat carried the sequence number of a stored event")
	}
	x := r.executor()
	if x.Status != store.ExecutorIdle || x.PID == 0 || x.SessionID != res.SessionID || x.LastMessageUUID != res.LastMessageUUID ||
		x.AttemptID != req.AttemptID || x.HostID != "host-"+r.taskID || string(x.AttemptToken) != "token-1-1" || x.Turn != 1 {
		t.Fatalf("executor row = %+v", x)
	}
	rec := r.turn(1)
	if rec.Status != task.TurnCompleted || rec.CostUSD != 0.01 || rec.CacheReadTokens != 40 || rec.CacheCreationTokens != 20 ||
		rec.LastMessageUUID != res.LastMessageUUID || rec.Attempts != 1 {
		t.Fatalf("turn record = %+v", rec)
	}
	var types []string
	for _, ev := range r.events() {
		types = append(types, string(ev.Type))
	}
	if types[len(types)-1] != string(events.TypeComplete) {
		t.Fatalf("events end with %v", types)
	}

	// The next turn reuses the warm process: no second launch; the row goes straight to running.
	res2, err := r.run(r.req(2, 1, "again"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.cli.Launches()); n != 1 {
		t.Fatalf("%d launches for two turns, want 1 (the warm process reused)", n)
	}
	if res2.SessionID != res.SessionID {
		t.Fatalf("session changed: %s → %s", res.SessionID, res2.SessionID)
	}
}

func TestFreshProcessResumesAtTheCommittedPoint(t *testing.T) {
	t.Parallel()
	r := newRig(t, reply, func(c *engine.Config) { c.KeepAlive = -1 })
	res, err := r.run(r.req(1, 1, "one"))
	if err != nil {
		t.Fatal(err)
	}
	if x := r.executor(); x.Status != store.ExecutorStopped || x.PID != 0 {
		t.Fatalf("a process not kept leaves the row %s with pid %d, want stopped without pid", x.Status, x.PID)
	}
	if _, err := r.run(r.req(2, 1, "two")); err != nil {
		t.Fatal(err)
	}
	l := r.cli.Launches()
	if len(l) != 2 || l[0].SessionID == "" || l[1].Resume != res.SessionID || l[1].ResumeSessionAt != res.LastMessageUUID {
		t.Fatalf("launches = %+v", l)
	}
	if !r.cli.Procs()[0].Stopped() {
		t.Error("the first process was not stopped")
	}
}

// exitCase is one way an attempt fails, as the engine reports it and the rows record it.
type exitCase struct {
	name      string
	script    func(c *fakecli.CLI)
	mutate    func(*engine.Config)
	prepare   func(r *rig, req *engine.Request)
	wantType  string
	wantRow   store.ExecutorStatus // "" when no row may exist
	retryable bool
	check     func(t *testing.T, r *rig, e *engine.Error)
}

func TestEveryExitPath(t *testing.T) {
	t.Parallel()
	cases := []exitCase{
		{name: "invalid prompt uuid", script: reply, wantType: task.ErrTypeInvalidInput,
			prepare: func(r *rig, req *engine.Request) { req.PromptUUID = "nope" }},
		{name: "unknown permission mode", script: reply, wantType: task.ErrTypeInvalidInput,
			prepare: func(r *rig, req *engine.Request) { req.Profile.PermissionMode = "yolo" }},
		{name: "empty prompt", script: reply, wantType: task.ErrTypeInvalidInput,
			prepare: func(r *rig, req *engine.Request) { req.Prompt.Text = "  " }},
		{name: "attachment outside the workspace", script: reply, wantType: task.ErrTypeInvalidInput,
			prepare: func(r *rig, req *engine.Request) { req.Prompt.Attachments = []string{"../x.png"} }},
		{name: "workspace missing", script: reply, wantType: task.ErrTypeWorkspaceMissing,
			prepare: func(r *rig, req *engine.Request) { req.Workspace = filepath.Join(r.workspace, "gone") },
			check: func(t *testing.T, r *rig, e *engine.Error) {
				if !strings.Contains(e.Error(), filepath.Join(r.workspace, "gone")) {
					t.Errorf("the error does not name the path: %v", e)
				}
			}},
		{name: "managed task on a host without workspaces", script: reply, wantType: task.ErrTypeWorkspacesUnmanaged,
			prepare: func(r *rig, req *engine.Request) { req.Workspace, req.Repo = "", r.workspace },
			check: func(t *testing.T, r *rig, e *engine.Error) {
				if !strings.Contains(e.Error(), "manages no workspaces") {
					t.Errorf("the error does not say why: %v", e)
				}
			}},
		{name: "launch fails", script: reply, wantType: task.ErrTypeClaudeStartFailed, wantRow: store.ExecutorFailed, retryable: true,
			prepare: func(r *rig, req *engine.Request) { r.cli.Fail = errors.New("exec: no such file") }},
		{name: "exits before initialize", wantType: task.ErrTypeClaudeStartFailed, wantRow: store.ExecutorFailed, retryable: true,
			script: func(c *fakecli.CLI) {
				c.Exit(&claudecode.ExitError{Code: 1, Stderr: []string{"bad flag"}})
			}},
		{name: "resume rejected", wantType: task.ErrTypeResumeRejected, wantRow: store.ExecutorFailed,
			script: func(c *fakecli.CLI) {
				c.Exit(&claudecode.ResumeRejectedError{Reason: "No message found with message.uuid of: x"})
			},
			check: func(t *testing.T, r *rig, e *engine.Error) {
				if x := r.executor(); x.SessionID != "" || x.LastMessageUUID != "" {
					t.Errorf("the rejected session was not forgotten: %+v", x)
				}
				if rec := r.turn(1); rec.Status != task.TurnFailed {
					t.Errorf("the turn was not closed: %+v", rec)
				}
			}},
		{name: "exits mid-turn", wantType: task.ErrTypeClaudeExited, wantRow: store.ExecutorFailed, retryable: true,
			script: func(c *fakecli.CLI) {
				c.Prompt()
				c.Init()
				c.ToolUse("msg_1", "toolu_1", "Bash", map[string]any{"command": "sleep 30"})
				c.Exit(&claudecode.ExitError{Code: -1, Err: errors.New("killed")})
			},
			check: func(t *testing.T, r *rig, e *engine.Error) {
				open := map[string]bool{}
				for _, ev := range r.events() {
					switch ev.Type {
					case events.TypeToolCall:
						open[ev.ToolCallID] = true
					case events.TypeToolUpdate:
						if ev.ToolStatus != events.ToolRunning {
							delete(open, ev.ToolCallID)
						}
					}
				}
				if len(open) != 0 {
					t.Errorf("the lost attempt left tool calls open: %v", open)
				}
				if rec := r.turn(1); rec.Status != task.TurnRunning {
					t.Errorf("a retryable failure closed the turn: %+v", rec)
				}
			}},
		{name: "stalls", wantType: task.ErrTypeClaudeStalled, wantRow: store.ExecutorFailed, retryable: true,
			mutate: func(c *engine.Config) { c.StallTimeout = 100 * time.Millisecond },
			script: func(c *fakecli.CLI) {
				c.Prompt()
				c.Init()
				c.Hang()
			}},
		{name: "API error after the CLI's retries", wantType: task.ErrTypeModelAPI, wantRow: store.ExecutorFailed, retryable: true,
			script: func(c *fakecli.CLI) {
				c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
					c.Init()
					c.APIRetry(529, 1500)
					c.ErrorResult("success", "api_error", "API Error: 529 overloaded", 529, fakecli.Usage{})
				})
			},
			check: func(t *testing.T, r *rig, e *engine.Error) {
				if e.RetryAfter != 1500*time.Millisecond {
					t.Errorf("RetryAfter = %s, want the API's 1.5s", e.RetryAfter)
				}
			}},
		{name: "API overloaded past the CLI's retries (its watchdog retries on)", wantType: task.ErrTypeModelAPI, wantRow: store.ExecutorFailed, retryable: true,
			script: func(c *fakecli.CLI) {
				c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
					c.Init()
					c.APIRetry(529, 1000)
					c.Writef(`{"type":"system","subtype":"api_retry","attempt":2,"max_retries":1,"retry_delay_ms":1500,"error_status":529,"error":"overloaded","session_id":%q,"uuid":%q}`,
						c.SessionID, fakecli.NewUUID())
					select {
					case <-c.Interrupted():
						c.InterruptedResult(fakecli.Usage{})
					case <-c.Killed():
					}
				})
			},
			check: func(t *testing.T, r *rig, e *engine.Error) {
				if e.RetryAfter != 1500*time.Millisecond || !strings.Contains(e.Error(), "529") {
					t.Errorf("%v, RetryAfter %s: want the overloaded API, retried after the CLI's 1.5s", e, e.RetryAfter)
				}
			}},
		{name: "rate limit after the CLI's retries", wantType: task.ErrTypeAccountLimited, wantRow: store.ExecutorFailed, retryable: true,
			script: func(c *fakecli.CLI) {
				c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
					c.Init()
					c.APIRetry(429, 1500)
					c.ErrorResult("success", "api_error", "API Error: 429 rate limited", 429, fakecli.Usage{})
				})
			},
			check: func(t *testing.T, r *rig, e *engine.Error) {
				if e.Wait == nil || e.Wait.Reason != task.WaitRateLimit || e.Wait.Account == "" ||
					e.Wait.ResetsAt.Sub(e.Wait.Since) > 3*time.Second || e.Wait.RetryAt.Before(e.Wait.ResetsAt) {
					t.Errorf("wait %+v: want the account's rate limit, resetting after the API's 1.5s", e.Wait)
				}
			}},
		{name: "CLI fails the turn", wantType: task.ErrTypeClaudeProtocol, wantRow: store.ExecutorFailed, retryable: true,
			script: func(c *fakecli.CLI) {
				c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
					c.Init()
					c.ErrorResult("error_during_execution", "", "something broke", 0, fakecli.Usage{})
				})
			}},
		{name: "result without a resume position", wantType: task.ErrTypeClaudeProtocol, wantRow: store.ExecutorFailed, retryable: true,
			script: func(c *fakecli.CLI) {
				c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
					c.Init()
					c.Result("no assistant frame", fakecli.DefaultUsage)
				})
			}},
		{name: "database down at the start", script: reply, wantType: task.ErrTypeStoreUnavailable, retryable: true,
			prepare: func(r *rig, req *engine.Request) {
				p := pgtest.NewProxy(t, pgtest.AdminAddr())
				dead, err := pgxpool.New(r.ctx, p.DSN(r.db.Config().ConnString()))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(dead.Close)
				p.Cut()
				eng, err := engine.New(engine.Config{DB: dead, HostID: "h", Claude: engine.Claude{Bin: "claude"}, Launcher: r.cli})
				if err != nil {
					t.Fatal(err)
				}
				r.eng = eng
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			muts := []func(*engine.Config){}
			if tc.mutate != nil {
				muts = append(muts, tc.mutate)
			}
			r := newRig(t, tc.script, muts...)
			req := r.req(1, 1, "go")
			if tc.prepare != nil {
				tc.prepare(r, &req)
			}
			_, e := r.run(req)
			if e == nil {
				t.Fatal("the attempt succeeded")
			}
			if e.Type != tc.wantType || e.Retryable() != tc.retryable {
				t.Fatalf("error %s (retryable %v): %v; want %s (retryable %v)", e.Type, e.Retryable(), e, tc.wantType, tc.retryable)
			}
			if tc.wantRow == "" {
				if tc.wantType != task.ErrTypeStoreUnavailable {
					r.noRow()
				}
			} else {
				x := r.executor()
				if x.Status != tc.wantRow || x.PID != 0 || !strings.Contains(x.Error, tc.wantType) {
					t.Fatalf("executor row = %+v, want %s without pid, error naming %s", x, tc.wantRow, tc.wantType)
				}
			}
			for _, p := range r.cli.Procs() {
				select {
				case <-p.Exited():
				case <-time.After(5 * time.Second):
					t.Fatal("a CLI process is left running")
				}
			}
			if tc.check != nil {
				tc.check(t, r, e)
			}
		})
	}
}

func TestLastFailingAttemptClosesTheTurn(t *testing.T) {
	t.Parallel()
	crash := func(c *fakecli.CLI) {
		c.Prompt()
		c.Exit(&claudecode.ExitError{Code: 1})
	}
	r := newRig(t, crash)
	for attempt := 1; attempt <= 3; attempt++ {
		if _, e := r.run(r.req(1, attempt, "go")); e == nil || e.Type != task.ErrTypeClaudeExited {
			t.Fatalf("attempt %d: %v", attempt, e)
		}
		rec := r.turn(1)
		if rec.Attempts != attempt {
			t.Fatalf("attempts = %d, want %d", rec.Attempts, attempt)
		}
		if want := attempt == 3; rec.Finished() != want {
			t.Fatalf("after attempt %d the turn is %s", attempt, rec.Status)
		}
	}
	if rec := r.turn(1); rec.Status != task.TurnFailed || !strings.Contains(rec.Error, task.ErrTypeClaudeExited) {
		t.Fatalf("closed turn = %+v", rec)
	}
}

func TestRetryResumesWhereTheTurnBegan(t *testing.T) {
	t.Parallel()
	var launches atomic.Int32
	script := func(c *fakecli.CLI) {
		n := launches.Add(1)
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			if n == 2 { // turn 2's first attempt: partial output, then a crash
				c.Init()
				c.Text("msg_x", "PARTIAL")
				c.Exit(&claudecode.ExitError{Code: -1})
			}
			c.Reply("ok " + p.Text)
		})
	}
	r := newRig(t, script, func(c *engine.Config) { c.KeepAlive = -1 })
	res1, err := r.run(r.req(1, 1, "one"))
	if err != nil {
		t.Fatal(err)
	}
	if _, e := r.run(r.req(2, 1, "two")); e == nil || e.Type != task.ErrTypeClaudeExited {
		t.Fatalf("attempt 1 of turn 2: %v", e)
	}
	req := r.req(2, 2, "two")
	req.PreviousFailure = "it crashed"
	if _, err := r.run(req); err != nil {
		t.Fatal(err)
	}
	l := r.cli.Launches()
	if len(l) != 3 || l[2].Resume != res1.SessionID || l[2].ResumeSessionAt != res1.LastMessageUUID {
		t.Fatalf("the retry did not resume at turn 1's committed point: %+v", l)
	}
	rec := r.turn(2)
	if rec.Attempts != 2 || rec.Status != task.TurnCompleted || rec.ResumeFromUUID != res1.LastMessageUUID {
		t.Fatalf("turn 2 = %+v", rec)
	}
	var retry *events.TurnRetry
	for _, ev := range r.events() {
		if ev.Type == events.TypeTurnRetry {
			retry = ev.TurnRetry
		}
	}
	if retry == nil || retry.Attempt != 1 || retry.Reason != "it crashed" {
		t.Fatalf("turn_retry = %+v", retry)
	}
}

func TestAnAttemptOfACommittedTurnAnswersFromTheRecord(t *testing.T) {
	t.Parallel()
	r := newRig(t, reply)
	res, err := r.run(r.req(1, 1, "one"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.run(r.req(1, 2, "one"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Attempt != 2 || again.CostUSD != res.CostUSD || again.SessionID != res.SessionID || again.LastMessageUUID != res.LastMessageUUID {
		t.Fatalf("answer from the record = %+v, first = %+v", again, res)
	}
	if n := len(r.cli.Launches()); n != 1 {
		t.Fatalf("the committed turn ran again (%d launches)", n)
	}
	if x := r.executor(); x.Status != store.ExecutorIdle {
		t.Fatalf("row = %+v", x)
	}
	totals, terr := store.TaskTotals(r.ctx, r.db, r.taskID)
	if terr != nil {
		t.Fatal(terr)
	}
	if totals.CostUSD != 0.01 {
		t.Fatalf("cost counted %v, want once", totals.CostUSD)
	}
}

func TestAnotherPromptForTheSameTurnIsRefused(t *testing.T) {
	t.Parallel()
	r := newRig(t, reply)
	if _, err := r.run(r.req(1, 1, "one")); err != nil {
		t.Fatal(err)
	}
	req := r.req(1, 2, "one")
	req.PromptUUID = uuid.NewString()
	if _, e := r.run(req); e == nil || e.Type != task.ErrTypeInvalidInput {
		t.Fatalf("err = %v, want InvalidInput", e)
	}
}

func TestInterruptedAndMaxTurnsResultsAreCommitted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		end  func(c *fakecli.CLI)
		want task.TurnStatus
	}{
		{"interrupted", func(c *fakecli.CLI) {
			c.Text("m", "working")
			c.InterruptedResult(fakecli.DefaultUsage)
		}, task.TurnInterrupted},
		{"max turns", func(c *fakecli.CLI) {
			c.ToolUse("m", "toolu_1", "Bash", map[string]any{"command": "ls"})
			c.ToolResult("toolu_1", "a b", false)
			c.ErrorResult("error_max_turns", "max_turns", "", 0, fakecli.DefaultUsage)
		}, task.TurnFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, func(c *fakecli.CLI) {
				c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
					c.Init()
					tc.end(c)
				})
			})
			res, err := r.run(r.req(1, 1, "go"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.want || r.turn(1).Status != task.TurnStatus(tc.want) {
				t.Fatalf("result %+v, record %+v", res, r.turn(1))
			}
		})
	}
}

func TestInterruptBeforeAndDuringTheTurn(t *testing.T) {
	t.Parallel()
	long := func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			c.Text("m", "thinking hard")
			select {
			case <-c.Interrupted():
				c.InterruptedResult(fakecli.DefaultUsage)
			case <-time.After(10 * time.Second):
				c.Result("too late", fakecli.DefaultUsage)
			}
		})
	}
	r := newRig(t, long)
	// An interrupt that arrives before the turn reaches its CLI is applied once the prompt is sent.
	if err := r.eng.Interrupt(r.ctx, r.taskID, 1); err != nil {
		t.Fatal(err)
	}
	res, err := r.run(r.req(1, 1, "go"))
	if err != nil || res.Status != task.TurnInterrupted {
		t.Fatalf("early interrupt: %+v, %v", res, err)
	}
	// One that arrives while it runs.
	done := make(chan task.RunTurnResult)
	go func() {
		res, _ := r.eng.RunTurn(r.ctx, r.req(2, 1, "go"))
		done <- res
	}()
	deadline := time.After(5 * time.Second)
	for {
		if rec, err := store.GetTurn(r.ctx, r.db, r.taskID, 2); err == nil && rec.Status == task.TurnRunning {
			if x := r.executor(); x.Status == store.ExecutorRunning && x.Turn == 2 {
				break
			}
		}
		select {
		case <-deadline:
			t.Fatal("turn 2 never ran")
		case <-time.After(10 * time.Millisecond):
		}
	}
	time.Sleep(50 * time.Millisecond) // the prompt is written right after the row says running
	if err := r.eng.Interrupt(r.ctx, r.taskID, 2); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.Status != task.TurnInterrupted {
		t.Fatalf("interrupt during the turn: %+v", res)
	}
}

func TestCancellationStopsTheTurnAndClosesIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		cancel    func(context.CancelCauseFunc)
		wantType  string
		wantRow   store.ExecutorStatus
		turnEnded bool
	}{
		{"cancelled", func(c context.CancelCauseFunc) { c(context.Canceled) }, task.ErrTypeCancelled, store.ExecutorStopped, true},
		{"deadline", func(c context.CancelCauseFunc) { c(context.DeadlineExceeded) }, task.ErrTypeAttemptTimedOut, store.ExecutorFailed, false},
		{"worker stopping", func(c context.CancelCauseFunc) {
			c(&engine.Error{Type: task.ErrTypeWorkerStopping, Err: errors.New("bye")})
		}, task.ErrTypeWorkerStopping, store.ExecutorStopped, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			interrupted := make(chan struct{}, 1)
			r := newRig(t, func(c *fakecli.CLI) {
				c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
					c.Init()
					c.Text("m", "working")
					<-c.Interrupted()
					interrupted <- struct{}{}
					c.Hang()
				})
			})
			ctx, cancel := context.WithCancelCause(r.ctx)
			go func() {
				for {
					if x, err := store.GetExecutor(r.ctx, r.db, r.taskID); err == nil && x.Status == store.ExecutorRunning {
						time.Sleep(50 * time.Millisecond)
						tc.cancel(cancel)
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
			_, err := r.eng.RunTurn(ctx, r.req(1, 1, "go"))
			e := engine.AsError(err, "")
			if e.Type != tc.wantType {
				t.Fatalf("err = %v (%s), want %s", err, e.Type, tc.wantType)
			}
			select {
			case <-interrupted:
			default:
				t.Error("the CLI was not asked to interrupt the turn first")
			}
			if x := r.executor(); x.Status != tc.wantRow || x.PID != 0 {
				t.Fatalf("row = %+v", x)
			}
			if got := r.turn(1).Finished(); got != tc.turnEnded {
				t.Fatalf("turn finished = %v, want %v", got, tc.turnEnded)
			}
			if p := r.cli.Procs()[0]; !p.Stopped() {
				t.Error("the CLI was not stopped")
			}
		})
	}
}

func TestASupersededAttemptWritesNothing(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	r := newRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			c.Text("m", "slow")
			<-release
			c.Result("slow", fakecli.DefaultUsage)
		})
	})
	done := make(chan *engine.Error)
	go func() {
		_, e := r.run(r.req(1, 1, "go"))
		done <- e
	}()
	for {
		if x, err := store.GetExecutor(r.ctx, r.db, r.taskID); err == nil && x.Status == store.ExecutorRunning {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A newer attempt (another host, say) takes the task over.
	if _, err := store.BeginAttempt(r.ctx, r.db, store.AttemptStart{TaskID: r.taskID, AttemptID: "newer", Turn: 1, Prompt: "go",
		PromptUUID: promptUUID(r.taskID, 1)}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if e := <-done; e == nil || e.Type != task.ErrTypeAttemptSuperseded || e.Retryable() {
		t.Fatalf("err = %v, want AttemptSuperseded, not retryable", e)
	}
	if x := r.executor(); x.AttemptID != "newer" || x.Status != store.ExecutorStarting || x.SessionID != "" {
		t.Fatalf("the stale attempt wrote the row: %+v", x)
	}
	if rec := r.turn(1); rec.Finished() || rec.CostUSD != 0 {
		t.Fatalf("the stale attempt committed the turn: %+v", rec)
	}
}

func TestCommitRidesOutADatabaseOutage(t *testing.T) {
	t.Parallel()
	proxy := pgtest.NewProxy(t, pgtest.AdminAddr())
	release := make(chan struct{})
	r := newRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			c.Text("m", "first half")
			<-release
			c.Text("m2", "second half")
			c.Result("second half", fakecli.DefaultUsage)
		})
	}, func(c *engine.Config) {
		pool, err := pgxpool.New(context.Background(), proxy.DSN(c.DB.(*pgxpool.Pool).Config().ConnString()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		c.DB = pool
		c.CommitRetry = 30 * time.Second
	})
	done := make(chan error)
	go func() {
		_, err := r.eng.RunTurn(r.ctx, r.req(1, 1, "go"))
		done <- err
	}()
	for {
		if x, err := store.GetExecutor(r.ctx, r.db, r.taskID); err == nil && x.Status == store.ExecutorRunning {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	proxy.Cut()
	close(release)
	time.Sleep(1500 * time.Millisecond) // the turn's result arrives while Postgres is unreachable
	proxy.Restore()
	if err := <-done; err != nil {
		t.Fatalf("the turn failed across the outage: %v", err)
	}
	var texts []string
	for _, ev := range r.events() {
		if ev.Type == events.TypeMessageChunk {
			texts = append(texts, ev.Text)
		}
	}
	if strings.Join(texts, "|") != "first half|second half" {
		t.Fatalf("message chunks in the log: %q", texts)
	}
	if rec := r.turn(1); rec.Status != task.TurnCompleted {
		t.Fatalf("turn = %+v", rec)
	}
}

func TestBackgroundWorkKeepsTheTurnOpen(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			c.Writef(`{"type":"system","subtype":"task_started","task_id":"bg1","tool_use_id":"toolu_bg","description":"background","session_id":%q,"uuid":%q}`, c.SessionID, fakecli.NewUUID())
			c.Text("m1", "started it")
			c.Result("started it", fakecli.DefaultUsage)
			time.Sleep(100 * time.Millisecond)
			c.Writef(`{"type":"system","subtype":"task_notification","task_id":"bg1","tool_use_id":"toolu_bg","status":"completed","summary":"done","session_id":%q,"uuid":%q}`, c.SessionID, fakecli.NewUUID())
			c.Init()
			c.Text("m2", "it finished")
			c.Result("it finished", fakecli.DefaultUsage)
		})
	})
	res, err := r.run(r.req(1, 1, "go"))
	if err != nil {
		t.Fatal(err)
	}
	if res.CostUSD != 0.02 {
		t.Fatalf("cost %v: the follow-up turn's cost does not belong to the turn", res.CostUSD)
	}
}

func TestAPanicIsAnInternalError(t *testing.T) {
	t.Parallel()
	r := newRig(t, reply, func(c *engine.Config) { c.Launcher = panicLauncher{} })
	if _, e := r.run(r.req(1, 1, "go")); e == nil || e.Type != task.ErrTypeInternal || !e.Retryable() {
		t.Fatalf("err = %v", e)
	}
	if x := r.executor(); x.Status != store.ExecutorFailed {
		t.Fatalf("row = %+v", x)
	}
}

type panicLauncher struct{}

func (panicLauncher) Launch(context.Context, claudecode.Command, claudecode.ProcessConfig) (engine.Process, error) {
	panic("launcher bug")
}

func TestMCPConfigurationNeverReachesArgv(t *testing.T) {
	t.Parallel()
	var seen claudecode.Command
	var content []byte
	r := newRig(t, func(c *fakecli.CLI) {
		seen = c.Cmd
		content, _ = os.ReadFile(c.Cmd.MCPConfigFile)
		reply(c)
	})
	req := r.req(1, 1, "go")
	req.Profile.MCPServers = map[string]task.MCPServer{"gh": {Command: "gh-mcp", Env: map[string]string{"TOKEN": "${GH_TOKEN}"}}}
	if _, err := r.run(req); err != nil {
		t.Fatal(err)
	}
	if seen.MCPConfigFile == "" || !strings.Contains(string(content), "gh-mcp") {
		t.Fatalf("the MCP configuration did not go through a file: %q (%s)", seen.MCPConfigFile, content)
	}
	for _, a := range seen.Args() {
		if strings.Contains(a, "gh-mcp") || strings.Contains(a, "GH_TOKEN") {
			t.Fatalf("argv carries the MCP configuration: %q", a)
		}
	}
	st, err := os.Stat(filepath.Dir(seen.MCPConfigFile))
	if err == nil && st.Mode().Perm()&0o077 != 0 {
		t.Fatalf("the MCP configuration's folder is open to others: %v", st.Mode())
	}
}

func TestToolCallsOfALostAttemptAreClosed(t *testing.T) {
	t.Parallel()
	r := newRig(t, reply)
	// Attempt 1 died with its worker: it began, logged a tool call, and never closed it.
	req1 := r.req(1, 1, "go")
	if _, err := store.BeginAttempt(r.ctx, r.db, store.AttemptStart{TaskID: r.taskID, AttemptID: req1.AttemptID, Turn: 1,
		Prompt: "go", PromptUUID: req1.PromptUUID}); err != nil {
		t.Fatal(err)
	}
	call, _ := json.Marshal(events.AgentEvent{Type: events.TypeToolCall, ToolCallID: "toolu_lost", ToolName: "Bash", ToolStatus: events.ToolRunning})
	if _, _, err := store.AppendEvents(r.ctx, r.db, r.taskID, []store.EventInput{{Turn: 1, Attempt: 1, Type: string(events.TypeToolCall), Payload: call}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.run(r.req(1, 2, "go")); err != nil {
		t.Fatal(err)
	}
	evs, err := store.ListEvents(r.ctx, r.db, r.taskID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var closed bool
	for _, ev := range evs {
		var a events.AgentEvent
		_ = json.Unmarshal(ev.Payload, &a)
		if a.Type == events.TypeToolUpdate && a.ToolCallID == "toolu_lost" {
			closed = a.ToolStatus == events.ToolError && ev.Attempt == 2 && strings.Contains(a.ToolError, "lost")
		}
	}
	if !closed {
		t.Fatal("the lost attempt's tool call was not closed by the next attempt")
	}
}

// windowsOf returns the sizes of the context_window events of the rig's task.
func (r *rig) windowsOf() []events.ContextWindow {
	var out []events.ContextWindow
	for _, ev := range r.events() {
		if ev.Type == events.TypeContextWindow {
			out = append(out, *ev.ContextWindow)
		}
	}
	return out
}

// contextUsageAsks counts the get_context_usage requests of every process the rig started.
func (r *rig) contextUsageAsks() int {
	n := 0
	for _, p := range r.cli.Procs() {
		n += p.ContextUsageAsks()
	}
	return n
}

func TestContextWindowIsAskedOnlyWhereNothingReportsIt(t *testing.T) {
	t.Parallel()
	// The results carry no window: the host asks a CLI once, after the first result, and from
	// then on knows the window of the model, in every process it starts.
	noWindow := fakecli.DefaultUsage
	noWindow.ContextWindow = 0
	script := func(usage fakecli.Usage) func(c *fakecli.CLI) {
		return func(c *fakecli.CLI) {
			c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
				c.Init()
				c.Text("m-"+fakecli.NewUUID()[:8], "hi")
				c.Result("hi", usage)
			})
		}
	}
	r := newRig(t, script(noWindow))
	// The answer comes after the first result: the window shows in a later turn's log.
	for turn := 1; len(r.windowsOf()) == 0; turn++ {
		if turn > 5 {
			t.Fatal("no context_window event in five turns")
		}
		if _, err := r.run(r.req(turn, 1, "go")); err != nil {
			t.Fatal(err)
		}
	}
	other := *r
	other.taskID = "task-other-" + r.taskID
	if _, err := other.run(other.req(1, 1, "go")); err != nil {
		t.Fatal(err)
	}
	if n := len(r.cli.Procs()); n != 2 {
		t.Fatalf("%d processes, want one per task", n)
	}
	if n := r.contextUsageAsks(); n != 1 {
		t.Errorf("the CLIs were asked for their context window %d times, want once", n)
	}
	for _, w := range append(r.windowsOf(), other.windowsOf()...) {
		if w.Size != fakecli.DefaultUsage.ContextWindow || w.Model != fakecli.Model {
			t.Fatalf("context window %+v, want the CLI's own (%d, %s)", w, fakecli.DefaultUsage.ContextWindow, fakecli.Model)
		}
	}
	if len(other.windowsOf()) == 0 {
		t.Error("the second process's turn has no context_window event: the host forgot the window")
	}

	// Results that report the window: the CLI is never asked.
	reported := newRig(t, script(fakecli.DefaultUsage))
	if _, err := reported.run(reported.req(1, 1, "go")); err != nil {
		t.Fatal(err)
	}
	if n := reported.contextUsageAsks(); n != 0 || len(reported.windowsOf()) == 0 {
		t.Errorf("with windows reported: %d asks and %d context_window events, want none and some", n, len(reported.windowsOf()))
	}
}

func TestCancelTurnStopsTheRunningAttemptAtOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			c.Text("m", "working")
			<-c.Interrupted()
			c.Hang()
		})
	})
	if r.eng.CancelTurn(r.taskID, 1) {
		t.Fatal("CancelTurn found a turn before any ran")
	}
	done := make(chan *engine.Error)
	go func() {
		_, e := r.run(r.req(1, 1, "go"))
		done <- e
	}()
	for {
		if x, err := store.GetExecutor(r.ctx, r.db, r.taskID); err == nil && x.Status == store.ExecutorRunning {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r.eng.CancelTurn(r.taskID, 2) {
		t.Fatal("CancelTurn cancelled another turn")
	}
	if !r.eng.CancelTurn(r.taskID, 1) {
		t.Fatal("CancelTurn did not find the running turn")
	}
	if e := <-done; e == nil || e.Type != task.ErrTypeCancelled {
		t.Fatalf("err = %v, want Cancelled", e)
	}
	if x := r.executor(); x.Status != store.ExecutorStopped || r.turn(1).Status != task.TurnFailed {
		t.Fatalf("row %+v, turn %+v", x, r.turn(1))
	}
}

// A cancel recorded while the turn's attempt was lost wins over its retry: the retry ends
// Cancelled (not retried) before any CLI starts or any prompt is sent, and the turn is closed. A
// cancel of another workflow run of the same task refuses nothing.
func TestAnAttemptOfACancelledTaskRefusesToRun(t *testing.T) {
	t.Parallel()
	crash := func(c *fakecli.CLI) {
		c.Prompt()
		c.Exit(&claudecode.ExitError{Code: 1})
	}
	r := newRig(t, crash)
	if err := store.RecordCancel(r.ctx, r.db, r.taskID, "an-earlier-run", ""); err != nil {
		t.Fatal(err)
	}
	if _, e := r.run(r.req(1, 1, "go")); e == nil || e.Type != task.ErrTypeClaudeExited {
		t.Fatalf("attempt 1: %v, want %s", e, task.ErrTypeClaudeExited)
	}
	if err := store.RecordCancel(r.ctx, r.db, r.taskID, "run", ""); err != nil {
		t.Fatal(err)
	}
	_, e := r.run(r.req(1, 2, "go"))
	if e == nil || e.Type != task.ErrTypeCancelled || e.Retryable() {
		t.Fatalf("attempt 2 after the cancel: %v, want a %s error that is not retried", e, task.ErrTypeCancelled)
	}
	if n := len(r.cli.Launches()); n != 1 {
		t.Errorf("%d CLI processes started, want only the first attempt's", n)
	}
	if rec := r.turn(1); !rec.Finished() {
		t.Errorf("the turn after the refused attempt is %s, want it closed", rec.Status)
	}
}

package activities_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/activities"
	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/fakecli"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// runOnce is a workflow that runs one attempt of RunTurn and returns what it got: the error as
// a workflow receives it.
func runOnce(ctx workflow.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    10 * time.Second,
		WaitForCancellation: true,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var res task.RunTurnResult
	err := workflow.ExecuteActivity(ctx, task.ActivityRunTurn, in).Get(ctx, &res)
	return res, err
}

type edgeCase struct {
	name         string
	script       func(c *fakecli.CLI)
	mutate       func(in *task.RunTurnInput, cfg *engine.Config)
	cancel       bool
	wantType     string // "" for success
	nonRetryable bool
	nextDelay    time.Duration
}

func TestErrorsAsTheWorkflowReceivesThem(t *testing.T) {
	t.Parallel()
	reply := func(c *fakecli.CLI) { c.Serve(func(c *fakecli.CLI, p fakecli.Line) { c.Reply("ok") }) }
	cases := []edgeCase{
		{name: "completed", script: reply},
		{name: "invalid input", script: reply, wantType: task.ErrTypeInvalidInput, nonRetryable: true,
			mutate: func(in *task.RunTurnInput, _ *engine.Config) { in.Prompt.Attachments = []string{"../../etc/passwd"} }},
		{name: "workspace missing", script: reply, wantType: task.ErrTypeWorkspaceMissing, nonRetryable: true,
			mutate: func(in *task.RunTurnInput, _ *engine.Config) { in.Workspace = filepath.Join(in.Workspace, "gone") }},
		{name: "resume rejected", wantType: task.ErrTypeResumeRejected, nonRetryable: true,
			script: func(c *fakecli.CLI) { c.Exit(&claudecode.ResumeRejectedError{Reason: "No conversation found"}) }},
		{name: "claude does not start", script: reply, wantType: task.ErrTypeClaudeStartFailed,
			mutate: func(_ *task.RunTurnInput, cfg *engine.Config) {
				cfg.Launcher = &fakecli.Launcher{Fail: errors.New("exec format error"), Script: reply}
			}},
		{name: "claude exits", wantType: task.ErrTypeClaudeExited,
			script: func(c *fakecli.CLI) {
				c.Prompt()
				c.Exit(&claudecode.ExitError{Code: 1})
			}},
		{name: "claude stalls", wantType: task.ErrTypeClaudeStalled,
			mutate: func(_ *task.RunTurnInput, cfg *engine.Config) { cfg.StallTimeout = 100 * time.Millisecond },
			script: func(c *fakecli.CLI) {
				c.Prompt()
				c.Hang()
			}},
		{name: "claude fails the turn", wantType: task.ErrTypeClaudeProtocol,
			script: func(c *fakecli.CLI) {
				c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
					c.Init()
					c.ErrorResult("error_during_execution", "", "broken", 0, fakecli.Usage{})
				})
			}},
		{name: "model API error with retry-after", wantType: task.ErrTypeModelAPI, nextDelay: 2 * time.Second,
			script: func(c *fakecli.CLI) {
				c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
					c.Init()
					c.APIRetry(529, 2000)
					c.ErrorResult("success", "api_error", "API Error: 529 overloaded", 529, fakecli.Usage{})
				})
			}},
		{name: "store unavailable", script: reply, wantType: task.ErrTypeStoreUnavailable,
			mutate: func(_ *task.RunTurnInput, cfg *engine.Config) {
				p := pgtest.NewProxy(t, pgtest.AdminAddr())
				dead, err := pgxpool.New(context.Background(), p.DSN(cfg.DB.(*pgxpool.Pool).Config().ConnString()))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(dead.Close)
				p.Cut()
				cfg.DB = dead
			}},
		{name: "cancelled", cancel: true, wantType: task.ErrTypeCancelled,
			script: func(c *fakecli.CLI) {
				c.Prompt()
				c.Init()
				c.Text("m", "working")
				c.Hang()
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := pgtest.NewPool(t)
			cfg := engine.Config{DB: db, HostID: "h", Claude: engine.Claude{Bin: "claude"},
				Launcher: &fakecli.Launcher{Script: tc.script}, StopTimeout: 200 * time.Millisecond,
				CommitRetry: time.Second, HeartbeatInterval: 50 * time.Millisecond}
			taskID := "task-" + uuid.NewString()[:8]
			in := task.RunTurnInput{TaskID: taskID, Turn: 1, Prompt: task.Prompt{Text: "go"},
				PromptUUID: uuid.NewString(), Workspace: t.TempDir(), Profile: task.Profile{PermissionMode: task.Autonomous}}
			if tc.mutate != nil {
				tc.mutate(&in, &cfg)
			}
			eng, err := engine.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { eng.Close(context.Background()) })

			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(runOnce)
			activities.New(eng, nil, 10*time.Second).RegisterHost(env)
			if tc.cancel {
				env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
			}
			env.ExecuteWorkflow(runOnce, in)
			if !env.IsWorkflowCompleted() {
				t.Fatal("the workflow did not complete")
			}
			err = env.GetWorkflowError()
			if tc.wantType == "" {
				var res task.RunTurnResult
				if err != nil || env.GetWorkflowResult(&res) != nil || res.Status != task.TurnCompleted {
					t.Fatalf("err = %v, result %+v", err, res)
				}
				return
			}
			if tc.cancel {
				var canceled *temporal.CanceledError
				if !errors.As(err, &canceled) {
					t.Fatalf("err = %v, want the activity cancelled", err)
				}
				return
			}
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) {
				t.Fatalf("err = %v (%T), want an application error", err, err)
			}
			if appErr.Type() != tc.wantType || appErr.NonRetryable() != tc.nonRetryable || appErr.NextRetryDelay() != tc.nextDelay {
				t.Fatalf("got type %q non-retryable %v next delay %s (%v); want %q %v %s",
					appErr.Type(), appErr.NonRetryable(), appErr.NextRetryDelay(), appErr, tc.wantType, tc.nonRetryable, tc.nextDelay)
			}
			if task.Retryable(appErr.Type()) == appErr.NonRetryable() {
				t.Fatalf("type %s is documented retryable=%v but crossed as non-retryable=%v", appErr.Type(), task.Retryable(appErr.Type()), appErr.NonRetryable())
			}
			if cause := errors.Unwrap(appErr); cause != nil {
				t.Fatalf("the application error carries a Go cause of type %T across the edge", cause)
			}
		})
	}
}

func TestAttemptIDNamesTheAttempt(t *testing.T) {
	if got := activities.AttemptID("run", "5", 2); got != "run/5/2" {
		t.Fatalf("AttemptID = %q", got)
	}
}

func TestRunTurnHeartbeatsFromItsStart(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	eng, err := engine.New(engine.Config{DB: db, HostID: "h", Claude: engine.Claude{Bin: "claude"}, HeartbeatInterval: 20 * time.Millisecond,
		Launcher: &fakecli.Launcher{Script: func(c *fakecli.CLI) {
			c.Serve(func(c *fakecli.CLI, p fakecli.Line) { c.Reply("done") })
		}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(context.Background()) })
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	activities.New(eng, nil, 10*time.Second).RegisterHost(env)
	var beats atomic.Int64
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var seq int64
		if details.Get(&seq) == nil {
			beats.Add(1)
		}
	})
	in := task.RunTurnInput{TaskID: "task-" + uuid.NewString()[:8], Turn: 1, Prompt: task.Prompt{Text: "go"},
		PromptUUID: uuid.NewString(), Workspace: t.TempDir()}
	v, err := env.ExecuteActivity(task.ActivityRunTurn, in)
	if err != nil {
		t.Fatal(err)
	}
	var res task.RunTurnResult
	if err := v.Get(&res); err != nil || res.Status != task.TurnCompleted {
		t.Fatalf("result %+v, %v", res, err)
	}
	if beats.Load() == 0 {
		t.Fatal("the attempt never heartbeat")
	}
}

// RunTurn hands the engine the task's grants and approval timeout: a granted call is allowed
// by the hook without asking, and a request's deadline is the task's timeout after it.
func TestRunTurnPassesGrantsAndApprovalTimeout(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	hook := make(chan map[string]any, 1)
	eng, err := engine.New(engine.Config{DB: db, HostID: "h", Claude: engine.Claude{Bin: "claude"},
		Launcher: &fakecli.Launcher{Script: func(c *fakecli.CLI) {
			c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
				c.Init()
				l, _ := c.Request("h1", `{"subtype":"hook_callback","callback_id":"tool_approval","input":{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"make deploy"},"permission_mode":"bypassPermissions"},"tool_use_id":"toolu_1"}`)
				resp, _ := l.Raw["response"].(map[string]any)
				payload, _ := resp["response"].(map[string]any)
				hook <- payload
				c.Request("c2", `{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"make other"},"tool_use_id":"toolu_2"}`)
				c.Reply("done")
			})
		}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(context.Background()) })
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	activities.New(eng, nil, 10*time.Second).RegisterHost(env)
	taskID := "task-" + uuid.NewString()[:8]
	grant := task.Grant{Tool: "Bash", Suggestion: task.Suggestion{Key: "1", Label: "allow Bash(make deploy)",
		Raw: []byte(`{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"make deploy"}],"behavior":"allow","destination":"session"}`)}}
	in := task.RunTurnInput{TaskID: taskID, Turn: 1, Prompt: task.Prompt{Text: "go"}, PromptUUID: uuid.NewString(),
		Workspace: t.TempDir(), Profile: task.Profile{PermissionMode: task.Supervised},
		Grants: []task.Grant{grant}, ApprovalTimeout: 90 * time.Minute}
	done := make(chan error, 1)
	go func() {
		_, err := env.ExecuteActivity(task.ActivityRunTurn, in)
		done <- err
	}()
	out := <-hook
	if h, _ := out["hookSpecificOutput"].(map[string]any); h["permissionDecision"] != claudecode.DecisionAllow {
		t.Errorf("the granted call's hook answer: %+v", out)
	}
	var row store.PermissionRequest
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if rows, err := store.ListPendingPermissions(t.Context(), db, taskID, 0); err == nil && len(rows) == 1 {
			row = rows[0]
			break
		}
	}
	if row.RequestID == "" {
		t.Fatal("the other call was not asked")
	}
	if got := row.Deadline.Sub(row.CreatedAt); got < 89*time.Minute || got > 91*time.Minute {
		t.Errorf("the request's deadline is %s after it, want 90m", got)
	}
	if err := eng.Deliver(t.Context(), task.DecisionRecord{TaskID: taskID, RequestID: row.RequestID, Outcome: task.OutcomeAllowed, By: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

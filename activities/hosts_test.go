package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/drover-run/drover/activities"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/testkit/fakecli"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// newHostEngine is an engine of host "h" on a fresh database, running script.
func newHostEngine(t *testing.T, script func(c *fakecli.CLI)) (*engine.Engine, *pgxpool.Pool) {
	t.Helper()
	db := pgtest.NewPool(t)
	eng, err := engine.New(engine.Config{DB: db, HostID: "h", Claude: engine.Claude{Bin: "claude"},
		Launcher: &fakecli.Launcher{Script: script}, StopTimeout: 200 * time.Millisecond,
		CommitRetry: time.Second, HeartbeatInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(context.Background()) })
	return eng, db
}

// turnInput is turn 1 of a new task, after attemptsBefore attempts on other hosts.
func turnInput(t *testing.T, attemptsBefore int) task.RunTurnInput {
	return task.RunTurnInput{TaskID: "task-" + uuid.NewString()[:8], Turn: 1, Prompt: task.Prompt{Text: "go"},
		PromptUUID: uuid.NewString(), Workspace: t.TempDir(), Profile: task.Profile{PermissionMode: task.Autonomous},
		AttemptsBefore: attemptsBefore}
}

// runOnceIn runs one attempt of in through a workflow and returns the error the workflow got.
func runOnceIn(t *testing.T, eng *engine.Engine, in task.RunTurnInput) error {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(runOnce)
	activities.New(eng, nil, 10*time.Second).RegisterHost(env)
	env.ExecuteWorkflow(runOnce, in)
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	return env.GetWorkflowError()
}

// reassigned checks that err is, as the workflow sees it, a WorkerStopping that Temporal does
// not retry, carrying the attempt that ended.
func reassigned(t *testing.T, err error, attempt int) {
	t.Helper()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		t.Fatalf("err = %v (%T), want an application error", err, err)
	}
	if appErr.Type() != task.ErrTypeWorkerStopping || !appErr.NonRetryable() {
		t.Fatalf("got type %q non-retryable %v (%v), want %s not retried", appErr.Type(), appErr.NonRetryable(), appErr, task.ErrTypeWorkerStopping)
	}
	var d task.ReassignDetails
	if !appErr.HasDetails() {
		t.Fatal("the error carries no details")
	}
	if err := appErr.Details(&d); err != nil {
		t.Fatalf("decoding the details: %v", err)
	}
	if d.Attempt != attempt {
		t.Fatalf("details = %+v, want attempt %d", d, attempt)
	}
}

// A turn that reaches a draining host comes back to the workflow as WorkerStopping, not
// retried on that host's queue, naming the attempt it was (counted over the turn) so that the
// next host numbers on.
func TestTurnOnADrainingHostIsReassigned(t *testing.T) {
	t.Parallel()
	eng, db := newHostEngine(t, reply)
	eng.Drain(t.Context(), time.Minute)
	in := turnInput(t, 2)
	reassigned(t, runOnceIn(t, eng, in), 3)
	if _, err := store.GetExecutor(t.Context(), db, in.TaskID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused turn wrote its executor row: %v", err)
	}
}

// A turn stopped at the drain timeout comes back the same way.
func TestTurnPastTheDrainTimeoutIsReassigned(t *testing.T) {
	t.Parallel()
	eng, db := newHostEngine(t, func(c *fakecli.CLI) {
		c.Prompt()
		c.Init()
		c.Text("m", "working")
		c.Hang()
	})
	in := turnInput(t, 1)
	go func() {
		for {
			if x, err := store.GetExecutor(t.Context(), db, in.TaskID); err == nil && x.Status == store.ExecutorRunning {
				eng.Drain(t.Context(), 50*time.Millisecond)
				return
			}
			if t.Context().Err() != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	reassigned(t, runOnceIn(t, eng, in), 2)
}

// reply answers every prompt with a plain successful turn.
func reply(c *fakecli.CLI) { c.Serve(func(c *fakecli.CLI, p fakecli.Line) { c.Reply("ok") }) }

// The first attempt on a new host numbers on from the attempts before it: its id, its result
// and the task's log say attempt 3, and the log says why attempt 2 ended.
func TestAttemptsAreNumberedOnAfterAMove(t *testing.T) {
	t.Parallel()
	eng, db := newHostEngine(t, reply)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	activities.New(eng, nil, 10*time.Second).RegisterHost(env)
	in := turnInput(t, 2)
	v, err := env.ExecuteActivity(task.ActivityRunTurn, in)
	if err != nil {
		t.Fatal(err)
	}
	var res task.RunTurnResult
	if err := v.Get(&res); err != nil || res.Status != task.TurnCompleted || res.Attempt != 3 {
		t.Fatalf("result %+v, %v; want attempt 3 completed", res, err)
	}
	x, err := store.GetExecutor(t.Context(), db, in.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, n, ok := activities.ParseAttemptID(x.AttemptID); !ok || n != 3 {
		t.Fatalf("the executor row's attempt id %q names attempt %d (ok %v), want 3", x.AttemptID, n, ok)
	}
	evs, err := store.ListEvents(t.Context(), db, in.TaskID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var retry *events.TurnRetry
	for _, ev := range evs {
		var e events.AgentEvent
		if err := json.Unmarshal(ev.Payload, &e); err != nil {
			t.Fatal(err)
		}
		if e.Type == events.TypeTurnRetry {
			retry = e.TurnRetry
		}
	}
	if retry == nil || retry.Attempt != 2 || retry.Reason != "the previous attempt's host stopped running the turn (it drained or was lost)" {
		t.Fatalf("turn_retry = %+v, want attempt 2 ended because its host stopped", retry)
	}
}

// AssignHost names this host's queue, and refuses while the host drains; the refusal is
// retried, so that a live host answers.
func TestAssignHostRefusesWhileDraining(t *testing.T) {
	t.Parallel()
	eng, _ := newHostEngine(t, reply)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	activities.New(eng, nil, 10*time.Second).RegisterShared(env)
	v, err := env.ExecuteActivity(task.ActivityAssignHost)
	if err != nil {
		t.Fatal(err)
	}
	var queue string
	if err := v.Get(&queue); err != nil || queue != task.HostQueue("h") {
		t.Fatalf("AssignHost = %q, %v; want %q", queue, err, task.HostQueue("h"))
	}

	eng.Drain(t.Context(), time.Minute)
	_, err = env.ExecuteActivity(task.ActivityAssignHost)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != task.ErrTypeWorkerStopping || appErr.NonRetryable() {
		t.Fatalf("AssignHost on a draining host = %v, want a retryable %s", err, task.ErrTypeWorkerStopping)
	}
}

func TestParseAttemptID(t *testing.T) {
	t.Parallel()
	run, act, n, ok := activities.ParseAttemptID(activities.AttemptID("5e0c6a8e-run", "12", 4))
	if !ok || run != "5e0c6a8e-run" || act != "12" || n != 4 {
		t.Fatalf("round trip = %q %q %d %v", run, act, n, ok)
	}
	for _, bad := range []string{"", "run", "run/5", "run/5/0", "run/5/-1", "run/5/x", "/5/1", "run//1", "run/5/"} {
		if run, act, n, ok := activities.ParseAttemptID(bad); ok || run != "" || act != "" || n != 0 {
			t.Errorf("ParseAttemptID(%q) = %q %q %d %v, want nothing", bad, run, act, n, ok)
		}
	}
}

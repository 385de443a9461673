package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/internal/testkit/temporaltest"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/taskview"
)

// historyOf is the task's history as Temporal keeps it: the event types, and the params the
// task was started with.
func historyOf(t *testing.T, tc client.Client, id string) (types []string, started task.Params) {
	t.Helper()
	it := tc.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.GetEventType().String())
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			if err := converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &started); err != nil {
				t.Fatal(err)
			}
		}
	}
	return types, started
}

// With no worker running, every call answers within its deadline: a creation is recorded by
// Temporal with its first prompt (Temporal's history is the witness) and answered 201; a
// prompt, an interrupt, a budget change and a close are answered 503 and not sent; a cancel,
// which needs no worker, is taken.
func TestCallsAnswerWithNoWorker(t *testing.T) {
	t.Parallel()
	srv := temporaltest.Start(t, nil)
	tc, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: srv.Namespace()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	tasks := &taskclient.Client{Temporal: tc, TaskQueue: "no-worker"}
	exists := func(ctx context.Context, id string) error {
		_, err := tc.DescribeWorkflow(ctx, id, "")
		return err
	}
	pool := pgtest.NewPool(t)
	ts, _ := newServer(t, api.Config{Tasks: tasks, Workers: tasks.WorkersPolling, Exists: exists,
		DB: pool, Reader: taskview.New(pool)})
	ws := t.TempDir()

	a := do(t, ts, "POST", "/api/v1/tasks", `{"id":"t1","prompt":"hello","workspace":"`+ws+`"}`, "Idempotency-Key", "k-1")
	if a.status != 201 || !strings.Contains(string(a.body), `"turn":1`) {
		t.Fatalf("create with no worker: %d %s", a.status, a.body)
	}
	types, started := historyOf(t, tc, "t1")
	if started.First == nil || started.First.Prompt.Text != "hello" || started.First.UpdateID != "api-create:k-1" {
		t.Fatalf("Temporal started t1 with %+v, want the first prompt in it", started.First)
	}
	// The task is on the read side at once, its first prompt queued, though no worker has run it.
	if g := do(t, ts, "GET", "/api/v1/tasks/t1", ""); g.status != 200 || !strings.Contains(string(g.body), `"status":"idle"`) ||
		!strings.Contains(string(g.body), `"text":"hello"`) {
		t.Errorf("a task created with no worker, read back: %d %s", g.status, g.body)
	}
	if l := do(t, ts, "GET", "/api/v1/tasks", ""); l.status != 200 || !strings.Contains(string(l.body), `"id":"t1"`) {
		t.Errorf("a task created with no worker is not listed: %d %s", l.status, l.body)
	}
	for _, c := range []struct{ path, body string }{
		{"/api/v1/tasks/t1/prompts", `{"text":"again","request_id":"r-1"}`},
		{"/api/v1/tasks/t1/interrupt", ``},
		{"/api/v1/tasks/t1/budget", `{"max_turns":3}`},
		{"/api/v1/tasks/t1/close", ``},
	} {
		a := do(t, ts, "POST", c.path, c.body)
		if a.status != 503 || a.err.Code != "unavailable" || !strings.Contains(a.err.Message, "nothing was sent") {
			t.Errorf("%s with no worker: %d %s %q", c.path, a.status, a.err.Code, a.err.Message)
		}
	}
	if after, _ := historyOf(t, tc, "t1"); strings.Join(after, " ") != strings.Join(types, " ") {
		t.Errorf("refused commands reached the task: history went from %v to %v", types, after)
	}
	// A task that does not exist is not_found, worker or not.
	if a := do(t, ts, "POST", "/api/v1/tasks/nobody/prompts", `{"text":"a"}`); a.status != 404 || a.err.Code != "not_found" {
		t.Errorf("a prompt to no task with no worker: %d %s %q", a.status, a.err.Code, a.err.Message)
	}
	if a := do(t, ts, "POST", "/api/v1/tasks/t1/cancel", ``); a.status != 202 {
		t.Errorf("cancel with no worker: %d %s", a.status, a.body)
	}
}

// Without the check for workers, a command that no worker takes is answered 503 when its
// deadline passes, saying it may still apply and how to learn its answer; a command to a task
// that has ended is answered task_closed.
func TestCommandsAnswerByTheirDeadline(t *testing.T) {
	t.Parallel()
	srv := temporaltest.Start(t, nil)
	tc, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: srv.Namespace()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	tasks := &taskclient.Client{Temporal: tc, TaskQueue: "no-worker"}
	ts, _ := newServer(t, api.Config{Tasks: tasks, CommandTimeout: 2 * time.Second})
	ws := t.TempDir()
	if a := do(t, ts, "POST", "/api/v1/tasks", `{"id":"known","prompt":"hello","workspace":"`+ws+`"}`); a.status != 201 {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	a := do(t, ts, "POST", "/api/v1/tasks/known/prompts", `{"text":"again","request_id":"r-1"}`)
	if a.status != 503 || a.err.Code != "unavailable" || !strings.Contains(a.err.Message, "may still apply") {
		t.Errorf("a prompt no worker takes: %d %s %q", a.status, a.err.Code, a.err.Message)
	}
	if err := tc.TerminateWorkflow(t.Context(), "known", "", "ended for the test"); err != nil {
		t.Fatal(err)
	}
	a = do(t, ts, "POST", "/api/v1/tasks/known/prompts", `{"text":"late"}`)
	if a.status != 409 || a.err.Code != "task_closed" {
		t.Errorf("a prompt to an ended task: %d %s %q", a.status, a.err.Code, a.err.Message)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/drover-run/drover/internal/devserver"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/internal/testkit/temporaltest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/workflows"
)

// TestTaskCommandsOnTemporal runs the task commands against a real Temporal
// dev server and TaskWorkflow, with flags after their arguments and prompts
// from standard input and a file, and reads back what the task received. No
// host takes turns, so the first turn waits for one and later prompts stay
// queued, where the task's state shows them.
func TestTaskCommandsOnTemporal(t *testing.T) {
	srv := temporaltest.Start(t, devserver.SearchAttributeFlags(workflows.SearchAttributes()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	queue := "cli-test-" + uuid.NewString()[:8]
	tc, err := client.Dial(client.Options{HostPort: srv.Address(), Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	// Workflows only: the turn's AssignHost activity waits on the queue.
	w := sdkworker.New(tc, queue, sdkworker.Options{LocalActivityWorkerOnly: true})
	workflows.Register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	t.Setenv("TEMPORAL_ADDRESS", srv.Address())
	t.Setenv("DROVER_TASK_QUEUE", queue)
	t.Setenv("DROVER_DATABASE_URL", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")

	drover := func(stdin string, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(ctx, args, strings.NewReader(stdin), &out, &errb); err != nil {
			t.Fatalf("drover %q: %v\n%s", args, err, errb.String())
		}
		return out.String()
	}
	decode := func(s string, into any) {
		t.Helper()
		if err := json.Unmarshal([]byte(s), into); err != nil {
			t.Fatalf("decoding %q: %v", s, err)
		}
	}

	id := "cli-" + uuid.NewString()[:8]
	workspace := t.TempDir()
	var started struct {
		TaskID string `json:"task_id"`
		task.PromptAccepted
	}
	decode(drover("", "task", "start", "first", "prompt", "--id", id, "--workspace", workspace,
		"--model", "claude-test", "--idle-timeout", "1h", "-o", "json"), &started)
	if started.TaskID != id || started.Turn != 1 || started.PromptUUID == "" {
		t.Fatalf("start answered %+v", started)
	}

	// Longer than one argument may be: only standard input or a file carries it.
	long := strings.Repeat("a line of a long prompt\n", 300<<10/24)
	var second promptAccepted
	decode(drover(long, "task", "prompt", id, "-", "--attach", "img/a.png,img/b.png", "--output", "json"), &second)
	if second.TaskID != id || second.Turn != 2 {
		t.Fatalf("prompt answered %+v", second)
	}
	file := filepath.Join(t.TempDir(), "third.md")
	if err := os.WriteFile(file, []byte("from a file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := drover("", "task", "prompt", id, "--prompt-file", file); !strings.Contains(got, "prompt accepted as turn 3") {
		t.Errorf("prompt printed %q", got)
	}

	// No worker records the task's state in Postgres here: the workflow's own answer is read.
	state := func() task.State {
		t.Helper()
		st, err := (&taskclient.Client{Temporal: tc}).State(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := state()
	if st.Workspace != workspace || st.Model != "claude-test" || st.PermissionMode != task.Autonomous || st.RunningTurn != 1 {
		t.Errorf("state %+v: the start's flags did not reach the task", st)
	}
	if len(st.Pending) != 2 {
		t.Fatalf("pending = %+v, want turns 2 and 3", st.Pending)
	}
	if p := st.Pending[0].Prompt; p.Text != long || strings.Join(p.Attachments, " ") != "img/a.png img/b.png" {
		t.Errorf("turn 2 got %d bytes and %q; want the %d bytes of standard input and both attachments", len(p.Text), p.Attachments, len(long))
	}
	if p := st.Pending[1].Prompt; p.Text != "from a file\n" {
		t.Errorf("turn 3 got %q, want the file's text", p.Text)
	}

	// Visibility catches up with the start a moment later.
	var listed []*workflowpb.WorkflowExecutionInfo
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: `WorkflowId = "` + id + `"`})
		if err != nil {
			t.Fatal(err)
		}
		if listed = resp.GetExecutions(); len(listed) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	var listedWorkspace string
	if len(listed) == 1 {
		ws := listed[0].GetSearchAttributes().GetIndexedFields()[task.SearchWorkspace]
		_ = converter.GetDefaultDataConverter().FromPayload(ws, &listedWorkspace)
	}
	if len(listed) != 1 || listed[0].GetExecution().GetWorkflowId() != id || listedWorkspace != workspace {
		t.Errorf("list = %+v, want the task in workspace %s", listed, workspace)
	}

	if got := drover("", "task", "close", id); !strings.Contains(got, "closing after its queued prompts") {
		t.Errorf("close printed %q", got)
	}
	st = state()
	if st.Status != task.StatusRunning && st.Status != task.StatusClosing {
		t.Errorf("status after close = %s", st.Status)
	}
	// Cancel records the cancel in Postgres before it tells the task.
	t.Setenv("DROVER_DATABASE_URL", migratedDatabase(t))
	if got := drover("", "task", "cancel", id); !strings.Contains(got, "cancel requested") {
		t.Errorf("cancel printed %q", got)
	}
	for deadline := time.Now().Add(30 * time.Second); st.Status != task.StatusCancelled && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		st = state()
	}
	if st.Status != task.StatusCancelled {
		t.Errorf("status after cancel = %s", st.Status)
	}

	// A start that skips the client's checks reaches the workflow, whose
	// validator names the problem.
	t.Run("invalid params through Update-with-Start", func(t *testing.T) {
		start := tc.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID: "bad-" + id, TaskQueue: queue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		},
			task.WorkflowName, task.Params{Workspace: "/w", Profile: task.Profile{MaxTurns: -3}})
		h, err := tc.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: start,
			UpdateOptions: client.UpdateWorkflowOptions{
				UpdateName: task.UpdatePrompt, Args: []any{task.Prompt{Text: "hello"}},
				WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		if err == nil || !strings.Contains(err.Error(), "profile.max_turns: -3 is negative") || strings.Contains(err.Error(), "unknown update") {
			t.Errorf("err = %v, want a rejection naming max_turns", err)
		}
	})
}

// migratedDatabase returns the DSN of a fresh database with drover's schema.
func migratedDatabase(t *testing.T) string {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := store.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := store.Migrate(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	return dsn
}

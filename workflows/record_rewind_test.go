//go:build record

package workflows

// Records testdata/rewind_history.json from a real Temporal dev server:
//
//	go test -tags record -run TestRecordRewindHistory ./workflows/

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/drover-run/drover/internal/devserver"
	"github.com/drover-run/drover/internal/testkit/temporaltest"
	"github.com/drover-run/drover/task"
)

// A managed task forked from another's turn runs two turns, is rewound to its first, and runs a
// third.
func TestRecordRewindHistory(t *testing.T) {
	srv := temporaltest.Start(t, devserver.SearchAttributeFlags(SearchAttributes()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.Address(), Namespace: srv.Namespace(), Logger: logger})
	require.NoError(t, err)
	defer c.Close()

	const taskID = "task-record-rewind"
	shared, host := "drover-record-rewind", task.HostQueue("record-host")
	sw := worker.New(c, shared, worker.Options{})
	Register(sw)
	sw.RegisterActivityWithOptions(func(context.Context) (string, error) { return host, nil },
		activity.RegisterOptions{Name: task.ActivityAssignHost})
	sw.RegisterActivityWithOptions(func(context.Context, task.StateRecord) error { return nil },
		activity.RegisterOptions{Name: task.ActivityRecordState})
	sw.RegisterActivityWithOptions(func(_ context.Context, in task.RewindInput) (task.Rewound, error) {
		return task.Rewound{Turn: in.Turn, SessionID: "s", LastMessageUUID: "m1", Checkpoint: "c1", SetAside: []int{2},
			KeptRefs: "refs/drover/tasks/" + in.TaskID + "/rewound/1/"}, nil
	}, activity.RegisterOptions{Name: task.ActivityRewind})
	hw := newHostWorker(c, host)
	hw.RegisterActivityWithOptions(func(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
		return task.RunTurnResult{Status: task.TurnCompleted, SessionID: "s", LastMessageUUID: "m" + string(rune('0'+in.Turn)),
			CostUSD: 0.01, DurationMS: 100, Checkpoint: "c" + string(rune('0'+in.Turn)), Attempt: int(activity.GetInfo(ctx).Attempt)}, nil
	}, activity.RegisterOptions{Name: task.ActivityRunTurn})
	hw.RegisterActivityWithOptions(func(context.Context, task.InterruptTurnInput) error { return nil },
		activity.RegisterOptions{Name: task.ActivityStopExecutor})
	for _, w := range []worker.Worker{sw, hw} {
		require.NoError(t, w.Start())
		defer w.Stop()
	}

	p := task.Params{Repo: "/srv/repos/app", Profile: task.Profile{Model: "claude-test"},
		Fork: &task.ForkPoint{Task: "task-before", Turn: 2, SessionID: "s0", LastMessageUUID: "m0", Checkpoint: "c0"}}
	update := func(name, id string, out any, args ...any) {
		t.Helper()
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: taskID, UpdateName: name, UpdateID: id,
			Args: args, WaitForStage: client.WorkflowUpdateStageCompleted})
		require.NoError(t, err)
		require.NoError(t, h.Get(ctx, out))
	}
	idle := func(turns int) {
		t.Helper()
		require.Eventually(t, func() bool {
			v, err := c.QueryWorkflow(ctx, taskID, "", task.QueryState)
			require.NoError(t, err)
			var st task.State
			require.NoError(t, v.Get(&st))
			return st.Totals.Turns == turns && st.RunningTurn == 0
		}, time.Minute, 50*time.Millisecond, "turn %d ends", turns)
	}
	start := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{ID: taskID, TaskQueue: shared,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}, task.WorkflowName, p)
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: task.UpdatePrompt, UpdateID: "p1",
			Args: []any{task.Prompt{Text: "one"}}, WaitForStage: client.WorkflowUpdateStageCompleted}})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	idle(1)
	update(task.UpdatePrompt, "p2", nil, task.Prompt{Text: "two"})
	idle(2)
	var r task.Rewound
	update(task.UpdateRewind, "rewind-1", &r, task.RewindRequest{Turn: 1})
	require.Equal(t, 1, r.Turn)
	update(task.UpdatePrompt, "p3", nil, task.Prompt{Text: "three"})
	idle(3)
	update(task.UpdateClose, "close", nil)
	run := c.GetWorkflow(ctx, taskID, "")
	var st task.State
	require.NoError(t, run.Get(ctx, &st))
	require.Equal(t, task.StatusCompleted, st.Status)

	var hist historypb.History
	iter := c.GetWorkflowHistory(ctx, taskID, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		hist.Events = append(hist.Events, ev)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(&hist)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join("testdata", rewindHistoryFile), append(b, '\n'), 0o644))
	t.Logf("wrote %d events to testdata/%s", len(hist.Events), rewindHistoryFile)
}

//go:build record

package workflows

// Records testdata/decide_history.json from a real Temporal dev server:
//
//	go test -tags record -run TestRecordDecisionsHistory ./workflows/

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

// A supervised task whose one turn asks twice: the first request is decided by the decide
// Update (with a grant for the rest of the task), the second by the decide_later signal (a
// denial).
func TestRecordDecisionsHistory(t *testing.T) {
	srv := temporaltest.Start(t, devserver.SearchAttributeFlags(SearchAttributes()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.Address(), Namespace: srv.Namespace(), Logger: logger})
	require.NoError(t, err)
	defer c.Close()

	const taskID = "task-record-decisions"
	shared, host := "drover-record-decisions", task.HostQueue("record-host")
	delivered := make(chan task.DecisionRecord, 2)
	sw := worker.New(c, shared, worker.Options{})
	Register(sw)
	sw.RegisterActivityWithOptions(func(context.Context) (string, error) { return host, nil },
		activity.RegisterOptions{Name: task.ActivityAssignHost})
	sw.RegisterActivityWithOptions(func(context.Context, task.StateRecord) error { return nil },
		activity.RegisterOptions{Name: task.ActivityRecordState})
	sw.RegisterActivityWithOptions(func(_ context.Context, rec task.DecisionRecord) error { delivered <- rec; return nil },
		activity.RegisterOptions{Name: task.ActivityDeliverDecision})
	hw := newHostWorker(c, host)
	hw.RegisterActivityWithOptions(func(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
		for _, id := range []string{"req-update", "req-signal"} {
			r := task.PendingRequest{RequestID: id, Turn: in.Turn, Kind: task.KindTool, Tool: "Bash",
				Summary: "npm test", Suggestions: []task.Suggestion{{Key: "1", Label: "Bash(npm test:*)",
					Raw: []byte(`{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"npm test:*"}],"behavior":"allow"}`)}},
				Since: time.Now().UTC(), Deadline: time.Now().UTC().Add(time.Hour)}
			if err := c.SignalWorkflow(ctx, in.TaskID, "", task.SignalPermissionAsked, r); err != nil {
				return task.RunTurnResult{}, err
			}
			select {
			case <-delivered:
			case <-ctx.Done():
				return task.RunTurnResult{}, ctx.Err()
			}
		}
		return task.RunTurnResult{Status: task.TurnCompleted, SessionID: "s", LastMessageUUID: "m1",
			CostUSD: 0.01, DurationMS: 100, Attempt: int(activity.GetInfo(ctx).Attempt)}, nil
	}, activity.RegisterOptions{Name: task.ActivityRunTurn})
	hw.RegisterActivityWithOptions(func(context.Context, task.InterruptTurnInput) error { return nil },
		activity.RegisterOptions{Name: task.ActivityStopExecutor})
	for _, w := range []worker.Worker{sw, hw} {
		require.NoError(t, w.Start())
		defer w.Stop()
	}

	p := params()
	p.Profile.PermissionMode = task.Supervised
	start := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{ID: taskID, TaskQueue: shared,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}, task.WorkflowName, p)
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: task.UpdatePrompt, UpdateID: "p1",
			Args: []any{task.Prompt{Text: "run the tests"}}, WaitForStage: client.WorkflowUpdateStageCompleted}})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	awaiting := func(id string) {
		require.Eventually(t, func() bool {
			v, err := c.QueryWorkflow(ctx, taskID, "", task.QueryState)
			require.NoError(t, err)
			var st task.State
			require.NoError(t, v.Get(&st))
			return len(st.Awaiting) == 1 && st.Awaiting[0].RequestID == id
		}, time.Minute, 50*time.Millisecond, "request %s waits", id)
	}

	awaiting("req-update")
	h, err = c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: taskID, UpdateName: task.UpdateDecide,
		UpdateID: "decide-1", Args: []any{task.Decision{RequestID: "req-update", Allow: true, Always: "1", By: "alice"}},
		WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	var rec task.DecisionRecord
	require.NoError(t, h.Get(ctx, &rec))
	require.Equal(t, task.OutcomeAllowed, rec.Outcome)

	awaiting("req-signal")
	require.NoError(t, c.SignalWorkflow(ctx, taskID, "", task.SignalDecide,
		task.Decision{RequestID: "req-signal", Reason: "not now", By: "bob"}))

	h, err = c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: taskID, UpdateName: task.UpdateClose,
		UpdateID: "close", WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	run := c.GetWorkflow(ctx, taskID, "")
	var st task.State
	require.NoError(t, run.Get(ctx, &st))
	require.Equal(t, task.StatusCompleted, st.Status)
	require.Equal(t, 1, st.Totals.Turns)
	require.Len(t, st.Grants, 1)

	var hist historypb.History
	iter := c.GetWorkflowHistory(ctx, taskID, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		hist.Events = append(hist.Events, ev)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(&hist)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join("testdata", decideHistoryFile), append(b, '\n'), 0o644))
	t.Logf("wrote %d events to testdata/%s", len(hist.Events), decideHistoryFile)
}

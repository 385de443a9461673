//go:build record

package workflows

// Records testdata/decide_history.json from a real Temporal dev server:
//
//	go test -tags record -run TestRecordDecisionsHistory ./workflows/

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"

	"github.com/drover-run/drover/task"
)

// A supervised task whose one turn asks twice: the first request is decided by the decide
// Update (with a grant for the rest of the task), the second by the decide_later signal (a
// denial).
func TestRecordDecisionsHistory(t *testing.T) {
	r := newServerRig(t)
	const taskID = "task-record-decisions"
	shared, host := "drover-record-decisions", task.HostQueue("record-host")
	delivered := make(chan task.DecisionRecord, 2)
	sw := r.sharedWorker(shared, func(context.Context) (string, error) { return host, nil })
	sw.RegisterActivityWithOptions(func(_ context.Context, rec task.DecisionRecord) error { delivered <- rec; return nil },
		activity.RegisterOptions{Name: task.ActivityDeliverDecision})
	r.startWorkers(sw, r.hostWorker(host, func(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
		for _, id := range []string{"req-update", "req-signal"} {
			req := task.PendingRequest{RequestID: id, Turn: in.Turn, Kind: task.KindTool, Tool: "Bash",
				Summary: "npm test", Suggestions: []task.Suggestion{{Key: "1", Label: "Bash(npm test:*)",
					Raw: []byte(`{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"npm test:*"}],"behavior":"allow"}`)}},
				Since: time.Now().UTC(), Deadline: time.Now().UTC().Add(time.Hour)}
			if err := r.c.SignalWorkflow(ctx, in.TaskID, "", task.SignalPermissionAsked, req); err != nil {
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
	}))

	p := params()
	p.Profile.PermissionMode = task.Supervised
	r.startTask(taskID, shared, p, "run the tests", nil)
	awaiting := func(id string) {
		require.Eventually(t, func() bool {
			st := r.state(taskID)
			return len(st.Awaiting) == 1 && st.Awaiting[0].RequestID == id
		}, time.Minute, 50*time.Millisecond, "request %s waits", id)
	}

	awaiting("req-update")
	var rec task.DecisionRecord
	r.mustUpdate(taskID, task.UpdateDecide, "decide-1", &rec,
		task.Decision{RequestID: "req-update", Allow: true, Always: "1", By: "alice"})
	require.Equal(t, task.OutcomeAllowed, rec.Outcome)

	awaiting("req-signal")
	require.NoError(t, r.c.SignalWorkflow(r.ctx, taskID, "", task.SignalDecide,
		task.Decision{RequestID: "req-signal", Reason: "not now", By: "bob"}))

	r.mustUpdate(taskID, task.UpdateClose, "close", nil)
	st, runID := r.finish(taskID)
	require.Equal(t, task.StatusCompleted, st.Status)
	require.Equal(t, 1, st.Totals.Turns)
	require.Len(t, st.Grants, 1)
	writeHistory(t, r.history(taskID, runID), filepath.Join("testdata", decideHistoryFile))
}

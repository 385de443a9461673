//go:build record

package workflows

// Records testdata/rewind_history.json from a real Temporal dev server:
//
//	go test -tags record -run TestRecordRewindHistory ./workflows/

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"

	"github.com/drover-run/drover/task"
)

// A managed task forked from another's turn runs two turns, is rewound to its first, and runs a
// third.
func TestRecordRewindHistory(t *testing.T) {
	r := newServerRig(t)
	const taskID = "task-record-rewind"
	shared, host := "drover-record-rewind", task.HostQueue("record-host")
	sw := r.sharedWorker(shared, func(context.Context) (string, error) { return host, nil })
	sw.RegisterActivityWithOptions(func(_ context.Context, in task.RewindInput) (task.Rewound, error) {
		return task.Rewound{Turn: in.Turn, SessionID: "s", LastMessageUUID: "m1", Checkpoint: "c1", SetAside: []int{2},
			KeptRefs: "refs/drover/tasks/" + in.TaskID + "/rewound/1/"}, nil
	}, activity.RegisterOptions{Name: task.ActivityRewind})
	r.startWorkers(sw, r.hostWorker(host, func(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
		return task.RunTurnResult{Status: task.TurnCompleted, SessionID: "s", LastMessageUUID: "m" + string(rune('0'+in.Turn)),
			CostUSD: 0.01, DurationMS: 100, Checkpoint: "c" + string(rune('0'+in.Turn)), Attempt: int(activity.GetInfo(ctx).Attempt)}, nil
	}))

	p := task.Params{Repo: "/srv/repos/app", Profile: task.Profile{Model: "claude-test"},
		Fork: &task.ForkPoint{Task: "task-before", Turn: 2, SessionID: "s0", LastMessageUUID: "m0", Checkpoint: "c0"}}
	idle := func(turns int) {
		t.Helper()
		require.Eventually(t, func() bool {
			st := r.state(taskID)
			return st.Totals.Turns == turns && st.RunningTurn == 0
		}, time.Minute, 50*time.Millisecond, "turn %d ends", turns)
	}
	r.startTask(taskID, shared, p, "one", nil)
	idle(1)
	r.mustUpdate(taskID, task.UpdatePrompt, "p2", nil, task.Prompt{Text: "two"})
	idle(2)
	var rw task.Rewound
	r.mustUpdate(taskID, task.UpdateRewind, "rewind-1", &rw, task.RewindRequest{Turn: 1})
	require.Equal(t, 1, rw.Turn)
	r.mustUpdate(taskID, task.UpdatePrompt, "p3", nil, task.Prompt{Text: "three"})
	idle(3)
	r.mustUpdate(taskID, task.UpdateClose, "close", nil)
	st, runID := r.finish(taskID)
	require.Equal(t, task.StatusCompleted, st.Status)
	writeHistory(t, r.history(taskID, runID), filepath.Join("testdata", rewindHistoryFile))
}

package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/internal/pgtest"
	"github.com/drover-run/drover/internal/temporaltest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// oneAttempt runs the "leave" activity once, without retries or heartbeat timeout.
func oneAttempt(ctx workflow.Context, taskID string) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	return workflow.ExecuteActivity(ctx, "leave", taskID).Get(ctx, nil)
}

// A restarting host reports failed, through their task tokens, the attempts its earlier run
// left open in Temporal: those that were running, and those that had committed their turn
// shortly before (their answer may never have reached Temporal). It leaves alone an attempt
// whose end is already recorded and one that committed long ago.
func TestFailLostAttemptsReportsWhatMayBeOpen(t *testing.T) {
	t.Parallel()
	srv := temporaltest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Dial(ctx, srv.Address(), srv.Namespace(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	db := pgtest.NewPool(t)
	host := "host-" + uuid.NewString()[:8]

	// Each task's attempt records itself on the task's executor row as its case says, then
	// leaves its answer pending: its worker died before answering.
	cases := map[string]struct {
		record func(ctx context.Context, taskID string, begun store.AttemptStart) error
		// recorded is the row's status the attempt leaves; wantStatus the status after the report.
		recorded, wantStatus store.ExecutorStatus
		reported             bool
	}{
		"starting": {recorded: store.ExecutorStarting, wantStatus: store.ExecutorFailed, reported: true},
		"running": {recorded: store.ExecutorRunning, wantStatus: store.ExecutorFailed, reported: true,
			record: func(ctx context.Context, taskID string, s store.AttemptStart) error {
				return store.SetExecutorRunning(ctx, db, taskID, s.AttemptID, 4242)
			}},
		"committed": {recorded: store.ExecutorIdle, wantStatus: store.ExecutorIdle, reported: true, record: commit(db)},
		"committed long ago": {recorded: store.ExecutorIdle, wantStatus: store.ExecutorIdle, reported: false,
			record: func(ctx context.Context, taskID string, s store.AttemptStart) error {
				if err := commit(db)(ctx, taskID, s); err != nil {
					return err
				}
				_, err := db.Exec(ctx, `UPDATE executors_running SET updated_at = now() - interval '1 hour' WHERE task_id = $1`, taskID)
				return err
			}},
		"failed": {recorded: store.ExecutorFailed, wantStatus: store.ExecutorFailed, reported: false,
			record: func(ctx context.Context, taskID string, s store.AttemptStart) error {
				return store.EndAttempt(ctx, db, store.AttemptEnd{TaskID: taskID, AttemptID: s.AttemptID, Status: store.ExecutorFailed, Error: "x"})
			}},
	}
	queue := "recover-" + uuid.NewString()[:8]
	w := sdkworker.New(c, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(oneAttempt, workflow.RegisterOptions{Name: "oneAttempt"})
	w.RegisterActivityWithOptions(func(ctx context.Context, taskID string) error {
		s := store.AttemptStart{TaskID: taskID, AttemptID: taskID + "/1", AttemptToken: activity.GetInfo(ctx).TaskToken,
			HostID: host, Turn: 1, Prompt: "p", PromptUUID: uuid.NewString()}
		if _, err := store.BeginAttempt(ctx, db, s); err != nil {
			return err
		}
		if rec := cases[taskID[len(queue)+1:]].record; rec != nil {
			if err := rec(ctx, taskID, s); err != nil {
				return err
			}
		}
		return activity.ErrResultPending
	}, activity.RegisterOptions{Name: "leave"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	runs := map[string]client.WorkflowRun{}
	for name := range cases {
		id := queue + "/" + name
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "oneAttempt", id)
		if err != nil {
			t.Fatal(err)
		}
		runs[name] = run
	}
	for name, tc := range cases {
		id := queue + "/" + name
		for {
			x, err := store.GetExecutor(ctx, db, id)
			if err == nil && x.Status == tc.recorded && (name != "committed long ago" || time.Since(x.UpdatedAt) > time.Hour/2) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: the attempt never recorded itself", name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	if err := failLostAttempts(ctx, db, c, host, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}

	for name, tc := range cases {
		id := queue + "/" + name
		x, err := store.GetExecutor(ctx, db, id)
		if err != nil {
			t.Fatal(err)
		}
		if x.Status != tc.wantStatus {
			t.Errorf("%s: executor row %s after the report, want %s", name, x.Status, tc.wantStatus)
		}
		if !tc.reported {
			desc, err := c.DescribeWorkflow(ctx, id, "")
			if err != nil {
				t.Fatal(err)
			}
			pending := desc.RawResponse.GetPendingActivities()
			if len(pending) != 1 || pending[0].GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED {
				t.Errorf("%s: the attempt was reported (pending activities %v)", name, pending)
			}
			if err := c.TerminateWorkflow(ctx, id, "", "test over"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// A reported attempt ends its workflow at once; an unreported one would hold it for minutes.
		gctx, gcancel := context.WithTimeout(ctx, 20*time.Second)
		err = runs[name].Get(gctx, nil)
		gcancel()
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || appErr.Type() != task.ErrTypeWorkerLost {
			t.Errorf("%s: the workflow ended with %v, want the attempt failed as %s", name, err, task.ErrTypeWorkerLost)
		}
	}
}

// commit commits the attempt's turn, as an attempt does before answering.
func commit(db store.TxDB) func(ctx context.Context, taskID string, s store.AttemptStart) error {
	return func(ctx context.Context, taskID string, s store.AttemptStart) error {
		applied, err := store.CommitTurn(ctx, db, store.TurnCommit{TaskID: taskID, Turn: 1, AttemptID: s.AttemptID,
			SessionID: uuid.NewString(), LastMessageUUID: uuid.NewString(), Status: store.TurnCompleted})
		if err == nil && !applied {
			err = fmt.Errorf("turn of %s not committed", taskID)
		}
		return err
	}
}

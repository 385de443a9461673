package worker

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/internal/testkit/temporaltest"
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
		openAttempt
		// wantStatus is the row's status after the report.
		wantStatus store.ExecutorStatus
		reported   bool
	}{
		"starting":           {openAttempt{host: host, recorded: store.ExecutorStarting}, store.ExecutorFailed, true},
		"running":            {openAttempt{host: host, record: recordRunning, recorded: store.ExecutorRunning}, store.ExecutorFailed, true},
		"committed":          {openAttempt{host: host, record: recordCommitted, recorded: store.ExecutorIdle}, store.ExecutorIdle, true},
		"committed long ago": {openAttempt{host: host, record: recordCommitted, recorded: store.ExecutorIdle, longAgo: true}, store.ExecutorIdle, false},
		"failed":             {openAttempt{host: host, record: recordFailed, recorded: store.ExecutorFailed}, store.ExecutorFailed, false},
	}
	attempts := map[string]openAttempt{}
	for name, tc := range cases {
		attempts[name] = tc.openAttempt
	}
	queue := "recover-" + uuid.NewString()[:8]
	runs := leaveAttempts(ctx, t, c, db, queue, oneAttempt, attempts)

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

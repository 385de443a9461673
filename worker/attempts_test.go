package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/activities"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// openAttempt is an attempt a test leaves open in Temporal, as a worker that died in it would:
// a workflow runs the "leave" activity once, which begins the attempt on its task's executor row
// for host, records what record says, and leaves its result pending.
type openAttempt struct {
	host string
	// record records more of the attempt once it has begun (nil: it stays starting).
	record recordFunc
	// recorded is the row's status once the attempt has recorded itself.
	recorded store.ExecutorStatus
	// longAgo dates the row's last change an hour back.
	longAgo bool
}

type recordFunc func(ctx context.Context, db store.TxDB, s store.AttemptStart) error

// Ways an attempt records itself beyond its beginning.
var (
	recordRunning recordFunc = func(ctx context.Context, db store.TxDB, s store.AttemptStart) error {
		return store.SetExecutorRunning(ctx, db, s.TaskID, s.AttemptID, 4242)
	}
	// recordCommitted commits the attempt's turn, as an attempt does before answering.
	recordCommitted recordFunc = func(ctx context.Context, db store.TxDB, s store.AttemptStart) error {
		applied, err := store.CommitTurn(ctx, db, store.TurnCommit{TaskID: s.TaskID, Turn: 1, AttemptID: s.AttemptID,
			SessionID: uuid.NewString(), LastMessageUUID: uuid.NewString(), Status: task.TurnCompleted})
		if err == nil && !applied {
			err = fmt.Errorf("turn of %s not committed", s.TaskID)
		}
		return err
	}
	recordFailed recordFunc = func(ctx context.Context, db store.TxDB, s store.AttemptStart) error {
		return store.EndAttempt(ctx, db, store.AttemptEnd{TaskID: s.TaskID, AttemptID: s.AttemptID, Status: store.ExecutorFailed, Error: "x"})
	}
)

// leaveAttempts starts, on queue, one workflow wf per attempt (its id queue/name, its one
// argument that id), and waits until every attempt has recorded itself. wf must run the "leave"
// activity with its argument. It returns the workflows' runs by name.
func leaveAttempts(ctx context.Context, t *testing.T, c client.Client, db store.TxDB, queue string, wf any,
	attempts map[string]openAttempt) map[string]client.WorkflowRun {
	t.Helper()
	w := sdkworker.New(c, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "leaveOnce"})
	w.RegisterActivityWithOptions(func(ctx context.Context, taskID string) error {
		info := activity.GetInfo(ctx)
		a := attempts[taskID[len(queue)+1:]]
		s := store.AttemptStart{TaskID: taskID, AttemptID: activities.AttemptID(info.WorkflowExecution.RunID, info.ActivityID, 1),
			AttemptToken: info.TaskToken, HostID: a.host, Turn: 1, Prompt: "p", PromptUUID: uuid.NewString()}
		if _, err := store.BeginAttempt(ctx, db, s); err != nil {
			return err
		}
		if a.record != nil {
			if err := a.record(ctx, db, s); err != nil {
				return err
			}
		}
		if a.longAgo {
			if _, err := db.Exec(ctx, `UPDATE executors_running SET updated_at = now() - interval '1 hour' WHERE task_id = $1`, taskID); err != nil {
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
	for name := range attempts {
		id := queue + "/" + name
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "leaveOnce", id)
		if err != nil {
			t.Fatal(err)
		}
		runs[name] = run
	}
	for name, a := range attempts {
		for {
			x, err := store.GetExecutor(ctx, db, queue+"/"+name)
			if err == nil && x.Status == a.recorded && (!a.longAgo || time.Since(x.UpdatedAt) > time.Hour/2) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: the attempt never recorded itself", name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return runs
}

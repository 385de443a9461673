package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// reapLeftovers kills every process that CLIs of an earlier run of this host started and that
// still runs: the CLI dies with its worker, but the commands its tools run live in sessions of
// their own and would otherwise run on beside the retried attempt. They are found by the tag
// every process of a CLI's tree inherits (claudecode.TagEnv), which names the host.
func reapLeftovers(hostID string, log *slog.Logger) {
	if n := claudecode.KillTaggedUnder(hostID); n > 0 {
		log.Warn("killed processes left by an earlier run of this host", "processes", n)
	}
}

// committedWindow is how recently an attempt must have committed its turn for a restarting
// host to report it (see failLostAttempts). An attempt whose worker died stays open in Temporal
// only until its heartbeat timeout, seconds after the death, and the death of a worker that
// had not answered yet follows its commit closely: the window only spares a host that served
// many tasks one report per task at every start.
const committedWindow = 15 * time.Minute

// failLostAttempts reports as failed (WorkerLost, retryable) the attempts that an earlier run
// of this host may have left open in Temporal when it died, so that Temporal retries them now
// instead of after a heartbeat timeout:
//
//   - the attempts it was running (executor row starting or running), whose end it also
//     records on the row;
//   - the attempts that committed their turn shortly before (row idle), whose answer may not
//     have reached Temporal: their retry finds the turn committed and answers from its record.
//     The row is left as it is.
//
// An attempt Temporal has moved past (answered, timed out, retried elsewhere) refuses the
// report, which is fine.
func failLostAttempts(ctx context.Context, db store.TxDB, c client.Client, hostID string, log *slog.Logger) error {
	rows, err := store.ListHostExecutors(ctx, db, hostID)
	if err != nil {
		return fmt.Errorf("listing this host's executors: %w", err)
	}
	const msg = "the worker running this attempt died; its host restarted"
	for _, x := range rows {
		switch {
		case x.Status.Live():
			reportLost(ctx, c, x, msg, log)
			err := store.EndAttempt(ctx, db, store.AttemptEnd{TaskID: x.TaskID, AttemptID: x.AttemptID,
				Status: store.ExecutorFailed, Error: task.ErrTypeWorkerLost + ": " + msg})
			if err != nil && !errors.Is(err, store.ErrStaleAttempt) {
				log.Warn("recording a lost attempt", "task_id", x.TaskID, "error", err)
			}
		case x.Status == store.ExecutorIdle && time.Since(x.UpdatedAt) < committedWindow:
			reportLost(ctx, c, x, msg, log)
		}
	}
	return nil
}

// reportLost fails the attempt that owns x in Temporal, through its task token.
func reportLost(ctx context.Context, c client.Client, x store.Executor, msg string, log *slog.Logger) {
	if len(x.AttemptToken) == 0 {
		return
	}
	lost := temporal.NewApplicationError(msg, task.ErrTypeWorkerLost)
	err := c.CompleteActivity(ctx, x.AttemptToken, nil, lost)
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		log.Warn("reported a lost attempt as failed", "task_id", x.TaskID, "attempt_id", x.AttemptID, "executor", x.Status)
	case errors.As(err, &nf):
		log.Debug("a lost attempt was already over", "task_id", x.TaskID, "attempt_id", x.AttemptID)
	default:
		log.Warn("reporting a lost attempt", "task_id", x.TaskID, "attempt_id", x.AttemptID, "error", err)
	}
}

package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

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

// failLostAttempts reports as failed (WorkerLost, retryable) the attempts that an earlier run
// of this host was running when it died, so that Temporal retries them now instead of after a
// heartbeat timeout, and records their end on the executor row. An attempt Temporal has moved
// past (timed out, retried elsewhere) refuses the report, which is fine.
func failLostAttempts(ctx context.Context, db store.TxDB, c client.Client, hostID string, log *slog.Logger) error {
	rows, err := store.ListHostExecutors(ctx, db, hostID)
	if err != nil {
		return fmt.Errorf("listing this host's executors: %w", err)
	}
	for _, x := range rows {
		if !x.Status.Live() {
			continue
		}
		msg := "the worker running this attempt died; its host restarted"
		if len(x.AttemptToken) > 0 {
			lost := temporal.NewApplicationError(msg, task.ErrTypeWorkerLost)
			err := c.CompleteActivity(ctx, x.AttemptToken, nil, lost)
			var nf *serviceerror.NotFound
			switch {
			case err == nil:
				log.Warn("reported a lost attempt as failed", "task_id", x.TaskID, "attempt_id", x.AttemptID)
			case errors.As(err, &nf):
				log.Info("a lost attempt was already over", "task_id", x.TaskID, "attempt_id", x.AttemptID)
			default:
				log.Warn("reporting a lost attempt", "task_id", x.TaskID, "attempt_id", x.AttemptID, "error", err)
			}
		}
		err := store.EndAttempt(ctx, db, store.AttemptEnd{TaskID: x.TaskID, AttemptID: x.AttemptID,
			Status: store.ExecutorFailed, Error: task.ErrTypeWorkerLost + ": " + msg})
		if err != nil && !errors.Is(err, store.ErrStaleAttempt) {
			log.Warn("recording a lost attempt", "task_id", x.TaskID, "error", err)
		}
	}
	return nil
}

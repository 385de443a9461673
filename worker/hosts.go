package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/activities"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// Host liveness: every host beats in Postgres (the hosts table) every HostBeat; a host whose
// beat is older than HostStale is gone, and any live host reports the attempts it was running
// as failed (HostLost) so that their workflows give the turns to a live host at once. These are
// the defaults of Config.HostBeat and Config.HostStale.
const (
	DefaultHostBeat  = 2 * time.Second
	DefaultHostStale = 10 * time.Second
	// DefaultDrainTimeout is Config.DrainTimeout when it is zero.
	DefaultDrainTimeout = time.Minute
)

// lostCommittedWindow is how recently a lost host's attempt must have committed for it to be
// reported too: its answer may not have reached Temporal, and Temporal keeps such an attempt
// open only until its heartbeat timeout.
const lostCommittedWindow = 2 * time.Minute

// lostBatch bounds the executor rows one look claims from lost hosts.
const lostBatch = 100

// hostLoop beats for this host and hands on the tasks of lost hosts, every interval, until ctx
// ends. A failed beat or look is logged and tried again at the next tick.
type hostLoop struct {
	db       store.TxDB
	temporal client.Client
	hostID   string
	interval time.Duration
	stale    time.Duration
	draining func() bool
	log      *slog.Logger
}

func (h *hostLoop) run(ctx context.Context) {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		if err := store.BeatHost(ctx, h.db, h.hostID, os.Getpid(), h.draining()); err != nil && ctx.Err() == nil {
			h.log.Warn("recording this host alive", "error", err)
		}
		if !h.draining() {
			h.handOn(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// handOn claims the executor rows of hosts whose beat is stale and, for each, tells Temporal
// and the task's workflow that the host is lost, so that the task's running turn, or its next,
// goes to a live host at once. A row it cannot hand on goes back to be tried again.
func (h *hostLoop) handOn(ctx context.Context) {
	for {
		rows, err := store.ClaimLostExecutors(ctx, h.db, h.hostID, h.stale, lostBatch)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("looking for the tasks of lost hosts", "error", err)
			}
			return
		}
		for _, x := range rows {
			if err := h.handOnOne(ctx, x); err != nil {
				h.log.Warn("handing on a task of a lost host; will try again", "task_id", x.TaskID, "lost_host", x.HostID, "error", err)
				if err := store.ReturnExecutor(context.WithoutCancel(ctx), h.db, x); err != nil {
					h.log.Warn("giving a lost host's task back for a later look", "task_id", x.TaskID, "error", err)
				}
			}
		}
		if len(rows) < lostBatch {
			return
		}
	}
}

const hostLostMsg = "the host running this attempt stopped beating: it is lost; the turn moves to a live host"

// handOnOne hands on one task of a lost host:
//
//   - an attempt still open (starting or running, or committed lately, whose answer may not have
//     reached Temporal) is failed as HostLost through its task token, which the workflow answers
//     by giving the turn to another host;
//   - the workflow is told the host is lost (SignalHostLost): this moves a turn whose retry
//     waits on the lost host's queue, where Temporal refuses to fail an attempt that has not
//     started, and keeps the task's next turn off that host;
//   - a live attempt's end is recorded on the executor row.
func (h *hostLoop) handOnOne(ctx context.Context, x store.LostExecutor) error {
	_, _, attempt, _ := activities.ParseAttemptID(x.AttemptID)
	open := x.Status.Live() || (x.Status == store.ExecutorIdle && time.Since(x.UpdatedAt) < lostCommittedWindow)
	if open && len(x.AttemptToken) > 0 {
		lost := temporal.NewApplicationErrorWithOptions(hostLostMsg, task.ErrTypeHostLost, temporal.ApplicationErrorOptions{
			NonRetryable: true,
			Details:      []any{task.ReassignDetails{Attempt: attempt}},
		})
		err := h.temporal.CompleteActivity(ctx, x.AttemptToken, nil, lost)
		var nf *serviceerror.NotFound
		switch {
		case err == nil:
			h.log.Warn("reported an attempt of a lost host as failed", "task_id", x.TaskID, "attempt_id", x.AttemptID,
				"lost_host", x.HostID, "executor", x.Status)
		case errors.As(err, &nf):
			// Temporal moved past that attempt; the signal below moves what followed.
		default:
			return fmt.Errorf("reporting the attempt: %w", err)
		}
	}
	notice := task.HostLost{HostQueue: task.HostQueue(x.HostID), Attempt: attempt, Turn: x.Turn}
	err := h.temporal.SignalWorkflow(ctx, x.TaskID, "", task.SignalHostLost, notice)
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) { // a task that ended has nothing to move
		return fmt.Errorf("telling the task: %w", err)
	}
	if x.Status.Live() {
		err := store.EndAttempt(ctx, h.db, store.AttemptEnd{TaskID: x.TaskID, AttemptID: x.AttemptID,
			Status: store.ExecutorFailed, Error: task.ErrTypeHostLost + ": " + hostLostMsg})
		if err != nil && !errors.Is(err, store.ErrStaleAttempt) {
			h.log.Warn("recording an attempt of a lost host", "task_id", x.TaskID, "error", err)
		}
	}
	return nil
}

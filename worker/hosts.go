package worker

import (
	"context"
	"errors"
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

// hostLoop beats for this host and reports the attempts of lost hosts, every interval, until
// ctx ends. A failed beat or look is logged and tried again at the next tick.
type hostLoop struct {
	db        store.TxDB
	temporal  client.Client
	namespace string
	hostID    string
	interval  time.Duration
	stale     time.Duration
	draining  func() bool
	log       *slog.Logger
	// reported remembers the idle attempts already reported, which stay listed for a while.
	reported map[string]bool
}

func (h *hostLoop) run(ctx context.Context) {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		if err := store.BeatHost(ctx, h.db, h.hostID, os.Getpid(), h.draining()); err != nil && ctx.Err() == nil {
			h.log.Warn("recording this host alive", "error", err)
		}
		h.reportLost(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reportLost fails, in Temporal, the attempts of hosts whose beat is stale, and records their
// end on the executor row.
func (h *hostLoop) reportLost(ctx context.Context) {
	rows, err := store.LostAttempts(ctx, h.db, h.hostID, h.stale, lostCommittedWindow)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("looking for attempts of lost hosts", "error", err)
		}
		return
	}
	listed := make(map[string]bool, len(rows))
	for _, x := range rows {
		listed[x.AttemptID] = true
		if h.reported[x.AttemptID] {
			continue
		}
		const msg = "the host running this attempt stopped beating: it is lost; the turn moves to a live host"
		if reportHostLost(ctx, h.temporal, h.namespace, x, msg, h.log) {
			h.reported[x.AttemptID] = true
		}
		if x.Status.Live() {
			err := store.EndAttempt(ctx, h.db, store.AttemptEnd{TaskID: x.TaskID, AttemptID: x.AttemptID,
				Status: store.ExecutorFailed, Error: task.ErrTypeHostLost + ": " + msg})
			if err != nil && !errors.Is(err, store.ErrStaleAttempt) {
				h.log.Warn("recording an attempt of a lost host", "task_id", x.TaskID, "error", err)
			}
		}
	}
	for id := range h.reported {
		if !listed[id] {
			delete(h.reported, id)
		}
	}
}

// reportHostLost fails the attempt that owns x in Temporal as HostLost, which the workflow
// answers by giving the turn to another host. When Temporal has moved past that attempt (its
// heartbeat timed out first, and its retry waits on the lost host's queue, where nobody polls),
// a live row's activity is failed by its id instead, retry included. It reports whether
// Temporal is done with the attempt (reported now, or closed before).
func reportHostLost(ctx context.Context, c client.Client, namespace string, x store.Executor, msg string, log *slog.Logger) bool {
	runID, activityID, attempt, parsed := activities.ParseAttemptID(x.AttemptID)
	lost := temporal.NewApplicationErrorWithOptions(msg, task.ErrTypeHostLost, temporal.ApplicationErrorOptions{
		NonRetryable: true,
		Details:      []any{task.ReassignDetails{Attempt: attempt}},
	})
	var err error
	if len(x.AttemptToken) > 0 {
		err = c.CompleteActivity(ctx, x.AttemptToken, nil, lost)
	}
	var nf *serviceerror.NotFound
	if (len(x.AttemptToken) == 0 || errors.As(err, &nf)) && x.Status.Live() && parsed {
		err = c.CompleteActivityByID(ctx, namespace, x.TaskID, runID, activityID, nil, lost)
	}
	switch {
	case err == nil:
		log.Warn("reported an attempt of a lost host as failed", "task_id", x.TaskID, "attempt_id", x.AttemptID,
			"lost_host", x.HostID, "executor", x.Status)
		return true
	case errors.As(err, &nf):
		return true
	default:
		log.Warn("reporting an attempt of a lost host", "task_id", x.TaskID, "attempt_id", x.AttemptID, "error", err)
		return false
	}
}

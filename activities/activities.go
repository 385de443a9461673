package activities

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/task"
)

// Activities are drover's Temporal activities: a thin layer over the turn engine that turns
// Temporal's attempt, heartbeat and cancellation into the engine's terms, and the engine's
// errors into typed application errors. Register it on two workers: the shared queue
// (AssignHost) and this host's queue (the rest).
type Activities struct {
	engine    *engine.Engine
	log       *slog.Logger
	hostStale time.Duration
}

// New returns the activities of a host whose turns eng runs. hostStale is how old a host's
// last beat may be for it to count as alive (the worker's setting); zero counts no host alive.
// logger nil means silent.
func New(eng *engine.Engine, logger *slog.Logger, hostStale time.Duration) *Activities {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Activities{engine: eng, log: logger, hostStale: hostStale}
}

// HostQueue is the task queue of this host.
func (a *Activities) HostQueue() string { return task.HostQueue(a.engine.HostID()) }

// RegisterShared registers what runs on the shared queue.
func (a *Activities) RegisterShared(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(a.AssignHost, activity.RegisterOptions{Name: task.ActivityAssignHost})
	w.RegisterActivityWithOptions(a.HostTakesWork, activity.RegisterOptions{Name: task.ActivityHostTakesWork})
	w.RegisterActivityWithOptions(a.DeliverDecision, activity.RegisterOptions{Name: task.ActivityDeliverDecision})
	w.RegisterActivityWithOptions(a.RecordDeadline, activity.RegisterOptions{Name: task.ActivityRecordDeadline})
	w.RegisterActivityWithOptions(a.RecordState, activity.RegisterOptions{Name: task.ActivityRecordState})
	w.RegisterActivityWithOptions(a.Rewind, activity.RegisterOptions{Name: task.ActivityRewind})
}

// RegisterHost registers what runs on this host's own queue.
func (a *Activities) RegisterHost(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(a.RunTurn, activity.RegisterOptions{Name: task.ActivityRunTurn})
	// Tasks whose workflows ran an earlier drover sent their control calls here.
	a.RegisterControl(w)
}

// WarmQueue is this host's queue of the turns of tasks whose previous turn it ran
// (task.WarmQueue).
func (a *Activities) WarmQueue() string { return task.WarmQueue(a.HostQueue()) }

// RegisterWarm registers what runs on this host's warm queue.
func (a *Activities) RegisterWarm(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(a.RunTurn, activity.RegisterOptions{Name: task.ActivityRunTurn})
}

// ControlQueue is this host's queue of control calls (task.ControlQueue).
func (a *Activities) ControlQueue() string { return task.ControlQueue(a.HostQueue()) }

// RegisterControl registers what runs on this host's control queue.
func (a *Activities) RegisterControl(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(a.InterruptTurn, activity.RegisterOptions{Name: task.ActivityInterruptTurn})
	w.RegisterActivityWithOptions(a.StopExecutor, activity.RegisterOptions{Name: task.ActivityStopExecutor})
	w.RegisterActivityWithOptions(a.CancelTurn, activity.RegisterOptions{Name: task.ActivityCancelTurn})
}

// CancelTurn stops the task's running turn at once as cancelled (the task was cancelled). It
// is not an error when the turn is not running here any more.
func (a *Activities) CancelTurn(ctx context.Context, in task.InterruptTurnInput) error {
	if !a.engine.CancelTurn(in.TaskID, in.Turn) {
		a.log.Info("no turn to cancel", "task_id", in.TaskID, "turn", in.Turn)
	}
	return nil
}

// AssignHost answers with this host's queue: the task's turns will run here.
func (a *Activities) AssignHost(ctx context.Context) (string, error) {
	if a.engine.Draining() {
		// Retried: a live host answers the next attempt.
		return "", temporal.NewApplicationError("this host is draining; another host takes the task", task.ErrTypeWorkerStopping)
	}
	return a.HostQueue(), nil
}

// HostTakesWork answers whether the host of queue is alive (its beat is fresh) and not
// draining: a turn it has not started yet is waiting for a busy host, not lost with a dead one.
func (a *Activities) HostTakesWork(ctx context.Context, queue string) (bool, error) {
	host, ok := task.HostOfQueue(queue)
	if !ok {
		return false, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%q is not a host queue", queue), task.ErrTypeInvalidInput, nil)
	}
	if a.hostStale <= 0 {
		return false, nil
	}
	alive, err := a.engine.HostTakesWork(ctx, host, a.hostStale)
	if err != nil {
		return false, temporal.NewApplicationErrorWithCause(err.Error(), task.ErrTypeStoreUnavailable, err)
	}
	return alive, nil
}

// InterruptTurn asks the CLI serving the task to interrupt its running turn. The running
// RunTurn then ends with status interrupted. It is not an error when no turn runs: the
// interrupt may have raced with the turn's end, or arrive before the turn reaches its CLI (it is
// then applied as soon as the prompt is sent).
func (a *Activities) InterruptTurn(ctx context.Context, in task.InterruptTurnInput) error {
	if err := a.engine.InterruptBy(ctx, in.TaskID, in.Turn, in.By); err != nil {
		return toTemporal(engine.AsError(err, task.ErrTypeClaudeExited), task.ReassignDetails{})
	}
	return nil
}

// StopExecutor stops the task's CLI process on this host, if any.
func (a *Activities) StopExecutor(ctx context.Context, in task.InterruptTurnInput) error {
	a.engine.StopEndedTask(ctx, in.TaskID, in.Repo)
	return nil
}

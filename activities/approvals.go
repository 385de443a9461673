package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/task"
)

// Notifier tells a task's workflow about its permission requests, by signal: the engine's
// Notifier on a worker.
type Notifier struct {
	Temporal client.Client
}

// Asked signals that a permission request waits for a person.
func (n Notifier) Asked(ctx context.Context, taskID string, r task.PendingRequest) error {
	if err := n.Temporal.SignalWorkflow(ctx, taskID, "", task.SignalPermissionAsked, r); err != nil {
		return fmt.Errorf("signalling task %s about request %s: %w", taskID, r.RequestID, err)
	}
	return nil
}

// Closed signals that a permission request was withdrawn.
func (n Notifier) Closed(ctx context.Context, taskID string, c task.PermissionClosed) error {
	if err := n.Temporal.SignalWorkflow(ctx, taskID, "", task.SignalPermissionClosed, c); err != nil {
		return fmt.Errorf("signalling task %s about request %s: %w", taskID, c.RequestID, err)
	}
	return nil
}

var _ engine.Notifier = Notifier{}

// DeliverDecision records a decision the workflow took where the attempt that waits for it
// finds it (any worker may run it: it only writes to Postgres).
func (a *Activities) DeliverDecision(ctx context.Context, rec task.DecisionRecord) error {
	if err := a.engine.Deliver(ctx, rec); err != nil {
		return toTemporal(engine.AsError(err, task.ErrTypeStoreUnavailable), task.ReassignDetails{})
	}
	return nil
}

// RecordDeadline records a pending request's moved deadline in Postgres (any worker may run it).
func (a *Activities) RecordDeadline(ctx context.Context, m task.DeadlineMoved) error {
	if err := a.engine.RecordDeadline(ctx, m); err != nil {
		return toTemporal(engine.AsError(err, task.ErrTypeStoreUnavailable), task.ReassignDetails{})
	}
	return nil
}

// RecordState records a task's state where the read side reads it (any worker may run it).
func (a *Activities) RecordState(ctx context.Context, rec task.StateRecord) error {
	if err := a.engine.RecordState(ctx, rec); err != nil {
		return toTemporal(engine.AsError(err, task.ErrTypeStoreUnavailable), task.ReassignDetails{})
	}
	return nil
}

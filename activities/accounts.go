package activities

import (
	"context"
	"fmt"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/task"
)

// AccountReady signals a task that waits for its account that it may try again.
func (n Notifier) AccountReady(ctx context.Context, taskID string, r task.AccountReady) error {
	if err := n.Temporal.SignalWorkflow(ctx, taskID, "", task.SignalAccountReady, r); err != nil {
		return fmt.Errorf("telling task %s its account is ready: %w", taskID, err)
	}
	return nil
}

var _ engine.AccountNotifier = Notifier{}

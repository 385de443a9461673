package activities

import (
	"context"

	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/task"
)

// Rewind sets a managed task's committed point back to a turn's (see engine.Engine.Rewind).
func (a *Activities) Rewind(ctx context.Context, in task.RewindInput) (task.Rewound, error) {
	r, err := a.engine.Rewind(ctx, in)
	if err != nil {
		e := engine.AsError(err, task.ErrTypeInternal)
		return r, temporal.NewApplicationErrorWithOptions(e.Error(), e.Type,
			temporal.ApplicationErrorOptions{NonRetryable: e.Type == task.ErrTypeCannotRewind})
	}
	return r, nil
}

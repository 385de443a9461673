package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/task"
)

// How an activity's context ended decides what the engine makes of its turn: a cancellation the
// workflow asked for ends the turn, while an attempt Temporal gave up on (its heartbeat timed
// out, so the SDK's next heartbeat found it gone) leaves the turn to the next attempt.
func TestTurnContextNamesWhyTheActivityEnded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		cause    error
		wantType string // an engine.Error's type; "" for context.Canceled
	}{
		{"the workflow cancelled it", temporal.NewCanceledError(), ""},
		{"plain cancel", nil, ""},
		{"Temporal no longer knows the attempt", serviceerror.NewNotFound("activity not found"), task.ErrTypeAttemptTimedOut},
		{"the worker stops", sdkworker.ErrWorkerShutdown, task.ErrTypeWorkerStopping},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			parent, cancelParent := context.WithCancelCause(context.Background())
			tctx, done := turnContext(parent)
			defer done()
			cancelParent(tc.cause)
			<-tctx.Done()
			cause := context.Cause(tctx)
			var e *engine.Error
			switch {
			case tc.wantType == "" && (!errors.Is(cause, context.Canceled) || errors.As(cause, &e)):
				t.Fatalf("cause %v, want a plain cancellation", cause)
			case tc.wantType != "" && (!errors.As(cause, &e) || e.Type != tc.wantType):
				t.Fatalf("cause %v, want an engine error of type %s", cause, tc.wantType)
			}
		})
	}
	parent, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	tctx, done := turnContext(parent)
	defer done()
	<-tctx.Done()
	if cause := context.Cause(tctx); !errors.Is(cause, context.DeadlineExceeded) {
		t.Fatalf("deadline: cause %v", cause)
	}
}

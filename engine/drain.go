package engine

import (
	"context"
	"errors"
	"time"

	"github.com/drover-run/drover/task"
)

// errDraining is why an attempt on a draining host ends: the turn belongs on another host.
var errDraining = errors.New("this host is draining: the turn moves to another host")

// Drain makes the host give up turns: an attempt that starts from now on ends at once as
// WorkerStopping (the workflow gives its turn to another host), and the running ones may finish
// for up to timeout; those still running then are stopped as WorkerStopping, their CLIs with
// them, and resumed elsewhere from their committed point. Drain returns once no attempt runs
// here, or when ctx ends, with how many attempts it stopped.
func (e *Engine) Drain(ctx context.Context, timeout time.Duration) int {
	e.runningMu.Lock()
	e.draining.Store(true)
	e.runningMu.Unlock()
	e.cfg.Logger.Info("draining: no new turns; waiting for the running ones", "running", e.runningCount(), "timeout", timeout)
	if e.waitIdle(ctx, time.Now().Add(timeout)) {
		return 0
	}
	e.runningMu.Lock()
	stopped := len(e.running)
	for _, r := range e.running {
		r.cancel(&Error{Type: task.ErrTypeWorkerStopping, Err: errors.New("the turn outlived the host's drain timeout")})
	}
	e.runningMu.Unlock()
	e.cfg.Logger.Warn("drain timeout: stopped the turns still running", "turns", stopped)
	// Stopping a CLI is bounded (close stdin, SIGTERM, SIGKILL); the settle after it retries the
	// database for a while.
	e.waitIdle(ctx, time.Now().Add(4*e.cfg.StopTimeout+time.Minute))
	return stopped
}

// Draining reports whether Drain was called.
func (e *Engine) Draining() bool { return e.draining.Load() }

// waitIdle waits until no attempt runs, reporting whether that happened by deadline.
func (e *Engine) waitIdle(ctx context.Context, deadline time.Time) bool {
	for e.runningCount() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}

func (e *Engine) runningCount() int {
	e.runningMu.Lock()
	defer e.runningMu.Unlock()
	return len(e.running)
}

package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// idleTimerVersion marks the runs that keep one idle timer across their waits for work: a warm
// turn then starts and cancels no timer (each would cost the server a timer task, and its history
// two events). Runs from before started a timer at every wait.
const idleTimerVersion = "idle-timer-kept"

// idleTimerKept is the version of idleTimerVersion that keeps the timer.
const idleTimerKept workflow.Version = 1

// idleTimer is a run's idle timer. It is started when the task first waits for work and left
// running through the turns that follow; when it fires, a task that has been idle for the whole
// timeout closes, and one that worked meanwhile is given a new timer for the rest of its timeout,
// counted from the start of its current wait.
type idleTimer struct {
	timer workflow.Future // nil when none runs
}

// wait waits for ready, or for the task to have been idle for timeout since the wait began; it
// reports whether the timeout passed first.
func (t *idleTimer) wait(ctx workflow.Context, timeout time.Duration, ready func() bool) (idle bool, _ error) {
	since := workflow.Now(ctx)
	for {
		if t.timer == nil {
			t.timer = workflow.NewTimerWithOptions(ctx, since.Add(timeout).Sub(workflow.Now(ctx)),
				workflow.TimerOptions{Summary: "idle timeout"})
		}
		if err := workflow.Await(ctx, func() bool { return ready() || t.timer.IsReady() }); err != nil {
			return false, err
		}
		if ready() {
			return false, nil
		}
		t.timer = nil
		if workflow.Now(ctx).Sub(since) >= timeout {
			return true, nil
		}
	}
}

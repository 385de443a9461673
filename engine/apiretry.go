package engine

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/task"
)

// The CLI retries a 429 by itself, after the API's retry-after (plus up to a quarter more), and
// announces each retry with system/api_retry before it waits. drover does not let it wait: on
// the first 429 retry of a turn, the account is held until the delay announced (the earliest
// the API takes a request again) and the turn stops as a limit wait, not a failure, so that no
// turn of the account, this one included, sends a request before then, and one turn probes
// after it (see gate).
//
// Without more, the CLI neither retries nor reports a retry-after above 60 s: the turn ends with
// an API error that names no delay (docs/cli-behaviour.md). With an API key, drover runs the CLI
// with its retry watchdog on for capacity errors (watchdogEnv): the CLI then announces every
// 429's retry, whatever its retry-after, and drover stops the turn there as for any other. The
// watchdog also retries a 529 beyond the CLI's max_retries; drover ends the turn at the first
// such retry as the API error the CLI would have ended it with.

// The CLI's retry watchdog (read off the pinned binary; docs/cli-behaviour.md): on, and for
// capacity errors (429 and 529) only.
var watchdogEnv = []string{"CLAUDE_CODE_RETRY_WATCHDOG=1", "CLAUDE_CODE_RETRY_WATCHDOG_SCOPE=capacity"}

// retryStop is a retry the CLI announced that ends the running turn: a 429's (the account waits
// for delay) or a 529's beyond max_retries (the attempt fails as an overloaded API).
type retryStop struct {
	status  int
	delay   time.Duration
	attempt int
}

// noteRetry watches the events of a turn for a retry that ends it (retryStop) and hands it to
// the attempt (rateLimited), once per turn. Called with ex.mu held.
func (ex *executor) noteRetry(rl *events.RateLimit) {
	if rl == nil || rl.Source != events.RateLimitSourceAPIRetry || !ex.busy || ex.rateLimited == nil {
		return
	}
	switch {
	case rl.ErrorStatus == http.StatusTooManyRequests:
	case rl.ErrorStatus == statusOverloaded && rl.Attempt > rl.MaxRetries:
	default:
		return
	}
	select {
	case ex.rateLimited <- retryStop{status: rl.ErrorStatus, delay: time.Duration(rl.RetryDelayMS) * time.Millisecond, attempt: rl.Attempt}:
	default: // the attempt heard of an earlier retry
	}
}

// statusOverloaded is the API's status when it is overloaded.
const statusOverloaded = 529

// retryLimits is the running turn's channel of noteRetry.
func (ex *executor) retryLimits() <-chan retryStop {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.rateLimited
}

// stopForRetry ends a turn at a retry the CLI was about to wait out: the turn is interrupted
// before the CLI retries. A 429 ends the attempt as a wait for the account until the delay has
// passed; a 529 as a failed attempt of an overloaded API, retried after the delay. The
// interrupted turn's partial output is not committed: the turn runs again from its committed
// point.
func (a *attempt) stopForRetry(ctx context.Context, ex *executor, ended <-chan turnEnd, r retryStop) outcome {
	now := time.Now()
	if r.status == http.StatusTooManyRequests {
		if r.delay <= 0 {
			r.delay = a.e.cfg.RateLimitWait
		}
		a.log.Info("the API refused a request with 429; the account waits instead of the CLI", "retry_delay", r.delay)
	} else {
		a.log.Info("the API stays overloaded past the CLI's retries; the attempt fails", "attempt", r.attempt, "retry_delay", r.delay)
	}
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.e.cfg.StopTimeout)
	defer cancel()
	if err := ex.interrupt(ictx); err != nil {
		a.log.Debug("interrupting the turn at the CLI's retry", "error", err)
	}
	select {
	case <-ended:
	case <-ex.exited:
	case <-ictx.Done():
	}
	if r.status == http.StatusTooManyRequests {
		return failed(limitFailure(limitHit{reason: task.WaitRateLimit, resetsAt: now.Add(r.delay)}))
	}
	info := &events.ErrorInfo{Kind: events.ErrorAPI, APIErrorStatus: r.status, TerminalReason: "api_error",
		Message: fmt.Sprintf("API Error: %d overloaded: still overloaded after %d retries", r.status, r.attempt-1)}
	a.emit(events.AgentEvent{Type: events.TypeError, Error: info})
	return failed(turnFailure(info, r.delay))
}

package engine

import (
	"context"
	"net/http"
	"time"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/task"
)

// The CLI retries a 429 by itself, after the API's retry-after (plus up to a quarter more, at
// most 60 s), and announces each retry with system/api_retry before it waits. drover does not let
// it wait: on the first 429 retry of a turn, the account is held until the delay announced (the
// earliest the API takes a request again) and the turn stops as a limit wait, not a failure, so
// that no turn of the account, this one included, sends a request before then, and one turn
// probes after it (see gate).

// noteRetry watches the events of a turn for the CLI's first retry of a 429: it hands its delay
// to the attempt (rateLimited), once per turn. Called with ex.mu held.
func (ex *executor) noteRetry(rl *events.RateLimit) {
	if rl == nil || rl.Source != events.RateLimitSourceAPIRetry || rl.ErrorStatus != http.StatusTooManyRequests ||
		!ex.busy || ex.rateLimited == nil {
		return
	}
	select {
	case ex.rateLimited <- time.Duration(rl.RetryDelayMS) * time.Millisecond:
	default: // the attempt heard of an earlier retry
	}
}

// retryLimits is the running turn's channel of noteRetry.
func (ex *executor) retryLimits() <-chan time.Duration {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.rateLimited
}

// stopForLimit ends a turn whose request the API refused with a 429 that the CLI was about to
// wait out (delay): the turn is interrupted before the CLI retries, and the attempt ends as a
// wait for the account until the delay has passed. The interrupted turn's partial output is not
// committed: the turn runs again from its committed point.
func (a *attempt) stopForLimit(ctx context.Context, ex *executor, ended <-chan turnEnd, delay time.Duration) outcome {
	now := time.Now()
	if delay <= 0 {
		delay = a.e.cfg.RateLimitWait
	}
	a.log.Info("the API refused a request with 429; the account waits instead of the CLI", "retry_delay", delay)
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.e.cfg.StopTimeout)
	defer cancel()
	if err := ex.interrupt(ictx); err != nil {
		a.log.Debug("interrupting the rate-limited turn", "error", err)
	}
	select {
	case <-ended:
	case <-ex.exited:
	case <-ictx.Done():
	}
	return failed(limitFailure(limitHit{reason: task.WaitRateLimit, resetsAt: now.Add(delay)}))
}

package engine

import (
	"fmt"
	"net/http"
	"time"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/task"
)

// The CLI's names for the API errors that mean an account limit (docs/cli-behaviour.md,
// "Limits, retries and budgets"). Limits are told apart by these names, the HTTP status and the
// rate_limit_event's fields, never by the text of a message.
const (
	// apiErrorUsageLimit is the result's api_error of a subscription's 429 with a rejected
	// usage window (or its extra usage refused).
	apiErrorUsageLimit = "usage_limit_reached"
	// apiErrorCodeSpendLimit is the result's api_error_code of an API key's monthly spend cap.
	apiErrorCodeSpendLimit = "enforced_spend_limit_reached"
	// limitTypeOverage is the rateLimitType of a subscription's extra usage, refused at the
	// organization's spend cap.
	limitTypeOverage = "overage"
)

// limitHit is an account limit a turn met.
type limitHit struct {
	reason    task.WaitReason
	limitType string
	// resetsAt is the announced reset; zero when none was announced (a spend cap).
	resetsAt time.Time
}

// classifyLimit says whether a turn that ended with API error info met its account's limit,
// from the result's status and error names, the turn's last rejected rate_limit_event (ev) and
// the last retry delay the CLI announced (retryAfter):
//
//   - a subscription's spend cap (rejected extra usage, rateLimitType overage) or an API key's
//     (api_error_code enforced_spend_limit_reached): spend_cap, until an operator resumes;
//   - a usage limit (api_error usage_limit_reached): usage_limit until the resetsAt of the
//     process's last rejected rate_limit_event;
//   - any other 429 the CLI's retries did not cure: rate_limit, for the last retry delay
//     announced, or rateLimitWait when none was.
//
// A 529 (overloaded) and every other status are not limits: the turn is retried as before.
func classifyLimit(info *events.ErrorInfo, ev *events.RateLimit, retryAfter, rateLimitWait time.Duration, now time.Time) (limitHit, bool) {
	if info == nil || info.Kind != events.ErrorAPI {
		return limitHit{}, false
	}
	if info.APIErrorCode == apiErrorCodeSpendLimit {
		return limitHit{reason: task.WaitSpendCap}, true
	}
	if info.APIErrorStatus != http.StatusTooManyRequests {
		return limitHit{}, false
	}
	if info.APIError == apiErrorUsageLimit {
		h := limitHit{reason: task.WaitUsageLimit}
		if ev != nil {
			h.limitType = ev.RateLimitType
			if ev.ResetsAt > 0 {
				h.resetsAt = time.Unix(ev.ResetsAt, 0).UTC()
			}
		}
		if h.limitType == limitTypeOverage {
			return limitHit{reason: task.WaitSpendCap, limitType: h.limitType}, true
		}
		if h.resetsAt.IsZero() {
			h.resetsAt = now.Add(rateLimitWait)
		}
		return h, true
	}
	wait := retryAfter
	if wait <= 0 {
		wait = rateLimitWait
	}
	return limitHit{reason: task.WaitRateLimit, resetsAt: now.Add(wait)}, true
}

// limitFailure is the failure of an attempt whose turn met its account's limit.
func limitFailure(h limitHit) *Error {
	w := &task.Wait{Reason: h.reason, LimitType: h.limitType, ResetsAt: h.resetsAt}
	switch h.reason {
	case task.WaitSpendCap:
		return &Error{Type: task.ErrTypeSpendCapReached, Wait: w,
			Err: fmt.Errorf("the account's spend cap is reached; the turn waits until an operator raises it and runs `drover account resume`")}
	default:
		return &Error{Type: task.ErrTypeAccountLimited, Wait: w,
			Err: fmt.Errorf("the account's %s is reached (%s); the turn waits until %s", h.reason, orUnknown(h.limitType), h.resetsAt.Format(time.RFC3339))}
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "no window named"
	}
	return s
}

package offlinemodel

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// LimitKind is why an account limit refuses a request.
type LimitKind string

// The kinds of account limits.
const (
	// LimitUsage is a usage limit: the account used up a window and is
	// refused until the window resets. An OAuth account is answered as a
	// claude.ai subscription is: 429 with anthropic-ratelimit-unified-status
	// "rejected", the reset and the window (representative claim). An API-key
	// account gets a 429 with retry-after (seconds to the reset) and
	// anthropic-ratelimit-* headers with nothing remaining.
	LimitUsage LimitKind = "usage_limit"
	// LimitSpendCap is a spend cap: the account may not spend more until
	// someone raises the cap (the test lifts it). See SpendCap for the
	// answers of API-key accounts; an OAuth account is answered 429 with
	// unified status "rejected", representative claim "overage",
	// overage-status "rejected" and an overage-disabled-reason.
	LimitSpendCap LimitKind = "spend_cap"
	// LimitOverload answers 529 overloaded_error to every request of the
	// account.
	LimitOverload LimitKind = "overloaded"
)

// The usage windows of claude.ai subscriptions, as the
// anthropic-ratelimit-unified-representative-claim header names them. The
// pinned CLI also knows seven_day_opus, seven_day_sonnet,
// seven_day_overage_included and overage.
const (
	WindowFiveHour = "five_hour"
	WindowSevenDay = "seven_day"
)

// windowHeader is the header infix of a window's own headers
// (anthropic-ratelimit-unified-5h-utilization, …).
func windowHeader(window string) string {
	switch window {
	case WindowFiveHour:
		return "5h"
	case WindowSevenDay:
		return "7d"
	case "seven_day_overage_included":
		return "7d_oi"
	}
	return window
}

// SpendCap is how the API tells an API-key account that it may not spend
// more. What the pinned CLI makes of each is in the package documentation.
type SpendCap string

// The spend caps of API-key accounts.
const (
	// SpendCapEnforced: the organization reached the monthly spend cap of its
	// usage tier. 429 rate_limit_error with error.details.error_code
	// "enforced_spend_limit_reached" and no retry-after.
	SpendCapEnforced SpendCap = "enforced_spend_limit_reached"
	// SpendCapConsole: a spend limit set in the Console for the organization
	// or a workspace. 400 invalid_request_error "You have reached your
	// specified API usage limits. You will regain access on <date> at 00:00
	// UTC."
	SpendCapConsole SpendCap = "console_spend_limit"
	// SpendCapCredits: the prepaid credit balance is spent. 400
	// invalid_request_error "Your credit balance is too low to access the
	// Anthropic API. …"
	SpendCapCredits SpendCap = "credit_balance"
)

// AccountLimit is a limit that refuses every Messages request of one account
// (main, subagent, compaction and auxiliary alike; count_tokens is not
// limited) until it lifts. A refused request consumes nothing scripted and
// bills nothing. Build one with UsageLimit, SpendCapLimit or OverloadLimit.
type AccountLimit struct {
	Kind LimitKind
	// Window is the subscription window that ran out (usage limits of OAuth
	// accounts): WindowFiveHour or WindowSevenDay. Empty means five hours.
	Window string
	// Reset is the announced reset. A usage limit or an overload lifts by
	// itself at Reset unless HoldPastReset; a spend cap only announces it
	// (zero: 00:00 UTC on the first day of the month after SetLimit). An
	// overload with a zero Reset lasts until lifted; a usage limit needs one.
	Reset time.Time
	// HoldPastReset keeps the limit after its announced reset until the test
	// lifts it (LiftLimit) or sets another (SetLimit): limits can outlast
	// their announced reset. Answers then keep announcing the past reset (an
	// API-key account is told retry-after: 1).
	HoldPastReset bool
	// SpendCap is the answer of a spend cap to an API-key account. Empty
	// means SpendCapEnforced.
	SpendCap SpendCap
	// OverageReason is sent as anthropic-ratelimit-unified-overage-disabled-
	// reason to an OAuth account, with overage-status "rejected": for a
	// spend cap (empty: "org_spend_cap_reached"), and for a usage limit when
	// set (for example "out_of_credits").
	OverageReason string
	// RetryAfter, when positive, is sent as retry-after with an overload.
	RetryAfter time.Duration
}

// UsageLimit returns a usage limit of window (WindowFiveHour or
// WindowSevenDay) that lifts at reset.
func UsageLimit(window string, reset time.Time) AccountLimit {
	return AccountLimit{Kind: LimitUsage, Window: window, Reset: reset}
}

// SpendCapLimit returns a spend cap, answered to an API-key account as kind
// says, that lasts until lifted.
func SpendCapLimit(kind SpendCap) AccountLimit {
	return AccountLimit{Kind: LimitSpendCap, SpendCap: kind}
}

// OverloadLimit returns an overload that lasts until until (zero: until
// lifted).
func OverloadLimit(until time.Time) AccountLimit {
	return AccountLimit{Kind: LimitOverload, Reset: until}
}

// HeldPastReset returns l kept past its announced reset until lifted.
func (l AccountLimit) HeldPastReset() AccountLimit {
	l.HoldPastReset = true
	return l
}

// WithOverage returns l with an overage-disabled-reason for OAuth accounts.
func (l AccountLimit) WithOverage(reason string) AccountLimit {
	l.OverageReason = reason
	return l
}

// WithRetryAfter returns l with a retry-after for its overload answers.
func (l AccountLimit) WithRetryAfter(d time.Duration) AccountLimit {
	l.RetryAfter = d
	return l
}

func (l AccountLimit) validate() error {
	switch l.Kind {
	case LimitUsage:
		if l.Reset.IsZero() {
			return fmt.Errorf("usage limit without a reset")
		}
		switch l.Window {
		case "", WindowFiveHour, WindowSevenDay:
		default:
			return fmt.Errorf("usage limit of unknown window %q", l.Window)
		}
	case LimitSpendCap:
		switch l.SpendCap {
		case "", SpendCapEnforced, SpendCapConsole, SpendCapCredits:
		default:
			return fmt.Errorf("unknown spend cap %q", l.SpendCap)
		}
	case LimitOverload:
	default:
		return fmt.Errorf("unknown limit kind %q", l.Kind)
	}
	return nil
}

// lifted reports whether the limit has lifted by itself at now.
func (l AccountLimit) lifted(now time.Time) bool {
	if l.HoldPastReset || l.Kind == LimitSpendCap || l.Reset.IsZero() {
		return false
	}
	return !now.Before(l.Reset)
}

// nextMonth returns 00:00 UTC on the first day of the month after now.
func nextMonth(now time.Time) time.Time {
	y, m, _ := now.UTC().Date()
	return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}

// Quota is the usage state an OAuth account's answers report in
// anthropic-ratelimit-unified-* headers while no limit refuses them. API-key
// accounts never get these headers (see Config.RateLimit for theirs).
type Quota struct {
	// Status is anthropic-ratelimit-unified-status: "allowed" (default) or
	// "allowed_warning". The pinned CLI reads "allowed_warning" as
	// "allowed": it warns because of SurpassedThreshold or utilization.
	Status string
	// FiveHour and SevenDay are the windows; one with a zero Reset is left
	// out.
	FiveHour QuotaWindow
	SevenDay QuotaWindow
	// Claim is anthropic-ratelimit-unified-representative-claim, the window
	// that binds. Empty means the window with the higher utilization, five
	// hours on a tie.
	Claim string
	// OverageStatus, when set, is sent as overage-status ("allowed",
	// "allowed_warning" or "rejected").
	OverageStatus string
}

// QuotaWindow is one subscription window.
type QuotaWindow struct {
	// Utilization is the fraction of the window used, 0 to 1.
	Utilization float64
	// Reset is when the window resets.
	Reset time.Time
	// SurpassedThreshold, when positive, is sent as
	// <window>-surpassed-threshold: the pinned CLI then reports
	// allowed_warning for this window.
	SurpassedThreshold float64
}

// WarningQuota returns a quota whose window (WindowFiveHour or
// WindowSevenDay) is used to utilization, past threshold, resetting at
// reset: the pinned CLI reports it as a rate_limit_event with status
// allowed_warning.
func WarningQuota(window string, utilization, threshold float64, reset time.Time) Quota {
	w := QuotaWindow{Utilization: utilization, Reset: reset, SurpassedThreshold: threshold}
	q := Quota{Status: "allowed_warning", Claim: window}
	if window == WindowSevenDay {
		q.SevenDay = w
	} else {
		q.FiveHour = w
	}
	return q
}

// claim returns the representative claim of q.
func (q Quota) claim() string {
	if q.Claim != "" {
		return q.Claim
	}
	if !q.SevenDay.Reset.IsZero() && (q.FiveHour.Reset.IsZero() || q.SevenDay.Utilization > q.FiveHour.Utilization) {
		return WindowSevenDay
	}
	return WindowFiveHour
}

func (q Quota) window(name string) QuotaWindow {
	if name == WindowSevenDay {
		return q.SevenDay
	}
	return q.FiveHour
}

// unifiedPrefix starts every header of claude.ai subscription limits.
const unifiedPrefix = "Anthropic-Ratelimit-Unified-"

// setHeaders writes q as anthropic-ratelimit-unified-* headers.
func (q Quota) setHeaders(h http.Header) {
	h.Set(unifiedPrefix+"Status", cmp.Or(q.Status, "allowed"))
	claim := q.claim()
	if r := q.window(claim).Reset; !r.IsZero() {
		h.Set(unifiedPrefix+"Reset", unixSeconds(r))
	}
	h.Set(unifiedPrefix+"Representative-Claim", claim)
	for _, w := range []struct {
		name string
		win  QuotaWindow
	}{{WindowFiveHour, q.FiveHour}, {WindowSevenDay, q.SevenDay}} {
		setWindowHeaders(h, w.name, w.win)
	}
	if q.OverageStatus != "" {
		h.Set(unifiedPrefix+"Overage-Status", q.OverageStatus)
	}
}

func setWindowHeaders(h http.Header, name string, w QuotaWindow) {
	if w.Reset.IsZero() {
		return
	}
	p := unifiedPrefix + windowHeader(name) + "-"
	h.Set(p+"Utilization", strconv.FormatFloat(w.Utilization, 'f', -1, 64))
	h.Set(p+"Reset", unixSeconds(w.Reset))
	if w.SurpassedThreshold > 0 {
		h.Set(p+"Surpassed-Threshold", strconv.FormatFloat(w.SurpassedThreshold, 'f', -1, 64))
	}
}

func unixSeconds(t time.Time) string {
	return strconv.FormatInt(t.Unix(), 10)
}

// SetLimit limits account a until the limit lifts (see AccountLimit),
// replacing any limit it had. It panics on an invalid limit (a usage limit
// without a reset, an unknown kind, window or spend cap): that is a bug in
// the test.
func (s *Server) SetLimit(a Account, l AccountLimit) {
	if err := l.validate(); err != nil {
		panic("offlinemodel: SetLimit: " + err.Error())
	}
	if l.Kind == LimitSpendCap && l.Reset.IsZero() {
		l.Reset = nextMonth(s.now())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits[a] = l
}

// LiftLimit lifts account a's limit, if any.
func (s *Server) LiftLimit(a Account) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.limits, a)
}

// Limit returns account a's limit if it still holds.
func (s *Server) Limit(a Account) (AccountLimit, bool) {
	return s.activeLimit(a, s.now())
}

// activeLimit returns account a's limit if it still holds at now, and
// forgets one that lifted by itself.
func (s *Server) activeLimit(a Account, now time.Time) (AccountLimit, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.limits[a]
	if !ok {
		return AccountLimit{}, false
	}
	if l.lifted(now) {
		delete(s.limits, a)
		return AccountLimit{}, false
	}
	return l, true
}

// SetQuota makes the answers to OAuth account a report q (see Quota).
func (s *Server) SetQuota(a Account, q Quota) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quotas[a] = q
}

// ClearQuota stops the quota headers of account a.
func (s *Server) ClearQuota(a Account) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.quotas, a)
}

// quota returns the quota of an OAuth account, if set.
func (s *Server) quota(a Account) (Quota, bool) {
	if !a.OAuth() {
		return Quota{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.quotas[a]
	return q, ok
}

// limitAnswer is what a limit answers: status, error body and headers.
type limitAnswer struct {
	status  int
	body    apiError
	header  http.Header
	reset   time.Time // announced, zero for none
	retryIn time.Duration
}

// answerFor builds the answer of limit l to a request of account a at now.
func (s *Server) answerFor(a Account, l AccountLimit, now time.Time, reqID string) limitAnswer {
	reset := l.Reset
	ans := limitAnswer{header: http.Header{}, reset: reset}
	switch l.Kind {
	case LimitOverload:
		ans.status = 529
		ans.body = newAPIError(529, "overloaded_error", "", reqID)
		ans.retryIn = l.RetryAfter
		ans.reset = time.Time{} // an overload announces no reset
	case LimitUsage:
		ans.status = http.StatusTooManyRequests
		if a.OAuth() {
			ans.body = newAPIError(ans.status, "rate_limit_error", "This request would exceed your account's rate limit. Please try again later.", reqID)
			s.setRejectedHeaders(ans.header, a, cmp.Or(l.Window, WindowFiveHour), reset, l.OverageReason, time.Time{})
			break
		}
		ans.body = newAPIError(ans.status, "rate_limit_error", "", reqID)
		ans.retryIn = max(time.Second, reset.Sub(now))
		rl := DefaultRateLimit()
		if s.cfg.RateLimit != nil {
			rl = *s.cfg.RateLimit
		}
		for _, w := range []*RateLimitWindow{&rl.Requests, &rl.Tokens, &rl.InputTokens, &rl.OutputTokens} {
			w.Remaining, w.Reset = 0, reset
		}
		rl.setHeaders(ans.header, now)
	case LimitSpendCap:
		if a.OAuth() {
			ans.status = http.StatusTooManyRequests
			ans.body = newAPIError(ans.status, "rate_limit_error", "You have reached your organization's spend limit for extra usage.", reqID)
			s.setRejectedHeaders(ans.header, a, "overage", reset, cmp.Or(l.OverageReason, "org_spend_cap_reached"), reset)
			break
		}
		switch l.SpendCap {
		case SpendCapConsole:
			ans.status = http.StatusBadRequest
			ans.body = newAPIError(ans.status, "invalid_request_error",
				"You have reached your specified API usage limits. You will regain access on "+reset.UTC().Format("2006-01-02")+" at 00:00 UTC.", reqID)
		case SpendCapCredits:
			ans.status = http.StatusBadRequest
			ans.body = newAPIError(ans.status, "invalid_request_error",
				"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.", reqID)
		default:
			ans.status = http.StatusTooManyRequests
			ans.body = newAPIError(ans.status, "rate_limit_error",
				"Your organization has reached the monthly spend limit of its usage tier. You will regain access on "+reset.UTC().Format("2006-01-02")+" at 00:00 UTC.", reqID)
			ans.body.Error.Details = &apiErrorDetails{ErrorCode: string(SpendCapEnforced)}
		}
	}
	return ans
}

// setRejectedHeaders writes the unified headers of a refused request of an
// OAuth account: its quota's windows, the window that ran out used up, and
// the overage state when reason is set.
func (s *Server) setRejectedHeaders(h http.Header, a Account, claim string, reset time.Time, reason string, overageReset time.Time) {
	q, _ := s.quota(a)
	switch claim {
	case WindowFiveHour:
		q.FiveHour = QuotaWindow{Utilization: 1, Reset: reset}
	case WindowSevenDay:
		q.SevenDay = QuotaWindow{Utilization: 1, Reset: reset}
	}
	q.Claim, q.Status, q.OverageStatus = claim, "rejected", ""
	q.setHeaders(h)
	// The reset of the claim ("overage" has no window of its own).
	h.Set(unifiedPrefix+"Reset", unixSeconds(reset))
	if reason != "" {
		h.Set(unifiedPrefix+"Overage-Status", "rejected")
		h.Set(unifiedPrefix+"Overage-Disabled-Reason", reason)
		if !overageReset.IsZero() {
			h.Set(unifiedPrefix+"Overage-Reset", unixSeconds(overageReset))
		}
	}
}

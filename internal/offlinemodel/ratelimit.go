package offlinemodel

import (
	"net/http"
	"strconv"
	"time"
)

// RateLimit is the rate-limit state an answer reports in its
// anthropic-ratelimit-* headers, one window per kind of limit. A window with
// a zero Limit is left out.
type RateLimit struct {
	Requests     RateLimitWindow // anthropic-ratelimit-requests-*
	Tokens       RateLimitWindow // anthropic-ratelimit-tokens-*
	InputTokens  RateLimitWindow // anthropic-ratelimit-input-tokens-*
	OutputTokens RateLimitWindow // anthropic-ratelimit-output-tokens-*
}

// RateLimitWindow is one limit: its size, what is left of it, and when it
// is whole again.
type RateLimitWindow struct {
	Limit     int
	Remaining int
	// Reset is sent in RFC 3339. Zero means one minute after the answer.
	Reset time.Time
}

// DefaultRateLimit returns a plausible rate-limit state, well within its
// limits.
func DefaultRateLimit() RateLimit {
	return RateLimit{
		Requests:     RateLimitWindow{Limit: 4000, Remaining: 3999},
		Tokens:       RateLimitWindow{Limit: 2_400_000, Remaining: 2_390_000},
		InputTokens:  RateLimitWindow{Limit: 2_000_000, Remaining: 1_990_000},
		OutputTokens: RateLimitWindow{Limit: 400_000, Remaining: 400_000},
	}
}

// setHeaders writes rl as anthropic-ratelimit-* headers; now fills zero
// resets.
func (rl RateLimit) setHeaders(h http.Header, now time.Time) {
	for _, w := range []struct {
		name string
		win  RateLimitWindow
	}{
		{"requests", rl.Requests},
		{"tokens", rl.Tokens},
		{"input-tokens", rl.InputTokens},
		{"output-tokens", rl.OutputTokens},
	} {
		if w.win.Limit == 0 {
			continue
		}
		reset := w.win.Reset
		if reset.IsZero() {
			reset = now.Add(time.Minute)
		}
		prefix := "Anthropic-Ratelimit-" + w.name
		h.Set(prefix+"-limit", strconv.Itoa(w.win.Limit))
		h.Set(prefix+"-remaining", strconv.Itoa(w.win.Remaining))
		h.Set(prefix+"-reset", reset.UTC().Format(time.RFC3339))
	}
}

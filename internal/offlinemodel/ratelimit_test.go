package offlinemodel

import (
	"io"
	"net/http"
	"testing"
	"time"
)

func TestRateLimitHeaders(t *testing.T) {
	t.Parallel()
	reset := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	own := RateLimit{Requests: RateLimitWindow{Limit: 50, Remaining: 0, Reset: reset}}
	server := DefaultRateLimit()
	srv := startServer(t, Config{RateLimit: &server})
	srv.Enqueue(
		Reply(Text("server-wide")),
		Reply(Text("its own")).WithRateLimit(own).WithHeader("Anthropic-Ratelimit-Unified-Status", "allowed"),
		Fail(429, "", time.Second).WithRateLimit(own),
	)
	c := client(t)
	get := func(stream bool) http.Header {
		resp := post(t, c, srv, "/v1/messages", messagesBody(stream, "x"))
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Header
	}

	h := get(true)
	for name, want := range map[string]string{
		"Anthropic-Ratelimit-Requests-Limit":          "4000",
		"Anthropic-Ratelimit-Requests-Remaining":      "3999",
		"Anthropic-Ratelimit-Tokens-Limit":            "2400000",
		"Anthropic-Ratelimit-Input-Tokens-Remaining":  "1990000",
		"Anthropic-Ratelimit-Output-Tokens-Limit":     "400000",
		"Anthropic-Ratelimit-Output-Tokens-Remaining": "400000",
	} {
		if got := h.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	for _, name := range []string{"Requests", "Tokens", "Input-Tokens", "Output-Tokens"} {
		at, err := time.Parse(time.RFC3339, h.Get("Anthropic-Ratelimit-"+name+"-Reset"))
		if err != nil || !at.After(time.Now()) {
			t.Errorf("%s reset %q: %v", name, h.Get("Anthropic-Ratelimit-"+name+"-Reset"), err)
		}
	}

	// A reply's own state replaces the server's; its empty windows are left
	// out.
	h = get(false)
	if h.Get("Anthropic-Ratelimit-Requests-Remaining") != "0" || h.Get("Anthropic-Ratelimit-Requests-Reset") != "2030-01-02T03:04:05Z" ||
		h.Get("Anthropic-Ratelimit-Unified-Status") != "allowed" {
		t.Errorf("own headers %v", h)
	}
	if h.Get("Anthropic-Ratelimit-Tokens-Limit") != "" {
		t.Errorf("server-wide tokens window sent with the reply's own: %v", h)
	}
	// Errors carry them too.
	h = get(true)
	if h.Get("Anthropic-Ratelimit-Requests-Limit") != "50" || h.Get("Retry-After") != "1" {
		t.Errorf("429 headers %v", h)
	}

	// Without the option, nothing.
	plain := startServer(t, Config{})
	resp := post(t, c, plain, "/v1/messages", messagesBody(true, "x"))
	_, _ = io.Copy(io.Discard, resp.Body)
	for name := range resp.Header {
		if len(name) > 20 && name[:20] == "Anthropic-Ratelimit-" {
			t.Errorf("header %s sent without a rate limit", name)
		}
	}
}

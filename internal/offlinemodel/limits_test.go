package offlinemodel

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// answer is what one request got: status, headers, and the error body if
// any.
type answer struct {
	status int
	header http.Header
	err    apiError
}

func ask(t *testing.T, c *http.Client, srv *Server, cred credential, body map[string]any) answer {
	t.Helper()
	resp := postAs(t, c, srv, cred, "/v1/messages", body)
	b := drain(t, resp)
	a := answer{status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(b, &a.err); err != nil {
			t.Fatalf("error body %q: %v", b, err)
		}
	}
	return a
}

func unixHeader(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// checkHeaders fails for every header of want that h does not have as is; an
// empty value wants the header absent.
func checkHeaders(t *testing.T, what string, h http.Header, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got, v)
		}
	}
}

func TestUsageLimitOfAnOAuthAccount(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	srv := startServer(t, Config{Clock: clock.Now})
	c := client(t)
	sub, other := credential{bearer: "sk-ant-oat01-limited"}, credential{bearer: "sk-ant-oat01-free"}
	reset := clock.Now().Add(90 * time.Minute)
	srv.SetLimit(sub.account(), UsageLimit(WindowFiveHour, reset))
	srv.Enqueue(Reply(Text("for the free account")), Reply(Text("after the reset")))

	for _, stream := range []bool{true, false} {
		a := ask(t, c, srv, sub, messagesBody(stream, "x"))
		if a.status != 429 || a.err.Error.Type != "rate_limit_error" {
			t.Fatalf("limited answer: %d %+v", a.status, a.err)
		}
		checkHeaders(t, "limited", a.header, map[string]string{
			"Anthropic-Ratelimit-Unified-Status":               "rejected",
			"Anthropic-Ratelimit-Unified-Reset":                unixHeader(reset),
			"Anthropic-Ratelimit-Unified-Representative-Claim": "five_hour",
			"Anthropic-Ratelimit-Unified-5h-Utilization":       "1",
			"Anthropic-Ratelimit-Unified-5h-Reset":             unixHeader(reset),
			"Anthropic-Ratelimit-Unified-7d-Utilization":       "",
			"Anthropic-Ratelimit-Unified-Overage-Status":       "",
			"Retry-After":                            "",
			"Anthropic-Ratelimit-Requests-Remaining": "",
		})
	}
	if srv.Pending() != 2 {
		t.Errorf("a refused request consumed the script: %d pending", srv.Pending())
	}
	// Another account is not limited.
	if a := ask(t, c, srv, other, messagesBody(true, "x")); a.status != 200 || a.header.Get("Anthropic-Ratelimit-Unified-Status") != "" {
		t.Errorf("the other account: %d %v", a.status, a.header)
	}
	if l, ok := srv.Limit(sub.account()); !ok || l.Kind != LimitUsage || !l.Reset.Equal(reset) {
		t.Errorf("Limit: %+v %v", l, ok)
	}
	// It lifts by itself at the reset.
	clock.Advance(90 * time.Minute)
	if _, ok := srv.Limit(sub.account()); ok {
		t.Errorf("the limit holds at its reset")
	}
	if a := ask(t, c, srv, sub, messagesBody(true, "x")); a.status != 200 {
		t.Errorf("after the reset: %d %+v", a.status, a.err)
	}
	if srv.Pending() != 0 || len(srv.Ledger()) != 2 {
		t.Errorf("pending %d, ledger %d entries (refusals bill nothing)", srv.Pending(), len(srv.Ledger()))
	}

	limited := srv.Calls().Of(sub.account()).Limited(LimitUsage)
	if len(limited) != 2 || limited[0].Status != 429 || !limited[0].Reset.Equal(reset) || limited.MaxPerReset() != 2 {
		t.Errorf("limited calls: %+v", limited)
	}
	if n := len(srv.Calls().Limited()); n != 2 {
		t.Errorf("%d limited calls in all, want 2", n)
	}
}

func TestUsageLimitSevenDayWithOverage(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	srv := startServer(t, Config{Clock: clock.Now})
	c := client(t)
	sub := credential{bearer: "sk-ant-oat01-weekly"}
	fiveHours := clock.Now().Add(2 * time.Hour)
	srv.SetQuota(sub.account(), Quota{FiveHour: QuotaWindow{Utilization: 0.4, Reset: fiveHours}})
	reset := clock.Now().Add(50 * time.Hour)
	srv.SetLimit(sub.account(), UsageLimit(WindowSevenDay, reset).WithOverage("out_of_credits"))
	a := ask(t, c, srv, sub, messagesBody(true, "x"))
	if a.status != 429 {
		t.Fatalf("status %d", a.status)
	}
	checkHeaders(t, "weekly", a.header, map[string]string{
		"Anthropic-Ratelimit-Unified-Status":                  "rejected",
		"Anthropic-Ratelimit-Unified-Reset":                   unixHeader(reset),
		"Anthropic-Ratelimit-Unified-Representative-Claim":    "seven_day",
		"Anthropic-Ratelimit-Unified-7d-Utilization":          "1",
		"Anthropic-Ratelimit-Unified-7d-Reset":                unixHeader(reset),
		"Anthropic-Ratelimit-Unified-5h-Utilization":          "0.4",
		"Anthropic-Ratelimit-Unified-5h-Reset":                unixHeader(fiveHours),
		"Anthropic-Ratelimit-Unified-Overage-Status":          "rejected",
		"Anthropic-Ratelimit-Unified-Overage-Disabled-Reason": "out_of_credits",
	})
}

func TestUsageLimitOfAnAPIKeyAccount(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	srv := startServer(t, Config{Clock: clock.Now})
	c := client(t)
	key := credential{apiKey: "sk-ant-api03-limited"}
	reset := clock.Now().Add(2500 * time.Millisecond)
	srv.SetLimit(key.account(), UsageLimit(WindowFiveHour, reset))
	a := ask(t, c, srv, key, messagesBody(true, "x"))
	if a.status != 429 || a.err.Error.Type != "rate_limit_error" || a.err.Error.Message == "" {
		t.Fatalf("answer %d %+v", a.status, a.err)
	}
	checkHeaders(t, "API key", a.header, map[string]string{
		"Retry-After":                                 "3",
		"Anthropic-Ratelimit-Requests-Remaining":      "0",
		"Anthropic-Ratelimit-Requests-Reset":          reset.UTC().Format(time.RFC3339),
		"Anthropic-Ratelimit-Input-Tokens-Remaining":  "0",
		"Anthropic-Ratelimit-Output-Tokens-Remaining": "0",
		"Anthropic-Ratelimit-Unified-Status":          "",
	})
	if a.header.Get("Anthropic-Ratelimit-Requests-Limit") == "" {
		t.Errorf("no requests limit: %v", a.header)
	}
	clock.Advance(2500 * time.Millisecond)
	if a := ask(t, c, srv, key, messagesBody(true, "x")); a.status != 200 {
		t.Errorf("after the reset: %d", a.status)
	}
}

// A limit held past its reset keeps refusing, announcing the past reset,
// until the test lifts it or sets another.
func TestLimitHeldPastItsReset(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	srv := startServer(t, Config{Clock: clock.Now})
	c := client(t)
	sub, key := credential{bearer: "sk-ant-oat01-held"}, credential{apiKey: "sk-ant-api03-held"}
	reset := clock.Now().Add(time.Minute)
	srv.SetLimit(sub.account(), UsageLimit(WindowFiveHour, reset).HeldPastReset())
	srv.SetLimit(key.account(), UsageLimit(WindowFiveHour, reset).HeldPastReset())
	clock.Advance(10 * time.Minute)
	a := ask(t, c, srv, sub, messagesBody(true, "x"))
	if a.status != 429 || a.header.Get("Anthropic-Ratelimit-Unified-Reset") != unixHeader(reset) {
		t.Errorf("OAuth past the reset: %d %v", a.status, a.header)
	}
	a = ask(t, c, srv, key, messagesBody(true, "x"))
	if a.status != 429 || a.header.Get("Retry-After") != "1" {
		t.Errorf("API key past the reset: %d %v", a.status, a.header)
	}
	// A new reset replaces the old one.
	later := clock.Now().Add(time.Hour)
	srv.SetLimit(sub.account(), UsageLimit(WindowFiveHour, later))
	if a := ask(t, c, srv, sub, messagesBody(true, "x")); a.header.Get("Anthropic-Ratelimit-Unified-Reset") != unixHeader(later) {
		t.Errorf("new reset: %v", a.header)
	}
	srv.LiftLimit(sub.account())
	srv.LiftLimit(key.account())
	for _, cred := range []credential{sub, key} {
		if a := ask(t, c, srv, cred, messagesBody(true, "x")); a.status != 200 {
			t.Errorf("%s after LiftLimit: %d", cred.account(), a.status)
		}
	}
	if got := srv.Calls().Limited().MaxPerReset(); got != 2 {
		t.Errorf("MaxPerReset %d, want 2 (the held reset was announced to both accounts)", got)
	}
}

func TestSpendCaps(t *testing.T) {
	t.Parallel()
	clock := newFakeClock() // 2031-03-14
	srv := startServer(t, Config{Clock: clock.Now})
	c := client(t)
	nextMonth := time.Date(2031, 4, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		cred    credential
		limit   AccountLimit
		status  int
		errType string
		message string // a part of it
		code    string // error.details.error_code
		headers map[string]string
	}{
		{
			name: "tier cap", cred: credential{apiKey: "sk-ant-api03-tier"}, limit: SpendCapLimit(SpendCapEnforced),
			status: 429, errType: "rate_limit_error", message: "2031-04-01", code: "enforced_spend_limit_reached",
			headers: map[string]string{"Retry-After": "", "Anthropic-Ratelimit-Unified-Status": ""},
		},
		{
			name: "default is the tier cap", cred: credential{apiKey: "sk-ant-api03-default"}, limit: AccountLimit{Kind: LimitSpendCap},
			status: 429, errType: "rate_limit_error", code: "enforced_spend_limit_reached",
		},
		{
			name: "console limit", cred: credential{apiKey: "sk-ant-api03-console"}, limit: SpendCapLimit(SpendCapConsole),
			status: 400, errType: "invalid_request_error",
			message: "You have reached your specified API usage limits. You will regain access on 2031-04-01 at 00:00 UTC.",
		},
		{
			name: "credits", cred: credential{apiKey: "sk-ant-api03-credits"}, limit: SpendCapLimit(SpendCapCredits),
			status: 400, errType: "invalid_request_error", message: "Your credit balance is too low",
		},
		{
			name: "subscription", cred: credential{bearer: "sk-ant-oat01-cap"}, limit: SpendCapLimit(""),
			status: 429, errType: "rate_limit_error",
			headers: map[string]string{
				"Anthropic-Ratelimit-Unified-Status":                  "rejected",
				"Anthropic-Ratelimit-Unified-Representative-Claim":    "overage",
				"Anthropic-Ratelimit-Unified-Reset":                   unixHeader(nextMonth),
				"Anthropic-Ratelimit-Unified-Overage-Status":          "rejected",
				"Anthropic-Ratelimit-Unified-Overage-Reset":           unixHeader(nextMonth),
				"Anthropic-Ratelimit-Unified-Overage-Disabled-Reason": "org_spend_cap_reached",
			},
		},
		{
			name: "subscription out of credits", cred: credential{bearer: "sk-ant-oat01-credits"}, limit: SpendCapLimit("").WithOverage("out_of_credits"),
			status: 429, errType: "rate_limit_error",
			headers: map[string]string{"Anthropic-Ratelimit-Unified-Overage-Disabled-Reason": "out_of_credits"},
		},
	}
	for _, tc := range cases {
		srv.SetLimit(tc.cred.account(), tc.limit)
	}
	clock.Advance(24 * time.Hour * 60) // a spend cap does not lift by itself
	for _, tc := range cases {
		a := ask(t, c, srv, tc.cred, messagesBody(true, "x"))
		if a.status != tc.status || a.err.Error.Type != tc.errType || !strings.Contains(a.err.Error.Message, tc.message) {
			t.Errorf("%s: %d %+v", tc.name, a.status, a.err)
		}
		code := ""
		if a.err.Error.Details != nil {
			code = a.err.Error.Details.ErrorCode
		}
		if code != tc.code {
			t.Errorf("%s: error_code %q, want %q", tc.name, code, tc.code)
		}
		checkHeaders(t, tc.name, a.header, tc.headers)
		srv.LiftLimit(tc.cred.account())
		if a := ask(t, c, srv, tc.cred, messagesBody(true, "x")); a.status != 200 {
			t.Errorf("%s: after LiftLimit %d", tc.name, a.status)
		}
	}
	if n := len(srv.Calls().Limited(LimitSpendCap)); n != len(cases) {
		t.Errorf("%d spend-cap calls, want %d", n, len(cases))
	}
}

func TestOverloadLimit(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	srv := startServer(t, Config{Clock: clock.Now})
	c := client(t)
	busy, forever := credential{apiKey: "sk-ant-api03-busy"}, credential{bearer: "sk-ant-oat01-busy"}
	srv.SetLimit(busy.account(), OverloadLimit(clock.Now().Add(time.Minute)).WithRetryAfter(2*time.Second))
	srv.SetLimit(forever.account(), OverloadLimit(time.Time{}))
	for _, cred := range []credential{busy, forever} {
		a := ask(t, c, srv, cred, messagesBody(false, "x"))
		if a.status != 529 || a.err.Error.Type != "overloaded_error" || a.err.Error.Message != "Overloaded" {
			t.Errorf("%s: %d %+v", cred.account(), a.status, a.err)
		}
	}
	if calls := srv.Calls().Limited(LimitOverload); len(calls) != 2 || !calls[0].Reset.IsZero() {
		t.Errorf("overload calls %+v (an overload announces no reset)", calls)
	}
	clock.Advance(time.Hour)
	if a := ask(t, c, srv, busy, messagesBody(false, "x")); a.status != 200 {
		t.Errorf("after the overload: %d", a.status)
	}
	if a := ask(t, c, srv, forever, messagesBody(false, "x")); a.status != 529 {
		t.Errorf("an overload without end ended: %d", a.status)
	}
	a := ask(t, c, srv, forever, messagesBody(false, "x"))
	if a.header.Get("Retry-After") != "" {
		t.Errorf("retry-after without WithRetryAfter: %v", a.header)
	}
	srv.SetLimit(busy.account(), OverloadLimit(time.Time{}).WithRetryAfter(2*time.Second))
	if a := ask(t, c, srv, busy, messagesBody(false, "x")); a.header.Get("Retry-After") != "2" {
		t.Errorf("retry-after %q", a.header.Get("Retry-After"))
	}
}

// A limit refuses every Messages request of its account, whatever its
// class, but not count_tokens.
func TestLimitCoversEveryMessagesRequest(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	c := client(t)
	sub := credential{bearer: "sk-ant-oat01-all"}
	srv.SetLimit(sub.account(), UsageLimit(WindowSevenDay, time.Now().Add(time.Hour)))
	subagent := messagesBody(true, "look around")
	subagent["system"] = []map[string]any{{"type": "text", "text": billingMarker + " cc_version=2.1.332; " + subagentMarker + ";"}}
	if a := ask(t, c, srv, sub, subagent); a.status != 429 {
		t.Errorf("subagent request: %d", a.status)
	}
	if a := ask(t, c, srv, sub, messagesBody(true, "x")); a.status != 429 {
		t.Errorf("main request: %d", a.status)
	}
	resp := postAs(t, c, srv, sub, "/v1/messages/count_tokens", messagesBody(false, "x"))
	drain(t, resp)
	if resp.StatusCode != 200 {
		t.Errorf("count_tokens: %d", resp.StatusCode)
	}
	calls := srv.Calls()
	if len(calls) != 3 || calls[0].Class != ClassSubagent || calls[0].Limit != LimitUsage || calls[2].Limit != "" {
		t.Errorf("calls %+v", calls)
	}
}

func TestQuotaHeaders(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	c := client(t)
	sub, key := credential{bearer: "sk-ant-oat01-quota"}, credential{apiKey: "sk-ant-api03-quota"}
	reset5h, reset7d := time.Now().Add(3*time.Hour), time.Now().Add(100*time.Hour)
	srv.SetQuota(sub.account(), Quota{
		FiveHour: QuotaWindow{Utilization: 0.5, Reset: reset5h},
		SevenDay: QuotaWindow{Utilization: 0.75, Reset: reset7d},
	})
	srv.SetQuota(key.account(), Quota{FiveHour: QuotaWindow{Utilization: 0.5, Reset: reset5h}})
	srv.Enqueue(Reply(Text("a")), Fail(500, "", 0), Reply(Text("b")), Reply(Text("c")))

	a := ask(t, c, srv, sub, messagesBody(true, "x"))
	checkHeaders(t, "quota", a.header, map[string]string{
		"Anthropic-Ratelimit-Unified-Status":                 "allowed",
		"Anthropic-Ratelimit-Unified-Representative-Claim":   "seven_day", // the higher utilization
		"Anthropic-Ratelimit-Unified-Reset":                  unixHeader(reset7d),
		"Anthropic-Ratelimit-Unified-5h-Utilization":         "0.5",
		"Anthropic-Ratelimit-Unified-5h-Reset":               unixHeader(reset5h),
		"Anthropic-Ratelimit-Unified-7d-Utilization":         "0.75",
		"Anthropic-Ratelimit-Unified-7d-Reset":               unixHeader(reset7d),
		"Anthropic-Ratelimit-Unified-5h-Surpassed-Threshold": "",
	})
	// Errors carry it too.
	if a := ask(t, c, srv, sub, messagesBody(true, "x")); a.status != 500 || a.header.Get("Anthropic-Ratelimit-Unified-Status") != "allowed" {
		t.Errorf("error answer: %d %v", a.status, a.header)
	}
	// API-key accounts never get unified headers.
	if a := ask(t, c, srv, key, messagesBody(true, "x")); a.header.Get("Anthropic-Ratelimit-Unified-Status") != "" {
		t.Errorf("API-key account got unified headers: %v", a.header)
	}
	srv.SetQuota(sub.account(), WarningQuota(WindowFiveHour, 0.92, 0.9, reset5h))
	a = ask(t, c, srv, sub, messagesBody(false, "x"))
	checkHeaders(t, "warning", a.header, map[string]string{
		"Anthropic-Ratelimit-Unified-Status":                 "allowed_warning",
		"Anthropic-Ratelimit-Unified-Representative-Claim":   "five_hour",
		"Anthropic-Ratelimit-Unified-Reset":                  unixHeader(reset5h),
		"Anthropic-Ratelimit-Unified-5h-Utilization":         "0.92",
		"Anthropic-Ratelimit-Unified-5h-Surpassed-Threshold": "0.9",
		"Anthropic-Ratelimit-Unified-7d-Utilization":         "",
	})
	srv.ClearQuota(sub.account())
	if a := ask(t, c, srv, sub, messagesBody(true, "x")); a.header.Get("Anthropic-Ratelimit-Unified-Status") != "" {
		t.Errorf("headers after ClearQuota: %v", a.header)
	}
}

func TestScriptedErrorCode(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	c := client(t)
	srv.Enqueue(Fail(429, "", 0).WithErrorCode("enforced_spend_limit_reached"), Fail(500, "", 0))
	a := ask(t, c, srv, credential{apiKey: "k"}, messagesBody(true, "x"))
	if a.status != 429 || a.err.Error.Details == nil || a.err.Error.Details.ErrorCode != "enforced_spend_limit_reached" {
		t.Errorf("answer %d %+v", a.status, a.err)
	}
	resp := postAs(t, c, srv, credential{apiKey: "k"}, "/v1/messages", messagesBody(true, "x"))
	if b := drain(t, resp); strings.Contains(string(b), "details") {
		t.Errorf("details without an error code: %s", b)
	}
}

func TestSetLimitRefusesNonsense(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	for name, l := range map[string]AccountLimit{
		"usage limit without reset": UsageLimit(WindowFiveHour, time.Time{}),
		"unknown window":            UsageLimit("fortnight", time.Now()),
		"unknown spend cap":         SpendCapLimit("piggy_bank"),
		"unknown kind":              {Kind: "moon_phase"},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			srv.SetLimit(NoAccount, l)
		}()
	}
	if _, ok := srv.Limit(NoAccount); ok {
		t.Errorf("a refused limit was kept")
	}
}

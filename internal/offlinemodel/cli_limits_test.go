package offlinemodel

import (
	"testing"
	"time"
)

// cliAPIKey is the API key startCLI gives the CLI.
const cliAPIKey = "sk-ant-test-offlinemodel"

// Two CLI processes on one server, one with an API key and one with a claude.ai OAuth token, are
// two accounts: a limit on one leaves the other alone, and the request log tells them apart. The
// subscription's refusal comes with the unified headers the CLI reads (a rate_limit_event with the
// reset and the window), and is not retried.
func TestCLIAccountsAreApart(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	const token = "sk-ant-oat01-offlinemodel-test"
	key, sub := APIKeyAccount(cliAPIKey), OAuthAccount(token)
	reset := time.Now().Add(time.Hour)
	srv.SetLimit(sub, UsageLimit(WindowFiveHour, reset))
	srv.Enqueue(Reply(Text("the key works")))

	apiKey := startCLI(t, srv, cliOptions{env: []string{"CLAUDE_CODE_MAX_RETRIES=2"}})
	oauth := startCLI(t, srv, cliOptions{env: []string{"ANTHROPIC_API_KEY=", "CLAUDE_CODE_OAUTH_TOKEN=" + token, "CLAUDE_CODE_MAX_RETRIES=2"}})
	oauth.prompt("limited")
	res := oauth.result()
	if res["is_error"] != true || res["api_error"] != "usage_limit_reached" || res["api_error_status"] != 429.0 {
		t.Errorf("subscription result %v", res)
	}
	events := oauth.frames("rate_limit_event", "")
	if len(events) != 1 {
		t.Fatalf("%d rate_limit_event frames\n%s", len(events), oauth.dump())
	}
	info, _ := events[0]["rate_limit_info"].(map[string]any)
	if info["status"] != "rejected" || info["rateLimitType"] != "five_hour" || info["resetsAt"] != float64(reset.Unix()) {
		t.Errorf("rate_limit_info %v", info)
	}
	apiKey.prompt("free")
	if res := apiKey.result(); res["is_error"] != false || res["result"] != "the key works" {
		t.Errorf("API-key result %v", res)
	}
	oauth.finish()
	apiKey.finish()

	calls := srv.Calls()
	if got := calls.Of(sub); len(got) != 1 || got[0].Limit != LimitUsage || got[0].Status != 429 || !got[0].Reset.Equal(reset.Truncate(0)) {
		t.Errorf("subscription calls %+v", got)
	}
	if got := calls.Of(key); len(got) != 1 || got[0].Limit != "" || got[0].Status != 200 {
		t.Errorf("API-key calls %+v", got)
	}
	for _, r := range srv.Requests() {
		if r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != "" {
			t.Errorf("request %d kept its credential", r.Seq)
		}
	}
	if led := srv.Ledger(); len(led) != 1 || led[0].Account != key {
		t.Errorf("ledger %+v", led)
	}
}

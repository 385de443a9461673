package offlinemodel

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// These tests run the real pinned CLI against the fake to show that the
// fake's validation, ledger and injected failures hold against what the CLI
// really does. Every CLI test of the package also fails if the CLI sent a
// request the fake refused (startServer checks it).

// cliModelUsage is one model's entry of a result's
// model_usage_since_last_result (or modelUsage).
type cliModelUsage struct {
	InputTokens              int     `json:"inputTokens"`
	OutputTokens             int     `json:"outputTokens"`
	CacheReadInputTokens     int     `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int     `json:"cacheCreationInputTokens"`
	CostUSD                  float64 `json:"costUSD"`
}

// sinceLastResult decodes a result's model_usage_since_last_result.
func sinceLastResult(t *testing.T, res map[string]any) map[string]cliModelUsage {
	t.Helper()
	b, err := json.Marshal(res["model_usage_since_last_result"])
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]cliModelUsage
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("model_usage_since_last_result: %v", err)
	}
	return out
}

// sameCost compares dollar amounts summed in different orders.
func sameCost(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9
}

// checkAgainstLedger compares what the CLI says a turn cost with the
// ledger's entries for that turn.
func checkAgainstLedger(t *testing.T, turn string, res map[string]any, entries []LedgerEntry) LedgerTotals {
	t.Helper()
	cli := sinceLastResult(t, res)
	led := SumLedger(entries)
	if led.Incomplete != 0 {
		t.Errorf("%s: %d incomplete answers", turn, led.Incomplete)
	}
	if len(cli) != len(led.ByModel) {
		t.Errorf("%s: the CLI counted models %v, the ledger %v", turn, cli, led.ByModel)
	}
	for model, m := range led.ByModel {
		c := cli[model]
		got := Usage{InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, CacheReadInputTokens: c.CacheReadInputTokens,
			CacheCreationInputTokens: c.CacheCreationInputTokens}
		if got != m.Usage || !sameCost(c.CostUSD, m.CostUSD) {
			t.Errorf("%s, %s: the CLI counted %+v for $%v, the ledger %+v for $%v", turn, model, got, c.CostUSD, m.Usage, m.CostUSD)
		}
	}
	return led
}

func TestCLICostEqualsTheLedger(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	agent := UseAgent("Inspect", "SUBAGENT-TASK look around", "general-purpose")
	srv.Enqueue(
		Reply(Text("one")),
		Reply(Text("Running it."), UseBash("echo ledger")).WithUsage(Usage{InputTokens: 1200, OutputTokens: 80, CacheReadInputTokens: 30000, CacheCreationInputTokens: 4500}),
		Reply(Text("two")),
		Reply(agent),
		Reply(Text("three")),
	)
	srv.EnqueueSubagent(Reply(Text("subagent report")))
	// A prompt hook on Bash adds an auxiliary request to the tool call.
	settings := `{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"prompt","prompt":"Allow echo. $ARGUMENTS"}]}]}}`
	s := startCLI(t, srv, cliOptions{settings: settings, args: []string{"--dangerously-skip-permissions"}, env: []string{"IS_SANDBOX=1"}})

	turns := []struct{ prompt, want string }{
		{"first", "one"},           // one request, default usage
		{"run the command", "two"}, // a tool call: two main requests and the hook's
		{"delegate", "three"},      // a subagent: main and subagent requests
		{"/compact", ""},           // a compaction request
	}
	for _, turn := range turns {
		mark := srv.Mark()
		s.prompt(turn.prompt)
		res := s.result()
		if res["is_error"] != false || (turn.want != "" && res["result"] != turn.want) {
			t.Fatalf("%s: result %v\n%s", turn.prompt, res, s.dump())
		}
		led := checkAgainstLedger(t, turn.prompt, res, srv.LedgerSince(mark))
		if led.Usage.CacheReadInputTokens == 0 || led.Usage.CacheCreationInputTokens == 0 {
			t.Errorf("%s: no cache tokens to account for: %+v", turn.prompt, led.Usage)
		}
		// total_cost_usd is the CLI's running total.
		if total, _ := res["total_cost_usd"].(float64); !sameCost(total, srv.LedgerTotals().CostUSD) {
			t.Errorf("%s: total_cost_usd %v, ledger %v", turn.prompt, total, srv.LedgerTotals().CostUSD)
		}
	}
	s.finish()
	classes := map[Class]int{}
	for _, e := range srv.Ledger() {
		classes[e.Class]++
	}
	if classes[ClassMain] != 5 || classes[ClassSubagent] != 1 || classes[ClassAuxiliary] != 1 || classes[ClassCompact] != 1 {
		t.Errorf("ledger classes %v", classes)
	}
}

// TestCLIPricesEqualTheLedger runs one model of each price tier through the
// CLI with every kind of token, and compares its cost with the ledger's.
// claude-haiku-5-5 runs twice: below and above its long-prompt threshold.
func TestCLIPricesEqualTheLedger(t *testing.T) {
	t.Parallel()
	short := Usage{InputTokens: 12345, OutputTokens: 2345, CacheReadInputTokens: 34567, CacheCreationInputTokens: 4567}
	long := Usage{InputTokens: 123457, OutputTokens: 2345, CacheReadInputTokens: 34567, CacheCreationInputTokens: 4567}
	for _, model := range []string{
		"claude-opus-5-5", "claude-opus-4-7", "claude-sonnet-5-5", "claude-sonnet-5", "claude-sonnet-4-5",
		"claude-fable-5", "claude-fable-5-1", "claude-mythos-5-2", "claude-haiku-5-5", "claude-haiku-4-5", "claude-3-5-haiku-20241022",
	} {
		t.Run(model, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, Config{})
			srv.Enqueue(Reply(Text("a")).WithUsage(short), Reply(Text("b")).WithUsage(long))
			s := startCLI(t, srv, cliOptions{args: []string{"--model", model}})
			for i, want := range []string{"a", "b"} {
				mark := srv.Mark()
				s.prompt("price check")
				res := s.result()
				if res["result"] != want {
					t.Fatalf("result %v", res)
				}
				led := checkAgainstLedger(t, want, res, srv.LedgerSince(mark))
				if led.Responses != 1 || led.ByModel[model].Responses != 1 {
					t.Errorf("turn %d: ledger %+v", i, led)
				}
			}
			s.finish()
		})
	}
}

// rewriteTranscript rewrites the session transcript of sessionID under cfg
// through edit, which gets and returns its entries.
func rewriteTranscript(t *testing.T, cfg, sessionID string, edit func([]map[string]any) []map[string]any) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(cfg, "projects", "*", sessionID+".jsonl"))
	if len(paths) != 1 {
		t.Fatalf("session transcript: %v", paths)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	var entries []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("transcript line %q: %v", line, err)
		}
		entries = append(entries, e)
	}
	var out strings.Builder
	for _, e := range edit(entries) {
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	if err := os.WriteFile(paths[0], []byte(out.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// firstBlockType returns the type of the first content block of a
// transcript entry's message.
func firstBlockType(e map[string]any) string {
	msg, _ := e["message"].(map[string]any)
	blocks, _ := msg["content"].([]any)
	if len(blocks) == 0 {
		return ""
	}
	b, _ := blocks[0].(map[string]any)
	typ, _ := b["type"].(string)
	return typ
}

// removeToolResult drops the user entry that carries a tool's result and
// relinks what followed it, as if that entry had never been written.
func removeToolResult(t *testing.T) func([]map[string]any) []map[string]any {
	return func(entries []map[string]any) []map[string]any {
		var out []map[string]any
		var removed, parent any
		for _, e := range entries {
			if removed == nil && e["type"] == "user" && firstBlockType(e) == "tool_result" {
				removed, parent = e["uuid"], e["parentUuid"]
				continue
			}
			if removed != nil && e["parentUuid"] == removed {
				e["parentUuid"] = parent
			}
			out = append(out, e)
		}
		if removed == nil {
			t.Fatal("no tool_result entry in the transcript")
		}
		return out
	}
}

// duplicatePrompt writes the first prompt's entry a second time, right
// after the first, as a retry that did not know the prompt was there would.
func duplicatePrompt(t *testing.T) func([]map[string]any) []map[string]any {
	return func(entries []map[string]any) []map[string]any {
		for i, e := range entries {
			if e["type"] != "user" || firstBlockType(e) != "text" {
				continue
			}
			dup := map[string]any{}
			for k, v := range e {
				dup[k] = v
			}
			dup["uuid"], dup["parentUuid"] = "00000000-0000-4000-8000-000000000001", e["uuid"]
			for _, later := range entries[i+1:] {
				if later["parentUuid"] == e["uuid"] {
					later["parentUuid"] = dup["uuid"]
				}
			}
			return append(entries[:i+1], append([]map[string]any{dup}, entries[i+1:]...)...)
		}
		t.Fatal("no prompt entry in the transcript")
		return nil
	}
}

// A session whose transcript lost a tool's result: resumed, the CLI drops
// the unanswered tool call and sends two assistant messages in a row. The
// fake refuses it with a 400, and the CLI reports the API error.
func TestCLIMalformedResumeIsRefused(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	srv := startServer(t, Config{})
	srv.Enqueue(Reply(Text("Running it."), UseBash("echo first")), Reply(Text("done")))
	s := startCLI(t, srv, cliOptions{root: root, args: []string{"--dangerously-skip-permissions"}, env: []string{"IS_SANDBOX=1"}})
	s.prompt("first")
	res := s.result()
	if res["result"] != "done" {
		t.Fatalf("result %v", res)
	}
	sessionID, _ := res["session_id"].(string)
	if code := s.finish(); code != 0 {
		t.Fatalf("exit %d", code)
	}

	rewriteTranscript(t, filepath.Join(root, "config"), sessionID, removeToolResult(t))
	resumed := startServerAllowInvalid(t, Config{})
	resumed.Enqueue(Reply(Text("never")))
	s = startCLI(t, resumed, cliOptions{root: root, args: []string{"--resume", sessionID}})
	s.prompt("second")
	res = s.result()
	text, _ := res["result"].(string)
	if res["is_error"] != true || res["api_error_status"] != 400.0 || !strings.HasPrefix(text, "API Error: 400") ||
		!strings.Contains(text, `found multiple "assistant" roles in a row`) {
		t.Errorf("result %v", res)
	}
	if code := s.finish(); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	bad := resumed.Invalid()
	if len(bad) == 0 || len(bad) != len(resumed.Requests()) {
		t.Fatalf("%d of %d requests refused", len(bad), len(resumed.Requests()))
	}
	for _, r := range bad {
		if r.Status != 400 || r.Type != "invalid_request_error" || r.Class != ClassMain ||
			!strings.Contains(r.Message, `roles must alternate between "user" and "assistant"`) {
			t.Errorf("refusal %s", r)
		}
	}
	if resumed.Pending() != 1 || len(resumed.Ledger()) != 0 {
		t.Errorf("pending %d, ledger %+v", resumed.Pending(), resumed.Ledger())
	}
}

// A prompt written twice into the session transcript is not refused: the
// CLI merges the two user turns into one message, which the real API
// accepts too. Request.PromptCount shows it.
func TestCLIDuplicatedPromptIsCounted(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	srv := startServer(t, Config{})
	srv.Enqueue(Reply(Text("one")), Reply(Text("two")))
	s := startCLI(t, srv, cliOptions{root: root})
	s.prompt("PROMPT-ONCE")
	res := s.result()
	sessionID, _ := res["session_id"].(string)
	s.finish()
	if n := srv.MainRequests()[0].PromptCount("PROMPT-ONCE"); n != 1 {
		t.Fatalf("first request holds the prompt %d times", n)
	}

	rewriteTranscript(t, filepath.Join(root, "config"), sessionID, duplicatePrompt(t))
	s = startCLI(t, srv, cliOptions{root: root, args: []string{"--resume", sessionID}})
	s.prompt("next")
	if res := s.result(); res["result"] != "two" {
		t.Fatalf("result %v", res)
	}
	s.finish()
	main := srv.MainRequests()
	if n := main[1].PromptCount("PROMPT-ONCE"); n != 2 {
		t.Errorf("resumed request holds the prompt %d times, want 2", n)
	}
}

func TestCLIUnknownModelIsNotFound(t *testing.T) {
	t.Parallel()
	srv := startServerAllowInvalid(t, Config{})
	s := startCLI(t, srv, cliOptions{args: []string{"--model", "claude-nonexistent-9"}})
	s.prompt("hi")
	res := s.result()
	text, _ := res["result"].(string)
	if res["is_error"] != true || res["api_error_status"] != 404.0 || !strings.Contains(text, "claude-nonexistent-9") {
		t.Errorf("result %v", res)
	}
	s.finish()
	bad := srv.Invalid()
	if len(bad) == 0 {
		t.Fatal("nothing refused")
	}
	for _, r := range bad {
		if r.Status != 404 || r.Type != "not_found_error" || r.Message != "model: claude-nonexistent-9" {
			t.Errorf("refusal %s", r)
		}
	}
}

// The anthropic-ratelimit-* headers change nothing the CLI prints when it
// runs with an API key: no rate_limit_event (the CLI sends those only for
// claude.ai accounts), no retry, not even with every window used up.
func TestCLIRateLimitHeadersChangeNothing(t *testing.T) {
	t.Parallel()
	rl := DefaultRateLimit()
	srv := startServer(t, Config{RateLimit: &rl})
	spent := RateLimit{
		Requests:     RateLimitWindow{Limit: 50, Remaining: 0},
		Tokens:       RateLimitWindow{Limit: 10000, Remaining: 0},
		InputTokens:  RateLimitWindow{Limit: 10000, Remaining: 0},
		OutputTokens: RateLimitWindow{Limit: 2000, Remaining: 0},
	}
	srv.Enqueue(
		Reply(Text("plenty left")),
		Reply(Text("nothing left")).WithRateLimit(spent).
			WithHeader("Anthropic-Ratelimit-Unified-Status", "allowed_warning").
			WithHeader("Anthropic-Ratelimit-Unified-5h-Utilization", "0.97"),
	)
	s := startCLI(t, srv, cliOptions{})
	for _, want := range []string{"plenty left", "nothing left"} {
		s.prompt("hi")
		if res := s.result(); res["is_error"] != false || res["result"] != want {
			t.Fatalf("result %v", res)
		}
	}
	s.finish()
	if n := len(s.frames("rate_limit_event", "")); n != 0 {
		t.Errorf("%d rate_limit_event frames", n)
	}
	if n := len(s.frames("system", "api_retry")); n != 0 {
		t.Errorf("%d api_retry frames", n)
	}
	if n := len(srv.MainRequests()); n != 2 {
		t.Errorf("%d main requests, want 2", n)
	}
}

// cliCost is what the CLI counts of a turn with an injected failure.
type cliCost int

const (
	countsCompleted  cliCost = iota // the completed answers only
	countsIncomplete                // the incomplete answers too, with what they reported
	countsEither                    // it depends on timing
)

// TestCLISeesInjectedStreamFailures cuts answers between blocks and inside
// a block, with an SSE error event or by dropping the connection, and
// checks how the CLI takes each: it never keeps a cut block, it recovers
// from one failure (continuing after the complete blocks, or asking again
// without streaming when none was complete), and when the failure persists
// the turn ends with an API error.
func TestCLISeesInjectedStreamFailures(t *testing.T) {
	t.Parallel()
	const partial = "A PARTIAL BLOCK that is long enough to be streamed in several deltas"
	midSecond := Reply(Text("whole block"), Text(partial)).WithStreamErrorMidBlock(1, 2, "overloaded_error", "Overloaded")
	afterOne := Reply(Text("whole block"), Text(partial)).WithStreamError(1, "overloaded_error", "Overloaded")
	cases := []struct {
		name    string
		replies []Response
		result  string // the result's text, or its prefix for an error
		isError bool
		status  any // api_error_status
		streams []bool
		// cliCost tells what the CLI counts in total_cost_usd: the
		// completed answers only, the incomplete ones too, or, after a
		// dropped connection, either, depending on timing.
		cliCost cliCost
	}{
		{
			name:    "inside the first block, then fine",
			replies: []Response{Reply(Text(partial)).WithStreamErrorMidBlock(0, 2, "overloaded_error", "Overloaded"), Reply(Text("recovered"))},
			result:  "recovered", streams: []bool{true, false},
		},
		{
			name: "inside the first block, twice",
			replies: []Response{
				Reply(Text(partial)).WithStreamErrorMidBlock(0, 2, "overloaded_error", "Overloaded"),
				Reply(Text(partial)).WithStreamErrorMidBlock(0, 2, "overloaded_error", "Overloaded"),
			},
			result: "API Error: 529 Overloaded", isError: true, status: 529.0, streams: []bool{true, false},
		},
		{
			name:    "inside the second block, then fine",
			replies: []Response{midSecond, Reply(Text("continued"))},
			result:  "continued", streams: []bool{true, true}, cliCost: countsIncomplete,
		},
		{
			name:    "inside the second block, four times",
			replies: []Response{midSecond, midSecond, midSecond, midSecond},
			result:  "API Error: Server error mid-response", isError: true, status: nil, streams: []bool{true, true, true, true},
			cliCost: countsIncomplete,
		},
		{
			name:    "before the first block, twice",
			replies: []Response{StreamError("api_error", "Internal server error"), StreamError("api_error", "Internal server error")},
			result:  "API Error: 500 Internal server error", isError: true, status: 500.0, streams: []bool{true, false},
		},
		{
			name:    "after the first block, then fine",
			replies: []Response{afterOne, Reply(Text("continued"))},
			result:  "continued", streams: []bool{true, true}, cliCost: countsIncomplete,
		},
		{
			name:    "after the first block, four times",
			replies: []Response{afterOne, afterOne, afterOne, afterOne},
			result:  "API Error: Server error mid-response", isError: true, status: nil, streams: []bool{true, true, true, true},
			cliCost: countsIncomplete,
		},
		{
			name:    "connection dropped inside a block, then fine",
			replies: []Response{Reply(Text(partial)).WithDisconnectMidBlock(0, 2), Reply(Text("recovered"))},
			result:  "recovered", streams: []bool{true, false}, cliCost: countsEither,
		},
		{
			name:    "connection dropped inside a block, twice",
			replies: []Response{Reply(Text(partial)).WithDisconnectMidBlock(0, 2), Reply(Text(partial)).WithDisconnect(0)},
			result:  "API Error: Connection dropped", isError: true, status: nil, streams: []bool{true, false}, cliCost: countsEither,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, Config{})
			srv.Enqueue(tc.replies...)
			s := startCLI(t, srv, cliOptions{})
			s.prompt("hi")
			res := s.result()
			text, _ := res["result"].(string)
			if res["is_error"] != tc.isError || !strings.HasPrefix(text, tc.result) || res["api_error_status"] != tc.status {
				t.Errorf("result is_error=%v status=%v %q", res["is_error"], res["api_error_status"], text)
			}
			for _, b := range s.contentBlocks("assistant") {
				if txt, _ := b["text"].(string); strings.Contains(txt, "PARTIAL") {
					t.Errorf("the CLI kept a cut block: %v", b)
				}
			}
			main := srv.MainRequests()
			if len(main) != len(tc.streams) {
				t.Fatalf("%d main requests, want %d", len(main), len(tc.streams))
			}
			for i, r := range main {
				if r.Stream != tc.streams[i] {
					t.Errorf("request %d: stream %v", i+1, r.Stream)
				}
				for _, m := range r.Messages {
					if strings.Contains(m.Text(), "PARTIAL") {
						t.Errorf("request %d sends the cut block back", i+1)
					}
				}
			}
			s.finish()

			led := srv.LedgerTotals()
			if led.Incomplete == 0 {
				t.Errorf("ledger: no incomplete answer: %+v", srv.Ledger())
			}
			total, _ := res["total_cost_usd"].(float64)
			switch tc.cliCost {
			case countsCompleted:
				if !sameCost(total, led.CostUSD) {
					t.Errorf("total_cost_usd %v; ledger: completed %v, incomplete %v", total, led.CostUSD, led.IncompleteCostUSD)
				}
			case countsIncomplete:
				if !sameCost(total, led.CostUSD+led.IncompleteCostUSD) {
					t.Errorf("total_cost_usd %v; ledger: completed %v, incomplete %v", total, led.CostUSD, led.IncompleteCostUSD)
				}
			case countsEither:
				t.Logf("total_cost_usd %v; ledger: completed %v, incomplete %v", total, led.CostUSD, led.IncompleteCostUSD)
			}
		})
	}
}

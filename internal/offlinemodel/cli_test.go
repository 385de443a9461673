package offlinemodel

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// These tests run the real pinned claude CLI against the fake. Each starts
// its own server and CLI process and runs in parallel with the others.

func TestCLITextAndThinking(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	u := Usage{InputTokens: 1234, OutputTokens: 56, CacheCreationInputTokens: 78, CacheReadInputTokens: 90}
	srv.Enqueue(Reply(Thinking("The user wants a greeting."), Text("hello from the fake")).WithUsage(u))

	s := startCLI(t, srv, cliOptions{})
	s.prompt("say hello")
	res := s.result()
	if res["is_error"] != false || res["result"] != "hello from the fake" {
		t.Fatalf("result %v\n%s", res, s.dump())
	}
	usage, _ := res["usage"].(map[string]any)
	for k, want := range map[string]float64{"input_tokens": 1234, "output_tokens": 56, "cache_creation_input_tokens": 78, "cache_read_input_tokens": 90} {
		if usage[k] != want {
			t.Errorf("result usage %s = %v, want %v", k, usage[k], want)
		}
	}
	var thinking map[string]any
	for _, b := range s.contentBlocks("assistant") {
		if b["type"] == "thinking" {
			thinking = b
		}
	}
	if thinking == nil || thinking["thinking"] != "The user wants a greeting." || thinking["signature"] == "" {
		t.Errorf("thinking block %v", thinking)
	}
	if code := s.finish(); code != 0 {
		t.Errorf("exit %d", code)
	}

	main := srv.MainRequests()
	if len(main) != 1 || !strings.Contains(main[0].LastUserText(), "say hello") || !main[0].Stream {
		t.Fatalf("main requests %d", len(main))
	}
	if srv.Unscripted() != 0 || srv.Pending() != 0 {
		t.Errorf("unscripted %d pending %d", srv.Unscripted(), srv.Pending())
	}
	for _, r := range srv.Requests() {
		for k, v := range r.Header {
			if strings.Contains(strings.Join(v, " "), "sk-ant-") {
				t.Errorf("recorded header %s holds the API key", k)
			}
		}
	}
}

func TestCLIBashToolUse(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	srv.Enqueue(
		Reply(Text("Running it."), ToolUseID("toolu_fake_bash", "Bash", map[string]any{"command": "echo fake-tool-output", "description": "Print a marker"})),
		Reply(Text("done")),
	)
	s := startCLI(t, srv, cliOptions{args: []string{"--dangerously-skip-permissions"}, env: []string{"IS_SANDBOX=1"}})
	s.prompt("run the marker command")
	if res := s.result(); res["is_error"] != false || res["result"] != "done" {
		t.Fatalf("result %v\n%s", res, s.dump())
	}
	s.finish()

	main := srv.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests", len(main))
	}
	if got := main[0].ToolResults(); len(got) != 0 {
		t.Errorf("first request already has tool results %v", got)
	}
	results := main[1].ToolResults()
	if len(results) != 1 || results[0].ToolUseID != "toolu_fake_bash" || results[0].IsError ||
		strings.TrimSpace(results[0].Content) != "fake-tool-output" {
		t.Errorf("tool results %+v", results)
	}
	// The history holds the scripted tool call.
	var sawCall bool
	for _, m := range main[1].Messages {
		for _, raw := range m.Content {
			var b struct {
				Type  string         `json:"type"`
				ID    string         `json:"id"`
				Input map[string]any `json:"input"`
			}
			_ = json.Unmarshal(raw, &b)
			if m.Role == "assistant" && b.Type == "tool_use" && b.ID == "toolu_fake_bash" && b.Input["command"] == "echo fake-tool-output" {
				sawCall = true
			}
		}
	}
	if !sawCall {
		t.Errorf("second request lacks the tool_use in its history")
	}
	if srv.Unscripted() != 0 {
		t.Errorf("unscripted %d", srv.Unscripted())
	}
}

func TestCLIServerErrorGivesErrorResult(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	srv.Enqueue(Fail(500, "api_error", 0))
	s := startCLI(t, srv, cliOptions{env: []string{"CLAUDE_CODE_MAX_RETRIES=0"}})
	s.prompt("hi")
	res := s.result()
	if res["is_error"] != true || res["api_error_status"] != 500.0 {
		t.Errorf("result %v", res)
	}
	if text, _ := res["result"].(string); !strings.HasPrefix(text, "API Error") {
		t.Errorf("result text %q", text)
	}
	if code := s.finish(); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if n := len(srv.MainRequests()); n != 1 {
		t.Errorf("%d main requests, want 1 (no retry)", n)
	}
}

func TestCLIRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	srv.Enqueue(Fail(429, "", time.Second), Reply(Text("after the retry")))
	s := startCLI(t, srv, cliOptions{env: []string{"CLAUDE_CODE_MAX_RETRIES=1"}})
	s.prompt("hi")
	res := s.result()
	if res["is_error"] != false || res["result"] != "after the retry" {
		t.Fatalf("result %v\n%s", res, s.dump())
	}
	// The CLI waits retry-after plus up to about 25% jitter; without the
	// header its first backoff is about 500 ms.
	retries := s.frames("system", "api_retry")
	if len(retries) != 1 || retries[0]["error_status"] != 429.0 {
		t.Fatalf("api_retry frames %v", retries)
	}
	if d, _ := retries[0]["retry_delay_ms"].(float64); d < 1000 || d >= 2000 {
		t.Errorf("retry_delay_ms %v, want retry-after's 1000 plus jitter", d)
	}
	s.finish()
	if n := len(srv.MainRequests()); n != 2 {
		t.Errorf("%d main requests, want 2", n)
	}
}

func TestCLIStreamErrorAfterBlockContinues(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	srv.Enqueue(StreamError("overloaded_error", "Overloaded", Text("partial text")), Reply(Text("continued")))
	s := startCLI(t, srv, cliOptions{})
	s.prompt("hi")
	if res := s.result(); res["is_error"] != false || res["result"] != "continued" {
		t.Fatalf("result %v\n%s", res, s.dump())
	}
	s.finish()
	// The CLI keeps the streamed block and asks for a continuation.
	main := srv.MainRequests()
	if len(main) != 2 || !main[1].Stream {
		t.Fatalf("%d main requests", len(main))
	}
	var kept bool
	for _, m := range main[1].Messages {
		if m.Role == "assistant" && m.Text() == "partial text" {
			kept = true
		}
	}
	if !kept {
		t.Errorf("continuation lacks the partial block")
	}
}

func TestCLIStreamErrorFirstFallsBackToNonStreaming(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	srv.Enqueue(StreamError("overloaded_error", "Overloaded"), Reply(Text("from the JSON answer")))
	s := startCLI(t, srv, cliOptions{})
	s.prompt("hi")
	if res := s.result(); res["is_error"] != false || res["result"] != "from the JSON answer" {
		t.Fatalf("result %v\n%s", res, s.dump())
	}
	s.finish()
	main := srv.MainRequests()
	if len(main) != 2 || !main[0].Stream || main[1].Stream {
		t.Fatalf("main requests: %d", len(main))
	}
}

func TestCLISubagentHasItsOwnQueue(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	agent := UseAgent("Inspect files", "SUBAGENT-TASK list the files", "general-purpose")
	agent.ID = "toolu_fake_agent"
	srv.Enqueue(Reply(agent), Reply(Text("main done")))
	srv.EnqueueSubagent(Reply(Text("subagent report")))

	s := startCLI(t, srv, cliOptions{args: []string{"--dangerously-skip-permissions"}, env: []string{"IS_SANDBOX=1"}})
	s.prompt("delegate")
	if res := s.result(); res["is_error"] != false || res["result"] != "main done" {
		t.Fatalf("result %v\n%s", res, s.dump())
	}
	s.finish()

	subs := srv.RequestsOf(ClassSubagent)
	if len(subs) != 1 || !strings.Contains(subs[0].LastUserText(), "SUBAGENT-TASK list the files") {
		t.Fatalf("subagent requests %d", len(subs))
	}
	main := srv.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests", len(main))
	}
	results := main[1].ToolResults()
	if len(results) != 1 || results[0].ToolUseID != "toolu_fake_agent" || !strings.Contains(results[0].Content, "subagent report") {
		t.Errorf("agent tool result %+v", results)
	}
	if srv.Unscripted() != 0 || srv.Pending() != 0 {
		t.Errorf("unscripted %d pending %d", srv.Unscripted(), srv.Pending())
	}
}

func TestCLIPromptHookIsAuxiliary(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	srv.Enqueue(
		Reply(ToolUseID("toolu_hooked", "Bash", map[string]any{"command": "echo hooked-ok"})),
		Reply(Text("done")),
	)
	settings := `{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"prompt","prompt":"Allow only echo commands. $ARGUMENTS"}]}]}}`
	s := startCLI(t, srv, cliOptions{settings: settings, args: []string{"--dangerously-skip-permissions"}, env: []string{"IS_SANDBOX=1"}})
	s.prompt("run echo")
	if res := s.result(); res["is_error"] != false || res["result"] != "done" {
		t.Fatalf("result %v\n%s", res, s.dump())
	}
	s.finish()

	aux := srv.RequestsOf(ClassAuxiliary)
	if len(aux) != 1 || !aux[0].StructuredOutput || !strings.Contains(aux[0].LastUserText(), "Allow only echo commands") {
		t.Fatalf("auxiliary requests %d", len(aux))
	}
	// The automatic {"ok":true,…} let the command run.
	results := srv.MainRequests()[1].ToolResults()
	if len(results) != 1 || strings.TrimSpace(results[0].Content) != "hooked-ok" {
		t.Errorf("tool results %+v", results)
	}
	for _, f := range s.frames("system", "informational") {
		if f["tag"] == "hook_no_verdict" {
			t.Errorf("the hook got no usable answer: %v", f)
		}
	}
	if srv.Unscripted() != 0 || srv.Pending() != 0 {
		t.Errorf("unscripted %d pending %d", srv.Unscripted(), srv.Pending())
	}
}

func TestCLICompactIsAutomatic(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	srv.Enqueue(Reply(Text("one")), Reply(Text("two")))
	s := startCLI(t, srv, cliOptions{})
	s.prompt("first")
	if res := s.result(); res["result"] != "one" {
		t.Fatalf("result %v", res)
	}
	s.prompt("/compact")
	s.result()
	if len(s.frames("system", "compact_boundary")) != 1 {
		t.Errorf("no compact_boundary\n%s", s.dump())
	}
	s.prompt("after")
	if res := s.result(); res["result"] != "two" {
		t.Fatalf("result %v\n%s", res, s.dump())
	}
	s.finish()
	// One compaction request: the automatic answer has the <summary> the
	// CLI wants (without it, the CLI asks a second time).
	if n := len(srv.RequestsOf(ClassCompact)); n != 1 {
		t.Errorf("%d compaction requests, want 1", n)
	}
	main := srv.MainRequests()
	if len(main) != 2 || !strings.Contains(main[1].LastUserText(), "after") {
		t.Fatalf("%d main requests", len(main))
	}
	// After compaction the history starts from the summary.
	var summarized bool
	for _, m := range main[1].Messages {
		if strings.Contains(m.Text(), "Automatic summary from the fake Anthropic API") {
			summarized = true
		}
	}
	if !summarized || srv.Unscripted() != 0 {
		t.Errorf("summary in history %v, unscripted %d", summarized, srv.Unscripted())
	}
}

func TestCLIInterruptWhileStreaming(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	srv.Enqueue(Reply(Text("streaming text"), Text("never sent")).WithHold(1, release), Reply(Text("after the interrupt")))

	s := startCLI(t, srv, cliOptions{})
	s.prompt("hi")
	s.waitFor("the first block", func(m map[string]any) bool { return m["type"] == "assistant" })
	s.send(map[string]any{"type": "control_request", "request_id": "interrupt-1", "request": map[string]any{"subtype": "interrupt"}})
	res := s.result()
	if res["is_error"] != true || res["subtype"] != "error_during_execution" || res["terminal_reason"] != "aborted_streaming" {
		t.Errorf("interrupted result %v", res)
	}
	for _, b := range s.contentBlocks("assistant") {
		if b["text"] == "never sent" {
			t.Errorf("the held block arrived")
		}
	}
	// The process takes the next prompt.
	s.prompt("again")
	if res := s.result(); res["result"] != "after the interrupt" {
		t.Errorf("result after interrupt %v", res)
	}
	s.finish()
	main := srv.MainRequests()
	if len(main) != 2 || !strings.Contains(main[1].LastUserText(), "[Request interrupted by user]") {
		t.Errorf("main requests %d", len(main))
	}
}

package offlinemodel

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestRecordingParsesRequests(t *testing.T) {
	t.Parallel()
	srv := startServerAllowInvalid(t, Config{})
	c := client(t)
	body := map[string]any{
		"model":      "claude-test-2",
		"max_tokens": 2048,
		"stream":     true,
		"system": []map[string]any{
			{"type": "text", "text": "first system block"},
			{"type": "text", "text": "second system block", "cache_control": map[string]any{"type": "ephemeral"}},
		},
		"tools": []map[string]any{{"name": "Bash"}, {"name": "Write"}},
		"messages": []map[string]any{
			{"role": "user", "content": []map[string]any{
				{"type": "text", "text": "look at this"},
				{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
			}},
			{"role": "assistant", "content": []map[string]any{
				{"type": "text", "text": "running"},
				{"type": "tool_use", "id": "toolu_a", "name": "Bash", "input": map[string]any{"command": "ls"}},
			}},
			{"role": "user", "content": []map[string]any{
				{"type": "tool_result", "tool_use_id": "toolu_a", "content": "file1\nfile2", "is_error": false},
				{"type": "tool_result", "tool_use_id": "toolu_b", "content": []map[string]any{{"type": "text", "text": "boom"}}, "is_error": true},
			}},
			{"role": "user", "content": "plain string prompt"},
		},
	}
	post(t, c, srv, "/v1/messages?beta=true", body).Body.Close()
	post(t, c, srv, "/v1/messages", map[string]any{"model": "m", "system": "string system", "messages": []any{}}).Body.Close()

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Seq != 1 || r.Method != "POST" || r.Path != "/v1/messages" || r.Class != ClassMain {
		t.Errorf("request %d %s %s %s", r.Seq, r.Method, r.Path, r.Class)
	}
	if r.Model != "claude-test-2" || r.MaxTokens != 2048 || !r.Stream {
		t.Errorf("model %q max_tokens %d stream %v", r.Model, r.MaxTokens, r.Stream)
	}
	if r.System != "first system block\nsecond system block" {
		t.Errorf("system %q", r.System)
	}
	if !reflect.DeepEqual(r.Tools, []string{"Bash", "Write"}) {
		t.Errorf("tools %v", r.Tools)
	}
	if len(r.Messages) != 4 {
		t.Fatalf("%d messages", len(r.Messages))
	}
	if m := r.Messages[0]; m.Role != "user" || m.Text() != "look at this" || !reflect.DeepEqual(m.BlockTypes(), []string{"text", "image"}) {
		t.Errorf("message 0: %s %q %v", m.Role, m.Text(), m.BlockTypes())
	}
	var img struct {
		Source struct {
			Data string `json:"data"`
		} `json:"source"`
	}
	if err := json.Unmarshal(r.Messages[0].Content[1], &img); err != nil || img.Source.Data != "iVBORw0KGgo=" {
		t.Errorf("image block kept as %s", r.Messages[0].Content[1])
	}
	if m := r.Messages[1]; m.Role != "assistant" || m.Text() != "running" {
		t.Errorf("message 1: %s %q", m.Role, m.Text())
	}
	wantResults := []ToolResult{{ToolUseID: "toolu_a", Content: "file1\nfile2"}, {ToolUseID: "toolu_b", Content: "boom", IsError: true}}
	if got := r.ToolResults(); !reflect.DeepEqual(got, wantResults) {
		t.Errorf("tool results %+v", got)
	}
	if r.LastUserText() != "plain string prompt" || r.Messages[3].Text() != "plain string prompt" {
		t.Errorf("last user text %q", r.LastUserText())
	}
	if r.PromptCount("plain string prompt") != 1 || r.PromptCount(" look at this\n") != 1 || r.PromptCount("running") != 0 || r.PromptCount("look") != 0 {
		t.Errorf("prompt counts %d %d %d %d", r.PromptCount("plain string prompt"), r.PromptCount(" look at this\n"), r.PromptCount("running"), r.PromptCount("look"))
	}
	if !json.Valid(r.Body) || !strings.Contains(string(r.Body), "plain string prompt") {
		t.Errorf("raw body not kept")
	}
	if reqs[1].System != "string system" || reqs[1].Stream {
		t.Errorf("second request: system %q stream %v", reqs[1].System, reqs[1].Stream)
	}
	if got := srv.MainRequests(); len(got) != 2 || got[1].Seq != 2 {
		t.Errorf("main requests %d", len(got))
	}
	// Both are refused (an unknown model, no max_tokens) and recorded all
	// the same.
	if reqs[0].Invalid != "model: claude-test-2" || reqs[1].Invalid != "max_tokens: Field required" || len(srv.Invalid()) != 2 {
		t.Errorf("refusals %q, %q, %d", reqs[0].Invalid, reqs[1].Invalid, len(srv.Invalid()))
	}
}

func TestRecordingDropsSecrets(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	post(t, client(t), srv, "/v1/messages", messagesBody(true, "x")).Body.Close()
	r := srv.Requests()[0]
	if r.Header.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("ordinary header dropped: %v", r.Header)
	}
	for k, v := range r.Header {
		if strings.Contains(strings.Join(v, " "), "sk-ant") {
			t.Errorf("header %s keeps a secret", k)
		}
	}
	if r.Header.Get("X-Api-Key") != "" || r.Header.Get("Authorization") != "" {
		t.Errorf("auth headers recorded: %v", r.Header)
	}
	for _, h := range []string{"X-Api-Key", "Authorization", "Proxy-Authorization", "Cookie", "X-Auth-Token", "anthropic-session-key"} {
		if !secretHeader(h) {
			t.Errorf("%s not treated as secret", h)
		}
	}
	for _, h := range []string{"Anthropic-Version", "Anthropic-Beta", "X-Claude-Code-Session-Id", "User-Agent", "Content-Type"} {
		if secretHeader(h) {
			t.Errorf("%s treated as secret", h)
		}
	}
}

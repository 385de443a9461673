package offlinemodel

import (
	"encoding/json"
	"strings"
	"testing"
)

// Message builders for validation tests.
func userText(text string) map[string]any {
	return map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": text}}}
}

func assistantText(text string) map[string]any {
	return map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": text}}}
}

func systemMsg(text string) map[string]any {
	return map[string]any{"role": "system", "content": text}
}

func assistantUses(ids ...string) map[string]any {
	blocks := []any{map[string]any{"type": "text", "text": "calling"}}
	for _, id := range ids {
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{"command": "true"}})
	}
	return map[string]any{"role": "assistant", "content": blocks}
}

func userResults(ids ...string) map[string]any {
	var blocks []any
	for _, id := range ids {
		blocks = append(blocks, map[string]any{"type": "tool_result", "tool_use_id": id, "content": "ok"})
	}
	return map[string]any{"role": "user", "content": blocks}
}

// body is a request body with the CLI's shape around msgs.
func body(msgs ...map[string]any) map[string]any {
	if msgs == nil {
		msgs = []map[string]any{}
	}
	return map[string]any{
		"model":      DefaultModel,
		"max_tokens": 128000,
		"stream":     true,
		"system":     []any{map[string]any{"type": "text", "text": "You are a test."}},
		"messages":   msgs,
	}
}

func with(b map[string]any, key string, v any) map[string]any {
	out := map[string]any{}
	for k, x := range b {
		out[k] = x
	}
	if v == nil {
		delete(out, key)
	} else {
		out[key] = v
	}
	return out
}

func TestValidateRules(t *testing.T) {
	t.Parallel()
	// The conversation shapes the pinned CLI sends, all valid.
	good := map[string]map[string]any{
		"first turn":            body(userText("hi"), systemMsg("# Environment")),
		"after a tool":          body(userText("hi"), systemMsg("env"), assistantUses("toolu_1"), userResults("toolu_1")),
		"parallel tools":        body(userText("hi"), assistantUses("toolu_1", "toolu_2"), userResults("toolu_2", "toolu_1")),
		"system after results":  body(userText("hi"), systemMsg("env"), assistantUses("toolu_1"), userResults("toolu_1"), systemMsg("more")),
		"two turns":             body(userText("a"), systemMsg("env"), assistantText("b"), userText("c")),
		"string content":        body(map[string]any{"role": "user", "content": "hi"}),
		"final empty assistant": body(userText("hi"), map[string]any{"role": "assistant", "content": []any{}}),
		"nested result text": body(userText("hi"), assistantUses("toolu_1"), map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": []any{map[string]any{"type": "text", "text": "out"}}},
			map[string]any{"type": "text", "text": "and more"},
		}}),
		"string system":      with(body(userText("hi")), "system", "plain"),
		"no system":          with(body(userText("hi")), "system", nil),
		"largest max_tokens": with(body(userText("hi")), "max_tokens", 128000),
		"a model added":      with(body(userText("hi")), "model", "claude-custom-1"),
	}
	lookup := func(id string) (Model, bool) {
		if id == "claude-custom-1" {
			return Model{}, true
		}
		return BuiltinModel(id)
	}
	for name, b := range good {
		raw, _ := json.Marshal(b)
		if v := validate(raw, false, lookup); v != nil {
			t.Errorf("%s: refused: %d %s %s", name, v.status, v.errType, v.msg)
		}
	}

	bad := []struct {
		name   string
		body   map[string]any
		status int
		msg    string // a part of the message
	}{
		{"no model", with(body(userText("hi")), "model", nil), 400, "model: Field required"},
		{"unknown model", with(body(userText("hi")), "model", "claude-nonexistent-9"), 404, "model: claude-nonexistent-9"},
		{"no max_tokens", with(body(userText("hi")), "max_tokens", nil), 400, "max_tokens: Field required"},
		{"zero max_tokens", with(body(userText("hi")), "max_tokens", 0), 400, "max_tokens: Input should be greater than or equal to 1"},
		{"negative max_tokens", with(body(userText("hi")), "max_tokens", -5), 400, "greater than or equal to 1"},
		{"fractional max_tokens", with(body(userText("hi")), "max_tokens", 1.5), 400, "max_tokens: Input should be a valid integer"},
		{"max_tokens over the model's", with(body(userText("hi")), "max_tokens", 128001), 400,
			"max_tokens: 128001 > 128000, which is the maximum allowed number of output tokens for claude-opus-5-5"},
		{"no messages", with(body(), "messages", nil), 400, "messages: Field required"},
		{"empty messages", body(), 400, "messages: at least one message is required"},
		{"assistant first", body(assistantText("hi"), userText("x")), 400, `messages: first message must use the "user" role`},
		{"system first", body(systemMsg("env"), userText("x")), 400, `first message must use the "user" role`},
		{"unknown role", body(userText("hi"), map[string]any{"role": "tool", "content": "x"}), 400, "messages.1.role: Input should be"},
		{"two users", body(userText("a"), userText("a")), 400,
			`messages.1: roles must alternate between "user" and "assistant", but found multiple "user" roles in a row`},
		{"two users around a system message", body(userText("a"), systemMsg("env"), userText("a")), 400, `multiple "user" roles in a row`},
		{"two assistants", body(userText("a"), assistantText("b"), assistantText("c")), 400, `multiple "assistant" roles in a row`},
		{"empty text", body(userText("")), 400, "messages.0.content.0: text content blocks must be non-empty"},
		{"blank text", body(userText(" \n\t")), 400, "messages.0.content.0: text content blocks must contain non-whitespace text"},
		{"empty string content", body(map[string]any{"role": "user", "content": ""}), 400, "text content blocks must be non-empty"},
		{"empty assistant text", body(userText("a"), assistantText(""), userText("b")), 400, "messages.1.content.0: text content blocks must be non-empty"},
		{"empty system text", with(body(userText("hi")), "system", []any{map[string]any{"type": "text", "text": ""}}), 400,
			"system.0: text content blocks must be non-empty"},
		{"empty text in a result", body(userText("hi"), assistantUses("toolu_1"), map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": []any{map[string]any{"type": "text", "text": " "}}},
		}}), 400, "messages.2.content.0.content.0: text content blocks must contain non-whitespace text"},
		{"empty user content", body(map[string]any{"role": "user", "content": []any{}}), 400,
			"messages.0: all messages must have non-empty content except for the optional final assistant message"},
		{"empty assistant content mid-conversation", body(userText("a"), map[string]any{"role": "assistant", "content": []any{}}, userText("b")), 400,
			"messages.1: all messages must have non-empty content"},
		{"unanswered tool_use", body(userText("a"), assistantUses("toolu_1"), userText("b")), 400,
			"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1. Each `tool_use` block must have a corresponding `tool_result` block in the next message."},
		{"one of two unanswered", body(userText("a"), assistantUses("toolu_1", "toolu_2"), userResults("toolu_1")), 400,
			"immediately after: toolu_2."},
		{"tool_use last", body(userText("a"), assistantUses("toolu_1")), 400, "`tool_use` ids were found without `tool_result` blocks"},
		{"result a message late", body(userText("a"), assistantUses("toolu_1"), userResults("toolu_1"), assistantText("x"), userResults("toolu_1")), 400,
			"messages.4.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_1. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."},
		{"system message between use and result", body(userText("a"), assistantUses("toolu_1"), systemMsg("env"), userResults("toolu_1")), 400,
			"`tool_use` ids were found without `tool_result` blocks immediately after"},
		{"orphan result", body(userText("a"), assistantText("b"), userResults("toolu_9")), 400, "unexpected `tool_use_id` found in `tool_result` blocks: toolu_9"},
		{"result in the first message", body(userResults("toolu_9")), 400, "unexpected `tool_use_id`"},
		{"duplicate tool_use id", body(userText("a"), assistantUses("toolu_1"), userResults("toolu_1"), assistantUses("toolu_1"), userResults("toolu_1")), 400,
			"messages.3.content.1: `tool_use` ids must be unique"},
		{"tool_use in a user message", body(map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{}},
		}}), 400, "`tool_use` blocks are only allowed in assistant messages"},
		{"tool_use without id", body(userText("a"), map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "tool_use", "name": "Bash", "input": map[string]any{}},
		}}), 400, "messages.1.content.0.id: Field required"},
		{"block without type", body(map[string]any{"role": "user", "content": []any{map[string]any{"text": "x"}}}), 400, "messages.0.content.0.type: Field required"},
	}
	for _, tc := range bad {
		raw, _ := json.Marshal(tc.body)
		v := validate(raw, false, lookup)
		if v == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		wantType := "invalid_request_error"
		if tc.status == 404 {
			wantType = "not_found_error"
		}
		if v.status != tc.status || v.errType != wantType || !strings.Contains(v.msg, tc.msg) {
			t.Errorf("%s: %d %s %q, want %d %s %q", tc.name, v.status, v.errType, v.msg, tc.status, wantType, tc.msg)
		}
	}
}

func TestValidateCountTokens(t *testing.T) {
	t.Parallel()
	// count_tokens takes no max_tokens; the rest is checked as for messages.
	ok, _ := json.Marshal(with(body(userText("hi")), "max_tokens", nil))
	if v := validate(ok, true, BuiltinModel); v != nil {
		t.Errorf("count_tokens without max_tokens refused: %s", v.msg)
	}
	bad, _ := json.Marshal(with(body(userText("a"), userText("b")), "max_tokens", nil))
	if v := validate(bad, true, BuiltinModel); v == nil || !strings.Contains(v.msg, "roles must alternate") {
		t.Errorf("count_tokens with two user messages: %+v", v)
	}
}

func TestCapturedRequestsAreValid(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"main_first", "main_tool_result", "main_no_tools", "main_no_thinking", "subagent", "compact",
		"hook_pretooluse", "hook_stop", "count_tokens"} {
		c := loadCaptured(t, name)
		if v := validate(c.Body, name == "count_tokens", BuiltinModel); v != nil {
			t.Errorf("%s: refused: %d %s", name, v.status, v.msg)
		}
	}
}

func TestInvalidRequestIsRefusedAndRecorded(t *testing.T) {
	t.Parallel()
	srv := startServerAllowInvalid(t, Config{})
	srv.Enqueue(Reply(Text("kept for a valid request")))
	c := client(t)

	// A malformed resume: the tool's result went missing.
	resp := post(t, c, srv, "/v1/messages?beta=true", body(userText("a"), assistantUses("toolu_1"), userText("b")))
	var e apiError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 400 || e.Type != "error" || e.Error.Type != "invalid_request_error" ||
		!strings.Contains(e.Error.Message, "toolu_1") || e.RequestID != resp.Header.Get("Request-Id") {
		t.Errorf("answer %d %+v", resp.StatusCode, e)
	}
	// An unknown model: 404, as the API answers it.
	resp = post(t, c, srv, "/v1/messages", with(body(userText("a")), "model", "claude-nonexistent-9"))
	e = apiError{}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != 404 || e.Error.Type != "not_found_error" || e.Error.Message != "model: claude-nonexistent-9" {
		t.Errorf("unknown model: %d %+v", resp.StatusCode, e)
	}
	// Refusals consume nothing scripted.
	if srv.Pending() != 1 || srv.Unscripted() != 0 {
		t.Errorf("pending %d unscripted %d", srv.Pending(), srv.Unscripted())
	}

	bad := srv.Invalid()
	if len(bad) != 2 || bad[0].Seq != 1 || bad[0].Class != ClassMain || bad[0].Status != 400 || bad[0].Path != "/v1/messages" ||
		bad[1].Status != 404 || bad[1].Model != "claude-nonexistent-9" {
		t.Fatalf("refusals %+v", bad)
	}
	if reqs := srv.Requests(); len(reqs) != 2 || reqs[0].Invalid != bad[0].Message || reqs[1].Invalid != bad[1].Message {
		t.Errorf("recorded requests %+v", reqs)
	}
	err := srv.CheckValid()
	if err == nil || !strings.Contains(err.Error(), "refused 2 invalid request(s)") || !strings.Contains(err.Error(), "model: claude-nonexistent-9") {
		t.Errorf("CheckValid: %v", err)
	}
	if len(srv.Ledger()) != 0 {
		t.Errorf("refusals billed: %+v", srv.Ledger())
	}

	// The server goes on answering valid requests.
	resp = post(t, c, srv, "/v1/messages", body(userText("a")))
	if a := assemble(t, readSSE(t, resp.Body)); len(a.Blocks) != 1 || a.Blocks[0]["text"] != "kept for a valid request" {
		t.Errorf("valid request after refusals: %+v", a.Blocks)
	}
}

func TestConfigModels(t *testing.T) {
	t.Parallel()
	price := Price{Input: 1, Output: 2}
	srv := startServer(t, Config{Models: map[string]Model{"claude-custom-1": {Price: price, MaxOutputTokens: 1000}}})
	c := client(t)
	resp := post(t, c, srv, "/v1/messages", with(with(body(userText("a")), "model", "claude-custom-1"), "max_tokens", 1000))
	readSSE(t, resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	l := srv.Ledger()
	if len(l) != 1 || l[0].Model != "claude-custom-1" || l[0].CostUSD != price.Cost(l[0].Usage) || l[0].CostUSD <= 0 {
		t.Errorf("ledger %+v", l)
	}
}

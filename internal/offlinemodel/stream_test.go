package offlinemodel

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestStreamEventSequenceAndReassembly(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	longText := "Hello from the fake API — with ünïcödé, split into several deltas."
	input := map[string]any{"command": "echo hi", "description": "Say hi — «quoted»", "nested": map[string]any{"n": 3.0}}
	srv.Enqueue(Reply(
		Thinking("Let me think about this request for a while."),
		Text(longText),
		ToolUseID("toolu_explicit", "Bash", input),
		UseWrite("/tmp/x.txt", "content"),
	))

	resp := post(t, client(t), srv, "/v1/messages?beta=true", messagesBody(true, "hi"))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	events := readSSE(t, resp.Body)

	if events[1].Name != "ping" {
		t.Errorf("event after message_start is %q, want ping", events[1].Name)
	}
	var want []string
	want = append(want, "message_start")
	for range 4 {
		want = append(want, "content_block_start", "content_block_delta…", "content_block_stop")
	}
	want = append(want, "message_delta", "message_stop")
	var got []string
	for _, n := range names(events) {
		if n == "content_block_delta" {
			if got[len(got)-1] == "content_block_delta…" {
				continue
			}
			n = "content_block_delta…"
		}
		got = append(got, n)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("event sequence\n got %v\nwant %v", got, want)
	}

	a := assemble(t, events)
	if !strings.HasPrefix(a.ID, "msg_") || a.Model != DefaultModel {
		t.Errorf("message id %q model %q", a.ID, a.Model)
	}
	if len(a.Blocks) != 4 {
		t.Fatalf("%d blocks", len(a.Blocks))
	}
	th := a.Blocks[0]
	if th["type"] != "thinking" || th["thinking"] != "Let me think about this request for a while." || th["signature"] == "" {
		t.Errorf("thinking block %v", th)
	}
	if a.Blocks[1]["type"] != "text" || a.Blocks[1]["text"] != longText {
		t.Errorf("text block %v", a.Blocks[1])
	}
	if a.Deltas[1] < 3 {
		t.Errorf("text came in %d deltas, want several", a.Deltas[1])
	}
	// One thinking_delta at least, then one signature_delta.
	if a.Deltas[0] < 2 {
		t.Errorf("thinking came in %d deltas", a.Deltas[0])
	}
	tu := a.Blocks[2]
	if tu["type"] != "tool_use" || tu["id"] != "toolu_explicit" || tu["name"] != "Bash" || !reflect.DeepEqual(tu["input"], input) {
		t.Errorf("tool_use block %v", tu)
	}
	if a.Deltas[2] < 3 {
		t.Errorf("tool input came in %d deltas, want several", a.Deltas[2])
	}
	w := a.Blocks[3]
	if id, _ := w["id"].(string); !strings.HasPrefix(id, "toolu_") || len(id) < 20 {
		t.Errorf("generated tool id %q", id)
	}
	if want := map[string]any{"file_path": "/tmp/x.txt", "content": "content"}; !reflect.DeepEqual(w["input"], want) {
		t.Errorf("Write input %v", w["input"])
	}
	if a.StopReason != "tool_use" || !a.Stopped {
		t.Errorf("stop reason %q, message_stop %v", a.StopReason, a.Stopped)
	}
	if a.Usage.InputTokens <= 0 || a.Usage.OutputTokens <= 0 || a.StartUsage.InputTokens != a.Usage.InputTokens {
		t.Errorf("usage start %+v final %+v", a.StartUsage, a.Usage)
	}
	// The final usage carries the cache fields too.
	var md struct {
		Usage map[string]any `json:"usage"`
	}
	for _, e := range events {
		if e.Name == "message_delta" {
			_ = json.Unmarshal(e.Data, &md)
		}
	}
	for _, k := range []string{"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"} {
		if _, ok := md.Usage[k]; !ok {
			t.Errorf("message_delta usage lacks %s: %v", k, md.Usage)
		}
	}
}

func TestStreamIDsAreFreshPerAnswer(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	r := Reply(UseBash("true"))
	srv.Enqueue(r, r)
	c := client(t)
	a1 := assemble(t, readSSE(t, post(t, c, srv, "/v1/messages", messagesBody(true, "1")).Body))
	a2 := assemble(t, readSSE(t, post(t, c, srv, "/v1/messages", messagesBody(true, "2")).Body))
	if a1.ID == a2.ID || a1.Blocks[0]["id"] == a2.Blocks[0]["id"] {
		t.Errorf("ids repeat: %s %v / %s %v", a1.ID, a1.Blocks[0]["id"], a2.ID, a2.Blocks[0]["id"])
	}
}

func TestDeltaSentHearsEachTextDeltaInOrder(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	var mu sync.Mutex
	var heard []string
	text := "twelve runes" + "another one!" + "tail"
	srv.Enqueue(Reply(Thinking("not text"), Text(text), UseBash("true")).WithDeltaSent(func(s string) {
		mu.Lock()
		heard = append(heard, s)
		mu.Unlock()
	}))
	readSSE(t, post(t, client(t), srv, "/v1/messages", messagesBody(true, "hi")).Body)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"twelve runes", "another one!", "tail"}; !reflect.DeepEqual(heard, want) {
		t.Errorf("heard %q, want %q", heard, want)
	}
}

func TestStreamUsageAndStopReasonOverride(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	u := Usage{InputTokens: 11, OutputTokens: 22, CacheCreationInputTokens: 33, CacheReadInputTokens: 44}
	srv.Enqueue(Reply(Text("cut")).WithUsage(u).WithStopReason("max_tokens"))
	a := assemble(t, readSSE(t, post(t, client(t), srv, "/v1/messages", messagesBody(true, "x")).Body))
	if a.Usage != u {
		t.Errorf("final usage %+v, want %+v", a.Usage, u)
	}
	if a.StartUsage.InputTokens != 11 || a.StartUsage.CacheReadInputTokens != 44 || a.StartUsage.OutputTokens != 1 {
		t.Errorf("message_start usage %+v", a.StartUsage)
	}
	if a.StopReason != "max_tokens" {
		t.Errorf("stop reason %q", a.StopReason)
	}
}

func TestNonStreamingMessage(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	srv.Enqueue(Reply(Thinking("hmm"), Text("answer"), ToolUseID("toolu_1", "Read", map[string]any{"file_path": "/etc/hosts"})))
	resp := post(t, client(t), srv, "/v1/messages", messagesBody(false, "x"))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var m struct {
		ID         string           `json:"id"`
		Type       string           `json:"type"`
		Role       string           `json:"role"`
		Model      string           `json:"model"`
		Content    []map[string]any `json:"content"`
		StopReason string           `json:"stop_reason"`
		Usage      map[string]int   `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.ID, "msg_") || m.Type != "message" || m.Role != "assistant" || m.Model != DefaultModel {
		t.Errorf("message %+v", m)
	}
	if len(m.Content) != 3 || m.Content[0]["signature"] == "" || m.Content[1]["text"] != "answer" ||
		!reflect.DeepEqual(m.Content[2]["input"], map[string]any{"file_path": "/etc/hosts"}) {
		t.Errorf("content %v", m.Content)
	}
	if m.StopReason != "tool_use" || m.Usage["output_tokens"] <= 0 {
		t.Errorf("stop %q usage %v", m.StopReason, m.Usage)
	}
	if _, ok := m.Usage["cache_read_input_tokens"]; !ok {
		t.Errorf("usage lacks cache fields: %v", m.Usage)
	}
}

func TestChunks(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "a", "exactly12run", "ünïcödé text that is longer than one chunk"} {
		parts := chunks(s, 5)
		if strings.Join(parts, "") != s {
			t.Errorf("chunks(%q) = %q", s, parts)
		}
		for _, p := range parts {
			if len([]rune(p)) > 5 {
				t.Errorf("chunk %q too long", p)
			}
		}
	}
}

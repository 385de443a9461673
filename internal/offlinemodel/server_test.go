package offlinemodel

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestStartRefusesNonLoopback(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "example.com:0", "[::]:0", "nonsense"} {
		if srv, err := Start(Config{Addr: addr}); err == nil {
			srv.Close()
			t.Errorf("Start(%q) accepted", addr)
		}
	}
	srv, err := Start(Config{Addr: "127.0.0.2:0"})
	if err != nil {
		t.Fatalf("127.0.0.2: %v", err)
	}
	if !strings.HasPrefix(srv.URL(), "http://127.0.0.2:") {
		t.Errorf("URL %q", srv.URL())
	}
	srv.Close()
}

func TestUnknownPathIs404(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	c := client(t)
	for _, path := range []string{"/v1/complete", "/v2/messages", "/"} {
		resp := post(t, c, srv, path, map[string]any{})
		var body apiError
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 404 || body.Type != "error" || body.Error.Type != "not_found_error" {
			t.Errorf("%s: %d %+v", path, resp.StatusCode, body)
		}
	}
	resp, err := c.Get(srv.URL() + "/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("GET /v1/messages: %d", resp.StatusCode)
	}
	// The CLI's connectivity probe.
	resp, err = c.Head(srv.URL() + "/api/hello")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("HEAD /api/hello: %d", resp.StatusCode)
	}
	for _, r := range srv.Requests() {
		if r.Class != ClassOther {
			t.Errorf("%s %s recorded as %s", r.Method, r.Path, r.Class)
		}
	}
	if n := len(srv.Requests()); n != 5 {
		t.Errorf("%d requests recorded, want 5", n)
	}
}

func TestInvalidBody(t *testing.T) {
	t.Parallel()
	srv := startServerAllowInvalid(t, Config{})
	resp, err := client(t).Post(srv.URL()+"/v1/messages", "application/json", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body apiError
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 400 || body.Error.Type != "invalid_request_error" {
		t.Errorf("%d %+v", resp.StatusCode, body)
	}
	if r := srv.Requests(); len(r) != 1 || r[0].Class != ClassOther || string(r[0].Body) != "{not json" {
		t.Errorf("recorded %+v", r)
	}

	if bad := srv.Invalid(); len(bad) != 1 || bad[0].Status != 400 || bad[0].Class != ClassOther {
		t.Errorf("refusals %v", bad)
	}

	small := startServerAllowInvalid(t, Config{MaxBodyBytes: 10})
	resp2 := post(t, client(t), small, "/v1/messages", messagesBody(true, "too big"))
	if resp2.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %d", resp2.StatusCode)
	}
	if bad := small.Invalid(); len(bad) != 1 || bad[0].Type != "request_too_large" {
		t.Errorf("refusals %v", bad)
	}
}

func TestCountTokens(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	c := client(t)
	count := func(text string) int {
		resp := post(t, c, srv, "/v1/messages/count_tokens?beta=true", map[string]any{
			"model": DefaultModel, "messages": []map[string]any{{"role": "user", "content": text}},
		})
		var out struct {
			InputTokens int `json:"input_tokens"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out.InputTokens
	}
	small, large := count("foo"), count(strings.Repeat("lorem ipsum ", 400))
	if small <= 0 || large <= small || large < 1000 {
		t.Errorf("estimates %d and %d", small, large)
	}
	if r := srv.Requests(); r[0].Class != ClassCountTokens || r[0].Model != DefaultModel {
		t.Errorf("recorded %s %q", r[0].Class, r[0].Model)
	}
}

func TestQueuesResponderAndDefault(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []Class
	srv := startServer(t, Config{
		DefaultText: "nothing scripted",
		Responder: func(r *Request) (Response, bool) {
			mu.Lock()
			seen = append(seen, r.Class)
			mu.Unlock()
			if strings.Contains(r.LastUserText(), "dynamic") {
				return Reply(Text("responder: " + r.LastUserText())), true
			}
			return Response{}, false
		},
	})
	srv.Enqueue(Reply(Text("one")), Reply(Text("two")))
	srv.EnqueueSubagent(Reply(Text("sub one")))
	c := client(t)
	text := func(body map[string]any) string {
		a := assemble(t, readSSE(t, post(t, c, srv, "/v1/messages", body).Body))
		return a.Blocks[0]["text"].(string)
	}
	sub := messagesBody(true, "sub")
	sub["system"] = "x-anthropic-billing-header: cc_version=1; cc_entrypoint=sdk-cli; cc_is_subagent=true;"

	got := []string{
		text(messagesBody(true, "a")),
		text(sub),
		text(messagesBody(true, "b")),
		text(sub),
		text(messagesBody(true, "dynamic please")),
		text(messagesBody(true, "c")),
	}
	want := []string{"one", "sub one", "two", "nothing scripted", "responder: dynamic please", "nothing scripted"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("answer %d = %q, want %q", i, got[i], want[i])
		}
	}
	// Only main requests answered by the default count as unscripted.
	if srv.Unscripted() != 1 {
		t.Errorf("unscripted %d, want 1", srv.Unscripted())
	}
	mu.Lock()
	defer mu.Unlock()
	if !equalClasses(seen, []Class{ClassSubagent, ClassMain, ClassMain}) {
		t.Errorf("responder saw %v", seen)
	}
}

func TestResponderAnswersAuxiliary(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Responder: func(r *Request) (Response, bool) {
		if r.Class == ClassAuxiliary {
			return Reply(Text(`{"ok":false,"reason":"demo says no"}`)), true
		}
		return Response{}, false
	}})
	srv.Enqueue(Reply(Text("main")))
	cap := loadCaptured(t, "hook_pretooluse")
	a := assemble(t, readSSE(t, post(t, client(t), srv, cap.URL, cap.Body).Body))
	if a.Blocks[0]["text"] != `{"ok":false,"reason":"demo says no"}` || srv.Pending() != 1 {
		t.Errorf("answer %v, pending %d", a.Blocks[0]["text"], srv.Pending())
	}
}

func TestBadScriptedResponse(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	srv.Enqueue(Reply(ToolUse("Bash", []string{"not", "an", "object"})), Reply(Block{Type: "image"}))
	c := client(t)
	for range 2 {
		resp := post(t, c, srv, "/v1/messages", messagesBody(true, "x"))
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		if resp.StatusCode != 500 || !strings.Contains(body.String(), "offline model") {
			t.Errorf("%d %s", resp.StatusCode, body.String())
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	const n = 16
	for i := range n {
		srv.Enqueue(Reply(Text("r"), UseBash("echo "+string(rune('a'+i)))))
	}
	c := client(t)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			// No t.Fatal off the test goroutine: errors only.
			b, _ := json.Marshal(messagesBody(true, "x"))
			resp, err := c.Post(srv.URL()+"/v1/messages", "application/json", bytes.NewReader(b))
			if err != nil {
				t.Errorf("POST: %v", err)
				return
			}
			defer resp.Body.Close()
			var out bytes.Buffer
			if _, err := out.ReadFrom(resp.Body); err != nil {
				t.Errorf("reading: %v", err)
			}
			if !strings.HasSuffix(out.String(), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
				t.Errorf("incomplete answer %q", out.String())
			}
			_ = srv.Requests()
			_ = srv.Pending()
		})
	}
	wg.Wait()
	if len(srv.MainRequests()) != n || srv.Pending() != 0 || srv.Unscripted() != 0 {
		t.Errorf("requests %d pending %d unscripted %d", len(srv.MainRequests()), srv.Pending(), srv.Unscripted())
	}
	seqs := map[int]bool{}
	for _, r := range srv.Requests() {
		seqs[r.Seq] = true
	}
	if len(seqs) != n {
		t.Errorf("sequence numbers not unique: %v", seqs)
	}
}

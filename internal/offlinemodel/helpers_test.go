package offlinemodel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// startServer starts a server for one test and closes it at cleanup. The
// test fails if the server refused a request as invalid: use
// startServerAllowInvalid where that is the point.
func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	srv := startServerAllowInvalid(t, cfg)
	t.Cleanup(func() {
		if err := srv.CheckValid(); err != nil {
			t.Error(err)
		}
	})
	return srv
}

// startServerAllowInvalid is startServer for tests that send invalid
// requests on purpose.
func startServerAllowInvalid(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return srv
}

// testWriter routes log output to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// client returns an HTTP client whose idle connections are closed at
// cleanup, so no goroutine outlives the test.
func client(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// post sends body as JSON to srv's path with a fake API key.
func post(t *testing.T, c *http.Client, srv *Server, path string, body any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "sk-ant-test-secret")
	req.Header.Set("Authorization", "Bearer sk-ant-test-secret")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// messagesBody is a minimal request body in the shape the CLI sends.
func messagesBody(stream bool, prompt string) map[string]any {
	return map[string]any{
		"model":      DefaultModel,
		"max_tokens": 1024,
		"stream":     stream,
		"system":     []map[string]any{{"type": "text", "text": "You are a test."}},
		"tools":      []map[string]any{{"name": "Bash", "input_schema": map[string]any{"type": "object"}}},
		"messages":   []map[string]any{{"role": "user", "content": prompt}},
	}
}

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	Name string
	Data json.RawMessage
}

// readSSE parses a whole event stream until EOF.
func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var events []sseEvent
	br := bufio.NewReader(r)
	var cur sseEvent
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = json.RawMessage(strings.TrimPrefix(line, "data: "))
		case line == "" && cur.Name != "":
			if !json.Valid(cur.Data) {
				t.Fatalf("event %s: invalid JSON data %q", cur.Name, cur.Data)
			}
			events = append(events, cur)
			cur = sseEvent{}
		}
		if errors.Is(err, io.EOF) {
			return events
		}
		if err != nil {
			t.Fatalf("reading stream: %v", err)
		}
	}
}

// readEvent reads the next event from br.
func readEvent(t *testing.T, br *bufio.Reader) sseEvent {
	t.Helper()
	var cur sseEvent
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading event: %v", err)
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = json.RawMessage(strings.TrimPrefix(line, "data: "))
		case line == "" && cur.Name != "":
			return cur
		}
	}
}

// names returns the event names, pings left out.
func names(events []sseEvent) []string {
	var out []string
	for _, e := range events {
		if e.Name != "ping" {
			out = append(out, e.Name)
		}
	}
	return out
}

// assembled is a message rebuilt from stream events, the way an API client
// does it.
type assembled struct {
	ID         string
	Model      string
	Blocks     []map[string]any
	StopReason string
	Usage      Usage
	StartUsage Usage
	Deltas     map[int]int // number of content_block_delta events per block
	Stopped    bool        // message_stop seen
	Error      *apiError   // the error event, if any
}

func assemble(t *testing.T, events []sseEvent) assembled {
	t.Helper()
	a := assembled{Deltas: map[int]int{}}
	partial := map[int]string{}
	for _, e := range events {
		var ev struct {
			Type    string `json:"type"`
			Index   int    `json:"index"`
			Message struct {
				ID    string `json:"id"`
				Model string `json:"model"`
				Usage Usage  `json:"usage"`
			} `json:"message"`
			ContentBlock map[string]any `json:"content_block"`
			Delta        struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				Thinking    string `json:"thinking"`
				Signature   string `json:"signature"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
			Usage Usage `json:"usage"`
		}
		if err := json.Unmarshal(e.Data, &ev); err != nil {
			t.Fatalf("event %s: %v", e.Name, err)
		}
		if ev.Type != e.Name {
			t.Errorf("event %q carries type %q", e.Name, ev.Type)
		}
		switch e.Name {
		case "message_start":
			a.ID, a.Model, a.StartUsage = ev.Message.ID, ev.Message.Model, ev.Message.Usage
		case "content_block_start":
			if ev.Index != len(a.Blocks) {
				t.Fatalf("content_block_start index %d, want %d", ev.Index, len(a.Blocks))
			}
			a.Blocks = append(a.Blocks, ev.ContentBlock)
		case "content_block_delta":
			b := a.Blocks[ev.Index]
			a.Deltas[ev.Index]++
			switch ev.Delta.Type {
			case "text_delta":
				b["text"] = b["text"].(string) + ev.Delta.Text
			case "thinking_delta":
				b["thinking"] = b["thinking"].(string) + ev.Delta.Thinking
			case "signature_delta":
				b["signature"] = b["signature"].(string) + ev.Delta.Signature
			case "input_json_delta":
				partial[ev.Index] += ev.Delta.PartialJSON
			default:
				t.Fatalf("unknown delta type %q", ev.Delta.Type)
			}
		case "content_block_stop":
			if p, ok := partial[ev.Index]; ok {
				var in any
				if err := json.Unmarshal([]byte(p), &in); err != nil {
					t.Fatalf("tool input of block %d is not JSON: %q", ev.Index, p)
				}
				a.Blocks[ev.Index]["input"] = in
			}
		case "message_delta":
			a.StopReason, a.Usage = ev.Delta.StopReason, ev.Usage
		case "message_stop":
			a.Stopped = true
		case "error":
			var ae apiError
			if err := json.Unmarshal(e.Data, &ae); err != nil {
				t.Fatal(err)
			}
			a.Error = &ae
		}
	}
	return a
}

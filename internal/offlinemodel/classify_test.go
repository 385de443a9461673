package offlinemodel

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// captured is a request body recorded from the real CLI (testdata/requests).
type captured struct {
	URL  string          `json:"url"`
	Body json.RawMessage `json:"body"`
}

func loadCaptured(t *testing.T, name string) captured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "requests", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var c captured
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

func TestClassifyCapturedRequests(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		want Class
	}{
		{"main_first", ClassMain},
		{"main_tool_result", ClassMain},
		{"main_no_tools", ClassMain},
		{"main_no_thinking", ClassMain},
		{"subagent", ClassSubagent},
		{"compact", ClassCompact},
		{"hook_pretooluse", ClassAuxiliary},
		{"hook_stop", ClassAuxiliary},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := loadCaptured(t, tc.name)
			var r Request
			if err := r.parseBody(c.Body); err != nil {
				t.Fatal(err)
			}
			if got := classifyMessages(&r); got != tc.want {
				t.Errorf("class %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCapturedRequestsOverHTTP replays the captured bodies against a server
// with one scripted main and one scripted subagent reply, and checks that
// each class took its own answer.
func TestCapturedRequestsOverHTTP(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	srv.Enqueue(Reply(Text("main scripted")))
	srv.EnqueueSubagent(Reply(Text("subagent scripted")))
	c := client(t)

	answer := func(name string) string {
		cap := loadCaptured(t, name)
		resp := post(t, c, srv, cap.URL, json.RawMessage(cap.Body))
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", name, resp.StatusCode)
		}
		var stream struct {
			Stream bool `json:"stream"`
		}
		_ = json.Unmarshal(cap.Body, &stream)
		if !stream.Stream {
			var out bytes.Buffer
			_, _ = out.ReadFrom(resp.Body)
			return out.String()
		}
		a := assemble(t, readSSE(t, resp.Body))
		if len(a.Blocks) != 1 {
			t.Fatalf("%s: %d blocks", name, len(a.Blocks))
		}
		return a.Blocks[0]["text"].(string)
	}

	// Side queries first: they must not take the scripted answers.
	if got := answer("hook_pretooluse"); got != `{"ok":true,"reason":"`+autoString+`"}` {
		t.Errorf("hook answer %s", got)
	}
	if got := answer("compact"); !bytes.Contains([]byte(got), []byte("<summary>")) {
		t.Errorf("compact answer %q", got)
	}
	if got := answer("count_tokens"); !bytes.Contains([]byte(got), []byte(`"input_tokens":`)) {
		t.Errorf("count_tokens answer %q", got)
	}
	if got := answer("subagent"); got != "subagent scripted" {
		t.Errorf("subagent answer %q", got)
	}
	if got := answer("main_first"); got != "main scripted" {
		t.Errorf("main answer %q", got)
	}
	if srv.Unscripted() != 0 || srv.Pending() != 0 {
		t.Errorf("unscripted %d pending %d", srv.Unscripted(), srv.Pending())
	}
	var classes []Class
	for _, r := range srv.Requests() {
		classes = append(classes, r.Class)
	}
	want := []Class{ClassAuxiliary, ClassCompact, ClassCountTokens, ClassSubagent, ClassMain}
	if !equalClasses(classes, want) {
		t.Errorf("recorded classes %v, want %v", classes, want)
	}
}

func equalClasses(a, b []Class) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestValueForSchema(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object","required":["ok","n","kind","tags","opt"],"properties":{
		"ok":{"type":"boolean"},"n":{"type":"integer","minimum":3},"kind":{"enum":["a","b"]},
		"tags":{"type":"array","minItems":2,"items":{"type":"string"}},
		"opt":{"type":["null","string"]},"extra":{"type":"string"}}}`
	var s any
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(valueFor(s))
	want := `{"kind":"a","n":3,"ok":true,"opt":"` + autoString + `","tags":["` + autoString + `","` + autoString + `"]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}

	// A schema that would build 1e9 values stays within the budget.
	var huge any
	_ = json.Unmarshal([]byte(`{"type":"array","minItems":1000,"items":{"type":"array","minItems":1000,"items":{"type":"array","minItems":1000}}}`), &huge)
	b, _ := json.Marshal(valueFor(huge))
	if len(b) > 100_000 {
		t.Errorf("huge schema gave %d bytes", len(b))
	}
}

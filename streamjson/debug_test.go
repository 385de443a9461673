package streamjson

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
)

func TestDebugCaptureOpenClose(t *testing.T) {
	dir := t.TempDir()
	// A nil capture (debug capture off) does nothing and passes events through.
	var d *DebugCapture
	d.RawLine([]byte("x"))
	d.Event(events.AgentEvent{Type: events.TypeInterrupted})
	rec := &recorder{}
	d.Sink(rec).Emit(events.AgentEvent{Type: events.TypeInterrupted})
	if err := d.Close(); err != nil || len(rec.evs) != 1 {
		t.Fatalf("nil capture: %v, %d events", err, len(rec.evs))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a disabled capture wrote %d files", len(entries))
	}

	d, err := OpenDebugCapture(DebugConfig{Dir: dir, AgentID: "a1"})
	if err != nil || d == nil {
		t.Fatalf("enabled: %v, %v", d, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := OpenDebugCapture(DebugConfig{Dir: dir}); err == nil {
		t.Fatal("a capture without an agent id opened")
	}
}

// TestDebugCaptureSession captures a recorded session the way the activity would: the raw-line
// tap sees every stdout line, the sink wrapper every event.
func TestDebugCaptureSession(t *testing.T) {
	dir := t.TempDir()
	d, err := OpenDebugCapture(DebugConfig{Dir: dir, AgentID: "task/7 attempt:1", Secrets: []string{"hunter2-secret-token"}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/recorded/tools-partial.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	// Lines carrying secrets, as if the CLI had leaked them.
	leaky := `{"type":"system","subtype":"debug","a":"hunter2-secret-token","b":"sk-ant-test-from-the-environment-123","c":"sk-ant-api03-AbCdEf_123-xyz"}` + "\n"
	input := append(append([]byte(nil), raw...), leaky...)

	rec := &recorder{}
	a, err := New(Config{Sink: d.Sink(rec), PartialMessages: true})
	if err != nil {
		t.Fatal(err)
	}
	rd := claudecode.NewReader(bytes.NewReader(input))
	lines := 0
	for {
		line, err := rd.ReadLine()
		if err != nil {
			break
		}
		lines++
		d.RawLine(line)
		m, err := claudecode.Decode(line)
		if err != nil {
			t.Fatal(err)
		}
		a.Handle(m)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	rawOut, err := os.ReadFile(filepath.Join(dir, "raw-streamjson-task_7_attempt_1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	normOut, err := os.ReadFile(filepath.Join(dir, "normalized-streamjson-task_7_attempt_1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// Raw lines are verbatim, except for secrets.
	if !bytes.HasPrefix(rawOut, raw) {
		t.Error("raw capture does not start with the transcript verbatim")
	}
	if got := bytes.Count(rawOut, []byte("\n")); got != lines {
		t.Errorf("raw capture has %d lines, want %d", got, lines)
	}
	for _, secret := range []string{"hunter2-secret-token", "sk-ant-test-from-the-environment-123", "sk-ant-api03"} {
		if bytes.Contains(rawOut, []byte(secret)) || bytes.Contains(normOut, []byte(secret)) {
			t.Errorf("capture contains the secret %q", secret)
		}
	}
	if !strings.Contains(string(rawOut), `"a":"[REDACTED]","b":"[REDACTED]","c":"[REDACTED]"`) {
		t.Errorf("secrets not replaced: %s", rawOut[len(raw):])
	}
	// Every event reached both the capture and the next sink, in order.
	evs := parseEvents(t, normOut)
	if len(evs) != len(rec.evs) || len(evs) == 0 {
		t.Fatalf("%d captured events, %d delivered", len(evs), len(rec.evs))
	}
	for i := range evs {
		if evs[i].Type != rec.evs[i].Type || evs[i].ToolCallID != rec.evs[i].ToolCallID {
			t.Fatalf("event %d: captured %s, delivered %s", i, evs[i].Type, rec.evs[i].Type)
		}
	}
	info, err := os.Stat(filepath.Join(dir, "raw-streamjson-task_7_attempt_1.jsonl"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("raw capture mode %v, %v", info.Mode(), err)
	}
}

package clitest

import (
	"context"
	"errors"
	"testing"

	"github.com/drover-run/drover/claudecode"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	h := &Harness{Root: "/tmp/TestX_1/001"}
	in := `{"cwd":"/tmp/TestX_1/001/dir","transcript_path":"/tmp/TestX_1/001/config/projects/-tmp-TestX-1-001-dir/s.jsonl"}`
	want := `{"cwd":"/work/dir","transcript_path":"/work/config/projects/-work-dir/s.jsonl"}`
	if got := string(h.Normalize([]byte(in))); got != want {
		t.Errorf("Normalize:\n got %s\nwant %s", got, want)
	}
}

// The id of one of our requests is learned from the CLI's answer; answers to the CLI's own
// requests (echoed under --replay-user-messages) are not taken for ours.
func TestRecorderLearnsOurRequestID(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	slot := r.reserve()
	r.tap([]byte(`{"type":"control_request","request_id":"cli-1","request":{"subtype":"can_use_tool"}}`))
	r.tap([]byte(`{"type":"control_response","response":{"subtype":"success","request_id":"cli-1","response":{}}}`))
	r.tap([]byte(`{"type":"system","subtype":"init","session_id":"s"}`))
	r.tap([]byte(`{"response":{"request_id":"drover-ab-1","subtype":"success"},"type":"control_response"}`))
	if id := r.takeOurID(); id != "drover-ab-1" {
		t.Errorf("learned id %q, want drover-ab-1", id)
	}
	r.fill(slot, []byte("ours"))
	r.wrote([]byte("after"))
	if got := r.stdinLines(); len(got) != 2 || string(got[0]) != "ours" || string(got[1]) != "after" {
		t.Errorf("stdin lines %q", got)
	}
	if len(r.stdoutLines()) != 4 || r.firstInit().IsZero() {
		t.Errorf("stdout %d lines, init at %v", len(r.stdoutLines()), r.firstInit())
	}
}

// A withdrawn request's answer is not recorded, because the client does not write it.
func TestRecordingHandlerSkipsWithdrawn(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	h := &recordingHandler{rec: rec}
	req := &claudecode.ControlRequest{RequestID: "cli-2", Subtype: claudecode.RequestCanUseTool, CanUseTool: &claudecode.CanUseTool{ToolName: "Bash"}}
	if _, err := h.HandleControl(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	want, _ := claudecode.MarshalControlResponse("cli-2", claudecode.DenyTool(claudecode.NoHandlerMessage, false))
	if got := rec.stdinLines(); len(got) != 1 || string(got[0]) != string(want) {
		t.Errorf("recorded %q, want %s", got, want)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("withdrawn"))
	_, _ = h.HandleControl(ctx, req)
	if n := len(rec.stdinLines()); n != 1 {
		t.Errorf("%d lines after a withdrawn request, want 1", n)
	}
}

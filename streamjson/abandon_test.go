package streamjson

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/drover-run/drover/events"
)

// A transcript that stops mid-turn (the CLI died) still closes its tool calls
// and says the turn ended without a result; a complete one gets nothing extra.
func TestNormalizeClosesATurnCutShort(t *testing.T) {
	raw, err := os.ReadFile("../claudecode/testdata/transcripts/bash-allow.jsonl")
	if err != nil {
		t.Skip("no recorded transcript:", err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	var cut []string
	for _, l := range lines {
		if strings.Contains(l, `"tool_use_result"`) {
			break // the tool never answers: the CLI died while it ran
		}
		cut = append(cut, l)
	}
	if len(cut) == len(lines) {
		t.Fatal("the transcript has no tool result to cut at")
	}

	evs := normalizeLines(t, cut)
	var open int
	var lastErr *events.ErrorInfo
	for _, ev := range evs {
		switch ev.Type {
		case events.TypeToolCall:
			open++
		case events.TypeToolUpdate:
			open--
			if ev.ToolStatus != events.ToolError {
				t.Errorf("a tool cut short ended %s", ev.ToolStatus)
			}
		case events.TypeError:
			lastErr = ev.Error
		case events.TypeComplete:
			t.Error("a turn with no result got a complete event")
		}
	}
	if open != 0 {
		t.Errorf("%d tool calls left open", open)
	}
	if lastErr == nil || lastErr.Kind != events.ErrorExecution || !strings.Contains(lastErr.Message, "without a result") {
		t.Errorf("last error = %+v, want the turn reported as ended without a result", lastErr)
	}

	for _, ev := range normalizeLines(t, lines) {
		if ev.Type == events.TypeError && strings.Contains(ev.Error.Message, "without a result") {
			t.Error("a complete transcript was reported as cut short")
		}
	}
}

func normalizeLines(t *testing.T, lines []string) []events.AgentEvent {
	t.Helper()
	var out bytes.Buffer
	if err := Normalize(strings.NewReader(strings.Join(lines, "\n")+"\n"), &out); err != nil {
		t.Fatal(err)
	}
	var evs []events.AgentEvent
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var ev events.AgentEvent
		if err := json.Unmarshal(l, &ev); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

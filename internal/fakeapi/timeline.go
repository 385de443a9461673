package fakeapi

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-run/drover/events"
)

// timeline.jsonl is the adapter's output (streamjson/testdata/golden) for recorded and scripted
// CLI sessions that between them hold every event type the adapter emits and every kind of
// normalized tool payload: denied tools and compaction, the tools without a permission, a
// permission withdrawn by an interrupt, tool results, an overloaded API, reasoning, a background
// subagent, file edits with diffs, a question and a plan.
//
//go:embed testdata/timeline.jsonl
var timelineJSONL []byte

// Timeline returns a recorded task's events, each an events.AgentEvent's JSON: the adapter's
// events of timeline.jsonl, followed by those the turn engine writes itself (a decision on one of
// the timeline's requests and a retried attempt) and a file search with its results, which no
// recording holds.
func Timeline() ([]json.RawMessage, error) {
	var out []json.RawMessage
	sc := bufio.NewScanner(bytes.NewReader(timelineJSONL))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	var lastRequest string
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev events.AgentEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("reading the recorded timeline: %w", err)
		}
		if ev.Type == events.TypePermissionRequest {
			lastRequest = ev.PendingID
		}
		out = append(out, append(json.RawMessage(nil), line...))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the recorded timeline: %w", err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, ev := range []events.AgentEvent{
		{Type: events.TypePermissionDecision, PendingID: lastRequest, ToolName: "ExitPlanMode",
			Decision: &events.Decision{Outcome: "allowed", By: "ada", At: at, Grant: "Bash(npm test:*)", NextMode: "acceptEdits"}},
		{Type: events.TypeToolCall, ToolCallID: "toolu_search", ToolName: "Grep", ToolTitle: "Grep TODO", ToolStatus: events.ToolRunning,
			Normalized: &events.NormalizedPayload{Kind: events.KindCodeSearch, CodeSearch: &events.CodeSearch{Pattern: "TODO", Path: "."}}},
		{Type: events.TypeToolUpdate, ToolCallID: "toolu_search", ToolName: "Grep", ToolTitle: "Grep TODO", ToolStatus: events.ToolComplete,
			Normalized: &events.NormalizedPayload{Kind: events.KindCodeSearch, CodeSearch: &events.CodeSearch{Pattern: "TODO", Path: ".",
				Output: &events.SearchOutput{Files: []string{"main.go", "notes/plan.md"}, FileCount: 2}}}},
		{Type: events.TypeTurnRetry, TurnRetry: &events.TurnRetry{Attempt: 1, Reason: "the worker was lost"}},
	} {
		b, err := json.Marshal(ev)
		if err != nil {
			return nil, fmt.Errorf("encoding the engine's events: %w", err)
		}
		out = append(out, b)
	}
	return out, nil
}

// Repeat returns n events taken from Timeline over and over, each pass with ids of its own (tool
// calls, messages, requests), so that a long task reads as many distinct calls and messages.
func Repeat(n int) ([]json.RawMessage, error) {
	base, err := Timeline()
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, 0, n)
	for pass := 0; len(out) < n; pass++ {
		for _, raw := range base {
			if len(out) == n {
				break
			}
			var ev events.AgentEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, fmt.Errorf("repeating the timeline: %w", err)
			}
			suffix := fmt.Sprintf("~%d", pass)
			for _, id := range []*string{&ev.ToolCallID, &ev.ParentToolCallID, &ev.MessageID, &ev.PendingID} {
				if *id != "" {
					*id += suffix
				}
			}
			b, err := json.Marshal(ev)
			if err != nil {
				return nil, fmt.Errorf("repeating the timeline: %w", err)
			}
			out = append(out, b)
		}
	}
	return out, nil
}

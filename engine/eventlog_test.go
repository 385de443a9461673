package engine

import (
	"testing"

	"github.com/drover-run/drover/events"
)

func TestCoalesceJoinsStreamedTextOfOneMessage(t *testing.T) {
	chunk := func(msg, text string) events.AgentEvent {
		return events.AgentEvent{Type: events.TypeMessageChunk, MessageID: msg, Text: text}
	}
	queued := []events.AgentEvent{
		chunk("m1", "Hel"), chunk("m1", "lo"), chunk("m1", ", world"),
		{Type: events.TypeToolCall, ToolCallID: "t1"},
		chunk("m1", " again"),
		{Type: events.TypeReasoning, MessageID: "m2", ReasoningText: "think"},
		{Type: events.TypeReasoning, MessageID: "m2", ReasoningText: "ing"},
		chunk("m2", "a"), {Type: events.TypeMessageChunk, MessageID: "m2", ParentToolCallID: "sub", Text: "b"},
		chunk("", "no id"), chunk("", "kept apart"),
	}
	batch, used := coalesce(queued, 100)
	if used != len(queued) {
		t.Fatalf("used %d of %d", used, len(queued))
	}
	want := []string{"Hello, world", "tool_call", " again", "thinking", "a", "b", "no id", "kept apart"}
	if len(batch) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(batch), len(want), batch)
	}
	for i, ev := range batch {
		got := ev.Text + ev.ReasoningText
		if ev.Type == events.TypeToolCall {
			got = "tool_call"
		}
		if got != want[i] {
			t.Errorf("event %d = %q, want %q", i, got, want[i])
		}
	}
	// The bound counts events after merging; what is left stays queued, in order.
	batch, used = coalesce(queued, 2)
	if len(batch) != 2 || used != 4 {
		t.Fatalf("bounded: %d events for %d queued, want 2 for 4", len(batch), used)
	}
}

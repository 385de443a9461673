package engine

import (
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
)

// A write whose reply was lost may still land after the log asked how far it got; the log then
// sends the batch again. The database refuses that copy, the log reads where it stands and goes
// on: every event is stored once, in order.
func TestEventLogStoresABatchOnceWhenAnEarlierCopyLanded(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	if _, err := store.BeginAttempt(ctx, db, store.AttemptStart{TaskID: "t", AttemptID: "a1", Turn: 1,
		Prompt: "p", PromptUUID: "00000000-0000-4000-8000-000000000001"}); err != nil {
		t.Fatal(err)
	}
	l := newEventLog(db, "t", "a1", 1, 1, slog.New(slog.DiscardHandler))
	for _, id := range []string{"t1", "t2", "t3"} {
		l.Emit(events.AgentEvent{Type: events.TypeToolCall, ToolCallID: id})
	}
	// What the log is about to send, stored as an earlier copy of it would have been, with the
	// log none the wiser (its view: a write that failed, outcome unknown, before it re-read).
	landed := []store.EventInput{
		{Turn: 1, Attempt: 1, Type: string(events.TypeToolCall), Payload: encode(events.AgentEvent{Type: events.TypeToolCall, ToolCallID: "t1"})},
		{Turn: 1, Attempt: 1, Type: string(events.TypeToolCall), Payload: encode(events.AgentEvent{Type: events.TypeToolCall, ToolCallID: "t2"})},
	}
	if _, _, err := store.AppendWriterEvents(ctx, db, "t", store.Writer{AttemptID: "a1", Through: 2}, landed); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	stored, err := store.ListEvents(ctx, db, "t", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range stored {
		var ev events.AgentEvent
		if err := json.Unmarshal(e.Payload, &ev); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ToolCallID)
	}
	if len(ids) != 3 || ids[0] != "t1" || ids[1] != "t2" || ids[2] != "t3" {
		t.Fatalf("stored tool calls %v, want [t1 t2 t3]", ids)
	}
	if got := l.LastSeq(); got != 3 {
		t.Fatalf("LastSeq = %d, want 3", got)
	}
}

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

package engine

import (
	"slices"
	"testing"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/streamjson"
)

// TestHoldSinkHoldsTheCompleteForItsCheckpoint: events before a turn's main complete pass at
// once; the complete and all after it wait for release, which gives the complete the checkpoint
// (not a subagent's) and keeps the order; after release events pass at once.
func TestHoldSinkHoldsTheCompleteForItsCheckpoint(t *testing.T) {
	var got []events.AgentEvent
	h := &holdSink{next: streamjson.SinkFunc(func(ev events.AgentEvent) { got = append(got, ev) })}
	complete := func(parent string) events.AgentEvent {
		return events.AgentEvent{Type: events.TypeComplete, ParentToolCallID: parent, Data: &events.Data{Completion: &events.Completion{CostUSD: 1}}}
	}
	h.Emit(events.AgentEvent{Type: events.TypeMessageChunk, Text: "a"})
	h.Emit(complete("toolu_sub"))
	if len(got) != 2 {
		t.Fatalf("%d events passed before the main complete, want 2", len(got))
	}
	main := complete("")
	h.Emit(main)
	h.Emit(events.AgentEvent{Type: events.TypeMessageChunk, Text: "after"})
	if len(got) != 2 {
		t.Fatalf("the complete or what follows it passed before release: %d events", len(got))
	}
	h.release("c0ffee")
	h.Emit(events.AgentEvent{Type: events.TypeMessageChunk, Text: "later"})
	var types []string
	for _, ev := range got {
		types = append(types, string(ev.Type)+ev.Text)
	}
	if want := []string{"message_chunka", "complete", "complete", "message_chunkafter", "message_chunklater"}; !slices.Equal(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	if got[1].Data.Completion.Checkpoint != "" || got[2].Data.Completion.Checkpoint != "c0ffee" {
		t.Errorf("checkpoints: subagent %q, main %q", got[1].Data.Completion.Checkpoint, got[2].Data.Completion.Checkpoint)
	}
	if main.Data.Completion.Checkpoint != "" {
		t.Error("release changed the event the CLI's adapter emitted")
	}
	var nilHold *holdSink
	nilHold.release("x") // an unmanaged attempt has none
}

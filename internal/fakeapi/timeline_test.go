package fakeapi

import (
	"encoding/json"
	"testing"

	"github.com/drover-run/drover/events"
)

// TestTimelineCoversEveryShape keeps the recorded timeline a test of every event type and every
// payload kind the events package defines.
func TestTimelineCoversEveryShape(t *testing.T) {
	t.Parallel()
	evs, err := Timeline()
	if err != nil {
		t.Fatal(err)
	}
	types, kinds := map[events.Type]bool{}, map[events.Kind]bool{}
	nested := false
	for _, raw := range evs {
		var ev events.AgentEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		types[ev.Type] = true
		if ev.Normalized != nil {
			kinds[ev.Normalized.Kind] = true
		}
		nested = nested || ev.ParentToolCallID != ""
	}
	for _, ty := range []events.Type{events.TypeSessionStatus, events.TypeAvailableCommands, events.TypeUserMessage,
		events.TypeMessageChunk, events.TypeReasoning, events.TypeToolCall, events.TypeToolUpdate, events.TypeContextWindow,
		events.TypeComplete, events.TypeError, events.TypeRateLimit, events.TypePermissionRequest,
		events.TypePermissionCancelled, events.TypePermissionDecision, events.TypePermissionDenied, events.TypeCompaction,
		events.TypeInterrupted, events.TypeSubagentTask, events.TypeTurnRetry} {
		if !types[ty] {
			t.Errorf("no %s event", ty)
		}
	}
	for _, k := range []events.Kind{events.KindReadFile, events.KindModifyFile, events.KindShellExec, events.KindCodeSearch,
		events.KindHTTPRequest, events.KindSubagentTask, events.KindCreateTask, events.KindManageTodos, events.KindGeneric,
		events.KindMisc} {
		if !kinds[k] {
			t.Errorf("no %s payload", k)
		}
	}
	if !nested {
		t.Error("no subagent's event")
	}
}

package events

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzPayloadJSON checks that whatever UnmarshalJSON accepts is a valid payload that encodes,
// and that encoding reaches a fixed point after one round (raw JSON inputs are compacted once).
func FuzzPayloadJSON(f *testing.F) {
	for _, tc := range validPayloads {
		f.Add([]byte(tc.json))
	}
	f.Add([]byte(`{"kind":"generic","generic":{"name":"x","input": { "a" : [1, 2] }}}`))
	f.Add([]byte(`{"kind":"shell_exec","shell_exec":{},"misc":{}}`))
	f.Add([]byte(`{"kind":"misc","misc":null,"generic":{"name":"x"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var p NormalizedPayload
		if err := json.Unmarshal(data, &p); err != nil {
			return
		}
		if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Unmarshal accepted an invalid payload %s: %v", data, err)
		}
		first, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("Marshal after Unmarshal(%s): %v", data, err)
		}
		var again NormalizedPayload
		if err := json.Unmarshal(first, &again); err != nil {
			t.Fatalf("Unmarshal of own output %s: %v", first, err)
		}
		second, err := json.Marshal(again)
		if err != nil {
			t.Fatalf("second Marshal: %v", err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("not stable:\n%s\n%s", first, second)
		}
	})
}

// FuzzEventJSON does the same for whole events.
func FuzzEventJSON(f *testing.F) {
	for _, tc := range sampleEvents {
		f.Add([]byte(tc.json))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ev AgentEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return
		}
		first, err := json.Marshal(ev)
		if err != nil {
			// Accepted input may hold values that cannot be encoded back (for example a time
			// outside years 0-9999 cannot be decoded in the first place, so nothing else may fail).
			t.Fatalf("Marshal after Unmarshal(%s): %v", data, err)
		}
		var again AgentEvent
		if err := json.Unmarshal(first, &again); err != nil {
			t.Fatalf("Unmarshal of own output %s: %v", first, err)
		}
		second, err := json.Marshal(again)
		if err != nil {
			t.Fatalf("second Marshal: %v", err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("not stable:\n%s\n%s", first, second)
		}
	})
}

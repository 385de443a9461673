package claudecode

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMarshalControlResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		payload any
		want    string
	}{
		{"allow with input", AllowTool(json.RawMessage(`{"command": "ls"}`), "toolu_1"),
			`{"type":"control_response","response":{"subtype":"success","request_id":"req-1","response":{"behavior":"allow","updatedInput":{"command":"ls"},"toolUseID":"toolu_1"}}}`},
		{"allow bare", AllowTool(nil, ""),
			`{"type":"control_response","response":{"subtype":"success","request_id":"req-1","response":{"behavior":"allow"}}}`},
		{"allow always", AllowTool(nil, "toolu_2").WithUpdatedPermissions(PermissionUpdate{
			Type: UpdateAddRules, Rules: []PermissionRule{{ToolName: "Bash", RuleContent: "npm test"}}, Behavior: BehaviorAllow, Destination: DestinationSession,
		}),
			`{"type":"control_response","response":{"subtype":"success","request_id":"req-1","response":{"behavior":"allow","updatedPermissions":[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"npm test"}],"behavior":"allow","destination":"session"}],"toolUseID":"toolu_2"}}}`},
		{"deny", DenyTool("not today", false),
			`{"type":"control_response","response":{"subtype":"success","request_id":"req-1","response":{"behavior":"deny","message":"not today"}}}`},
		{"deny and interrupt", DenyTool("stop", true),
			`{"type":"control_response","response":{"subtype":"success","request_id":"req-1","response":{"behavior":"deny","message":"stop","interrupt":true}}}`},
		{"pre tool use ask", PreToolUseDecision(DecisionAsk, "please confirm"),
			`{"type":"control_response","response":{"subtype":"success","request_id":"req-1","response":{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"please confirm"}}}}`},
		{"stop approve", StopApprove(""),
			`{"type":"control_response","response":{"subtype":"success","request_id":"req-1","response":{"decision":"approve"}}}`},
		{"stop block", StopBlock("uncommitted changes"),
			`{"type":"control_response","response":{"subtype":"success","request_id":"req-1","response":{"decision":"block","reason":"uncommitted changes"}}}`},
		{"stop halt", StopHalt("enough"),
			`{"type":"control_response","response":{"subtype":"success","request_id":"req-1","response":{"continue":false,"stopReason":"enough"}}}`},
		{"no opinion", HookOutput{},
			`{"type":"control_response","response":{"subtype":"success","request_id":"req-1","response":{}}}`},
		{"nil", nil,
			`{"type":"control_response","response":{"subtype":"success","request_id":"req-1","response":{}}}`},
		{"raw", json.RawMessage("{\n \"a\": 1\n}"),
			`{"type":"control_response","response":{"subtype":"success","request_id":"req-1","response":{"a":1}}}`},
	}
	for _, tt := range tests {
		got, err := MarshalControlResponse("req-1", tt.payload)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
	for _, bad := range []any{[]int{1}, "str", json.RawMessage(`{"a":`)} {
		if _, err := MarshalControlResponse("r", bad); err == nil {
			t.Errorf("MarshalControlResponse(%v) accepted a non-object payload", bad)
		}
	}
}

func TestMarshalControlError(t *testing.T) {
	t.Parallel()
	got := string(MarshalControlError(`id"1`, "no \"handler\"\n"))
	want := `{"type":"control_response","response":{"subtype":"error","request_id":"id\"1","error":"no \"handler\"\n"}}`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	// What we write must decode as what the CLI echoes back.
	m, err := Decode([]byte(got))
	if err != nil {
		t.Fatal(err)
	}
	if r := m.(*ControlResponse); r.Subtype != SubtypeError || r.RequestID != `id"1` || r.Error != "no \"handler\"\n" {
		t.Errorf("round trip = %+v", r)
	}
}

func TestMarshalControlRequest(t *testing.T) {
	t.Parallel()
	got, err := MarshalControlRequest("drover-1", RequestInitialize, InitializeRequest{
		Hooks: map[string][]HookMatcher{
			"PreToolUse": {{Matcher: "^Bash$", HookCallbackIDs: []string{"tool_approval"}}},
			"Stop":       {{HookCallbackIDs: []string{"stop_check"}}},
		},
		AppendSystemPrompt: "be brief",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"control_request","request_id":"drover-1","request":{"subtype":"initialize","hooks":{"PreToolUse":[{"matcher":"^Bash$","hookCallbackIds":["tool_approval"]}],"Stop":[{"hookCallbackIds":["stop_check"]}]},"appendSystemPrompt":"be brief"}}`
	if string(got) != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	for body, want := range map[any]string{
		nil:                          `{"type":"control_request","request_id":"x","request":{"subtype":"interrupt"}}`,
		struct{}{}:                   `{"type":"control_request","request_id":"x","request":{"subtype":"interrupt"}}`,
		struct{ Reason string }{"r"}: `{"type":"control_request","request_id":"x","request":{"subtype":"interrupt","Reason":"r"}}`,
	} {
		got, err := MarshalControlRequest("x", RequestInterrupt, body)
		if err != nil || string(got) != want {
			t.Errorf("body %#v: got %s, %v; want %s", body, got, err, want)
		}
	}
	if _, err := MarshalControlRequest("x", "s", []string{"a"}); err == nil {
		t.Error("a non-object body was accepted")
	}
	if _, err := MarshalControlRequest("", "s", nil); err == nil {
		t.Error("an empty request id was accepted")
	}
}

func TestMarshalPrompt(t *testing.T) {
	t.Parallel()
	got, err := MarshalPrompt(Prompt{Text: "hi", UUID: "11111111-2222-4333-8444-555555555555"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"hi"}]},"parent_tool_use_id":null,"uuid":"11111111-2222-4333-8444-555555555555"}`
	if string(got) != want {
		t.Errorf("got %s\nwant %s", got, want)
	}

	got, err = MarshalPrompt(Prompt{Text: "what is this?", Images: []Image{{MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}}}})
	if err != nil {
		t.Fatal(err)
	}
	want = `{"type":"user","message":{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}},{"type":"text","text":"what is this?"}]},"parent_tool_use_id":null}`
	if string(got) != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	// It decodes as the user message the CLI would echo.
	m, err := Decode(got)
	if err != nil {
		t.Fatal(err)
	}
	u := m.(*UserMessage)
	if b := u.Message.Content.Blocks; len(b) != 2 || b[0].Source == nil || b[0].Source.Data != "iVBORw==" || b[1].Text != "what is this?" {
		t.Errorf("decoded prompt = %+v", u.Message.Content)
	}

	for _, p := range []Prompt{
		{},
		{Text: "x", UUID: "not-a-uuid"},
		{Images: []Image{{MediaType: "image/tiff", Data: []byte{1}}}},
		{Images: []Image{{MediaType: "image/png"}}},
	} {
		if _, err := MarshalPrompt(p); err == nil {
			t.Errorf("MarshalPrompt(%+v) accepted an invalid prompt", p)
		}
	}
	if b, _ := MarshalPrompt(Prompt{Text: "line\nbreak"}); strings.Contains(string(b), "\n") {
		t.Error("a newline in the text reached the wire unescaped")
	}
}

func TestIsUUID(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"11111111-2222-4333-8444-555555555555": true,
		"ABCDEF01-2222-4333-8444-555555555555": true,
		"11111111-2222-4333-8444-55555555555":  false,
		"11111111x2222-4333-8444-555555555555": false,
		"g1111111-2222-4333-8444-555555555555": false,
		"":                                     false,
	} {
		if IsUUID(s) != want {
			t.Errorf("IsUUID(%q) = %v", s, !want)
		}
	}
}

package events

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

// sampleEvents has one event of every type with the JSON it must encode to: the field names are
// the stable JSON form.
var sampleEvents = []struct {
	ev   AgentEvent
	json string
}{
	{AgentEvent{Type: TypeSessionStatus, SessionID: "s1", Data: &Data{SessionStatus: SessionNew}},
		`{"type":"session_status","session_id":"s1","data":{"session_status":"new"}}`},
	{AgentEvent{Type: TypeAvailableCommands, SessionID: "s1", AvailableCommands: []Command{{Name: "compact", Description: "Compact", ArgumentHint: "<focus>"}, {Name: "review"}}},
		`{"type":"available_commands","session_id":"s1","available_commands":[{"name":"compact","description":"Compact","argument_hint":"\u003cfocus\u003e"},{"name":"review"}]}`},
	{AgentEvent{Type: TypeUserMessage, SessionID: "s1", Text: "hi", UUID: "u1"},
		`{"type":"user_message","session_id":"s1","text":"hi","uuid":"u1"}`},
	{AgentEvent{Type: TypeMessageChunk, SessionID: "s1", Text: "Hello", MessageID: "msg_1", ParentToolCallID: "toolu_p"},
		`{"type":"message_chunk","session_id":"s1","parent_tool_call_id":"toolu_p","text":"Hello","message_id":"msg_1"}`},
	{AgentEvent{Type: TypeReasoning, ReasoningText: "hmm", MessageID: "msg_1", Time: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)},
		`{"type":"reasoning","time":"2025-01-02T03:04:05.000000006Z","reasoning_text":"hmm","message_id":"msg_1"}`},
	{AgentEvent{Type: TypeToolCall, ToolCallID: "toolu_1", ToolName: "Bash", ToolTitle: "Run `ls`", ToolStatus: ToolRunning,
		Normalized: &NormalizedPayload{Kind: KindShellExec, ShellExec: &ShellExec{Command: "ls"}}},
		"{\"type\":\"tool_call\",\"tool_call_id\":\"toolu_1\",\"tool_name\":\"Bash\",\"tool_title\":\"Run `ls`\",\"tool_status\":\"running\",\"normalized\":{\"kind\":\"shell_exec\",\"shell_exec\":{\"command\":\"ls\"}}}"},
	{AgentEvent{Type: TypeToolUpdate, ToolCallID: "toolu_1", ToolStatus: ToolError},
		`{"type":"tool_update","tool_call_id":"toolu_1","tool_status":"error"}`},
	{AgentEvent{Type: TypeContextWindow, ContextWindow: NewContextWindow(200000, 200000)},
		`{"type":"context_window","context_window_size":200000,"context_window_used":200000,"context_window_remaining":0,"context_efficiency":0}`},
	{AgentEvent{Type: TypeComplete, SessionID: "s1", Data: &Data{Completion: &Completion{CostUSD: 0.5, TotalCostUSD: 1.5, DurationMS: 10, NumTurns: 2,
		InputTokens: 3, OutputTokens: 4, LastMessageUUID: "u2", SessionID: "s1", ResultUUID: "r1", StopReason: "end_turn", TerminalReason: "completed", Subtype: "success",
		Models: map[string]ModelUsage{"m": {InputTokens: 3, OutputTokens: 4, CostUSD: 0.5}}}}},
		`{"type":"complete","session_id":"s1","data":{"cost_usd":0.5,"total_cost_usd":1.5,"duration_ms":10,"num_turns":2,"input_tokens":3,"output_tokens":4,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"last_message_uuid":"u2","session_id":"s1","result_uuid":"r1","stop_reason":"end_turn","terminal_reason":"completed","subtype":"success","is_error":false,"models":{"m":{"input_tokens":3,"output_tokens":4,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost_usd":0.5}}}}`},
	{AgentEvent{Type: TypeError, Error: &ErrorInfo{Kind: ErrorAPI, Message: "API Error: 500", APIErrorStatus: 500, TerminalReason: "api_error"}},
		`{"type":"error","error":{"kind":"api_error","message":"API Error: 500","terminal_reason":"api_error","api_error_status":500}}`},
	{AgentEvent{Type: TypeRateLimit, RateLimitMessage: "retrying", RateLimit: &RateLimit{Source: RateLimitSourceAPIRetry, Attempt: 1, MaxRetries: 2, RetryDelayMS: 500, ErrorStatus: 529, Error: "overloaded"}},
		`{"type":"rate_limit","rate_limit_message":"retrying","rate_limit":{"source":"api_retry","attempt":1,"max_retries":2,"retry_delay_ms":500,"error_status":529,"error":"overloaded"}}`},
	{AgentEvent{Type: TypePermissionRequest, PendingID: "req1", ToolCallID: "toolu_1", ToolName: "Bash",
		Permission: &Permission{Input: json.RawMessage(`{"command":"rm x"}`), BlockedPath: "/etc", Suggestions: json.RawMessage(`[]`)}},
		`{"type":"permission_request","tool_call_id":"toolu_1","tool_name":"Bash","pending_id":"req1","permission":{"input":{"command":"rm x"},"suggestions":[],"blocked_path":"/etc"}}`},
	{AgentEvent{Type: TypePermissionCancelled, PendingID: "req1"},
		`{"type":"permission_cancelled","pending_id":"req1"}`},
	{AgentEvent{Type: TypePermissionDecision, PendingID: "req1", ToolName: "Bash",
		Decision: &Decision{Outcome: "allowed", By: "ana", Reason: "fine", Grant: "Bash(npm test:*)"}},
		`{"type":"permission_decision","tool_name":"Bash","pending_id":"req1","decision":{"outcome":"allowed","by":"ana","reason":"fine","grant":"Bash(npm test:*)"}}`},
	{AgentEvent{Type: TypePermissionDenied, ToolName: "Write", Permission: &Permission{Message: "denied"}},
		`{"type":"permission_denied","tool_name":"Write","permission":{"message":"denied"}}`},
	{AgentEvent{Type: TypeCompaction, Compaction: &Compaction{Phase: CompactionFinished, Trigger: "manual", PreTokens: 1234}},
		`{"type":"compaction","compaction":{"phase":"finished","trigger":"manual","pre_tokens":1234}}`},
	{AgentEvent{Type: TypeInterrupted, SessionID: "s1"},
		`{"type":"interrupted","session_id":"s1"}`},
	{AgentEvent{Type: TypeSubagentTask, ToolCallID: "toolu_2", Subagent: &SubagentProgress{Phase: SubagentStarted, TaskID: "t1", Description: "look"}},
		`{"type":"subagent_task","tool_call_id":"toolu_2","subagent":{"phase":"task_started","task_id":"t1","description":"look"}}`},
	{AgentEvent{Type: TypeTurnRetry, TurnRetry: &TurnRetry{Attempt: 1, Reason: "worker lost"}},
		`{"type":"turn_retry","turn_retry":{"attempt":1,"reason":"worker lost"}}`},
}

func TestEventJSONForm(t *testing.T) {
	t.Parallel()
	for _, tc := range sampleEvents {
		t.Run(string(tc.ev.Type), func(t *testing.T) {
			t.Parallel()
			got, err := json.Marshal(tc.ev)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(got) != tc.json {
				t.Errorf("Marshal:\n got %s\nwant %s", got, tc.json)
			}
			var back AgentEvent
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !reflect.DeepEqual(back, tc.ev) {
				t.Errorf("round trip:\n got %+v\nwant %+v", back, tc.ev)
			}
		})
	}
}

func TestEventTypesAllSampled(t *testing.T) {
	t.Parallel()
	all := []Type{TypeSessionStatus, TypeAvailableCommands, TypeUserMessage, TypeMessageChunk, TypeReasoning,
		TypeToolCall, TypeToolUpdate, TypeContextWindow, TypeComplete, TypeError, TypeRateLimit,
		TypePermissionRequest, TypePermissionCancelled, TypePermissionDecision, TypePermissionDenied, TypeCompaction,
		TypeInterrupted, TypeSubagentTask, TypeTurnRetry}
	seen := map[Type]bool{}
	for _, tc := range sampleEvents {
		seen[tc.ev.Type] = true
	}
	for _, typ := range all {
		if !seen[typ] {
			t.Errorf("no sample event of type %s", typ)
		}
	}
}

func TestEventWithInvalidPayloadFailsToEncode(t *testing.T) {
	t.Parallel()
	ev := AgentEvent{Type: TypeToolCall, Normalized: &NormalizedPayload{Kind: KindMisc}}
	if _, err := json.Marshal(ev); !errors.Is(err, ErrInvalidPayload) {
		t.Errorf("Marshal error = %v, want ErrInvalidPayload", err)
	}
	var back AgentEvent
	err := json.Unmarshal([]byte(`{"type":"tool_call","normalized":{"kind":"misc"}}`), &back)
	if !errors.Is(err, ErrInvalidPayload) {
		t.Errorf("Unmarshal error = %v, want ErrInvalidPayload", err)
	}
}

func TestNewContextWindow(t *testing.T) {
	t.Parallel()
	cases := []struct {
		size, used int64
		want       ContextWindow
	}{
		{200000, 50000, ContextWindow{Size: 200000, Used: 50000, Remaining: 150000, Efficiency: 0.75}},
		{100, 150, ContextWindow{Size: 100, Used: 150, Remaining: 0, Efficiency: 0}},
		{0, 10, ContextWindow{Size: 0, Used: 10}},
	}
	for _, c := range cases {
		if got := NewContextWindow(c.size, c.used); *got != c.want {
			t.Errorf("NewContextWindow(%d, %d) = %+v, want %+v", c.size, c.used, *got, c.want)
		}
	}
}

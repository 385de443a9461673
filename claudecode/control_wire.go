package claudecode

import "encoding/json"

// ControlRequest is a request of the CLI to us ({"type":"control_request","request_id":…,
// "request":{"subtype":…}}). Exactly one of CanUseTool and HookCallback is set for those subtypes;
// for any other subtype both are nil and Request holds the body.
type ControlRequest struct {
	line
	RequestID string
	Subtype   string
	// Request is the "request" object verbatim.
	Request      json.RawMessage
	CanUseTool   *CanUseTool
	HookCallback *HookCallback
}

// Type returns "control_request".
func (*ControlRequest) Type() string { return TypeControlRequest }

// CanUseTool asks whether a tool call may run (only with --permission-prompt-tool=stdio).
type CanUseTool struct {
	ToolName  string          `json:"tool_name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	// DisplayName, Title and Description are the CLI's words for the prompt, when it sends them.
	DisplayName           string          `json:"display_name,omitempty"`
	Title                 string          `json:"title,omitempty"`
	Description           string          `json:"description,omitempty"`
	PermissionSuggestions json.RawMessage `json:"permission_suggestions,omitempty"`
	BlockedPath           string          `json:"blocked_path,omitempty"`
	DecisionReason        string          `json:"decision_reason,omitempty"` // may carry ANSI escapes
	DecisionReasonType    string          `json:"decision_reason_type,omitempty"`
	DecisionReasonCode    string          `json:"decision_reason_code,omitempty"`
	AgentID               string          `json:"agent_id,omitempty"`
	MCPServer             string          `json:"mcp_server,omitempty"`
}

// HookCallback delivers a hook registered through initialize (HookMatcher.HookCallbackIDs).
type HookCallback struct {
	CallbackID string    `json:"callback_id"`
	Input      HookInput `json:"input"`
	ToolUseID  string    `json:"tool_use_id,omitempty"`
}

// HookInput is the hook's input. The common fields are decoded; Raw has all of it.
type HookInput struct {
	HookEventName  string          `json:"hook_event_name"` // PreToolUse, PostToolUse, Stop, …
	SessionID      string          `json:"session_id,omitempty"`
	TranscriptPath string          `json:"transcript_path,omitempty"`
	CWD            string          `json:"cwd,omitempty"`
	PermissionMode string          `json:"permission_mode,omitempty"`
	ToolName       string          `json:"tool_name,omitempty"`
	ToolInput      json.RawMessage `json:"tool_input,omitempty"`
	ToolUseID      string          `json:"tool_use_id,omitempty"`
	StopHookActive bool            `json:"stop_hook_active,omitempty"`
	// Raw is the input object verbatim.
	Raw json.RawMessage `json:"-"`
}

// ControlResponse answers one of our control requests ({"type":"control_response","response":
// {"subtype":"success"|"error","request_id":…,"response":{…}|"error":"…"}}). With
// --replay-user-messages the CLI also echoes our own answers to its requests in this shape.
type ControlResponse struct {
	line
	Subtype   string // success or error
	RequestID string
	// Response is the payload of a success, verbatim (nil if absent).
	Response json.RawMessage
	// Error is the message of an error response.
	Error string
}

// Type returns "control_response".
func (*ControlResponse) Type() string { return TypeControlResponse }

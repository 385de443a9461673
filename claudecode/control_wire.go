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
	// DisplayName, Title and Description are the CLI's words for the prompt, when it sends them
	// (Description is the Bash command, or the file name of a file tool).
	DisplayName string `json:"display_name,omitempty"`
	Title       string `json:"title,omitempty" wire:"text"`
	Description string `json:"description,omitempty" wire:"text"`
	// PermissionSuggestions are the CLI's own "always allow" choices, an array of PermissionUpdate
	// (see Suggestions). The CLI sends none for a call a PreToolUse hook asked about.
	PermissionSuggestions json.RawMessage `json:"permission_suggestions,omitempty"`
	// BlockedPath is the path that made the CLI ask (a directory outside the allowed ones, a file
	// a command writes), when there is one.
	BlockedPath string `json:"blocked_path,omitempty" wire:"text"`
	// DecisionReason is why the CLI asks, in words (a hook's permissionDecisionReason, a safety
	// check's warning); it may carry ANSI escapes. DecisionReasonType names the kind: hook, mode,
	// rule, workingDir, safetyCheck, subcommandResults, classifier, …
	DecisionReason          string `json:"decision_reason,omitempty" wire:"text"`
	DecisionReasonType      string `json:"decision_reason_type,omitempty"`
	DecisionReasonCode      string `json:"decision_reason_code,omitempty"`
	DecisionReasonHookEvent string `json:"decision_reason_hook_event,omitempty"`
	// AgentID is set when a subagent makes the call (the agent_id of its frames).
	AgentID string `json:"agent_id,omitempty"`
	// MCPServer is set for an mcp__server__tool call.
	MCPServer *ToolServer `json:"mcp_server,omitempty"`
	// RequiresUserInteraction is set when the person must answer on the request itself
	// (AskUserQuestion, ExitPlanMode): no stored grant may answer it.
	RequiresUserInteraction bool `json:"requires_user_interaction,omitempty"`
	// SuppressAlwaysAllowRule is set when no "always allow" choice may be offered (a dangerous
	// command a safety check flagged).
	SuppressAlwaysAllowRule bool `json:"suppress_always_allow_rule,omitempty"`
}

// ToolServer names the MCP server behind a tool: its configured name and where its definition came
// from ("dynamic" for --mcp-config, "sdk", "plugin", a settings scope, …).
type ToolServer struct {
	Name   string `json:"name"`
	Source string `json:"source,omitempty"`
}

// Suggestions decodes PermissionSuggestions; malformed elements are skipped.
func (c *CanUseTool) Suggestions() []PermissionUpdate {
	u, _ := ParsePermissionUpdates(c.PermissionSuggestions)
	return u
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
	TranscriptPath string          `json:"transcript_path,omitempty" wire:"text"`
	CWD            string          `json:"cwd,omitempty"`
	PermissionMode string          `json:"permission_mode,omitempty"`
	ToolName       string          `json:"tool_name,omitempty"`
	ToolInput      json.RawMessage `json:"tool_input,omitempty"`
	ToolUseID      string          `json:"tool_use_id,omitempty"`
	// AgentID and AgentType are set when a subagent makes the call.
	AgentID   string      `json:"agent_id,omitempty"`
	AgentType string      `json:"agent_type,omitempty"`
	MCPServer *ToolServer `json:"mcp_server,omitempty"`
	// StopHookActive is set on a Stop hook when an earlier Stop hook of the same turn blocked.
	StopHookActive bool `json:"stop_hook_active,omitempty"`
	// LastAssistantMessage is the text the agent would stop on (Stop hooks).
	LastAssistantMessage string `json:"last_assistant_message,omitempty" wire:"text"`
	// Raw is the input object verbatim.
	Raw json.RawMessage `json:"-" wire:"verbatim"`
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

package claudecode

import "encoding/json"

// The decoders of the wire types (wire_decode.go) are generated from their struct tags: run go
// generate after changing a type here, in control_wire.go or in content.go. A json tag names the
// member, as for encoding/json; wire:"text" marks a string that seldom repeats (it is not interned);
// wire:"verbatim" on a json:"-" field keeps the whole object. See internal/wiregen.

// Message is one decoded line of the CLI's stdout. Its dynamic type is one of the pointer types of this
// package: *SystemInit, *SystemStatus, *SystemAPIRetry, *SystemCompactBoundary, *SystemTask,
// *SystemThinkingTokens, *SystemPermissionDenied, *SystemHook, *AssistantMessage, *UserMessage,
// *ResultMessage, *StreamEvent, *ControlRequest, *ControlCancelRequest, *ControlResponse,
// *RateLimitEvent, *CommandLifecycle, *Unknown (any other type or system subtype) or *Malformed (a line
// that is not a JSON object; produced by Client, never by Decode).
//
// Consumers switch on the dynamic type; a default case must ignore what it does not know.
type Message interface {
	// Type returns the wire "type" value ("system", "assistant", …; "" for *Malformed).
	Type() string
	// Raw returns the line exactly as read, without its line terminator. The message owns these
	// bytes (a message of Reader.ReadMessageView only until the next read), and its json.RawMessage
	// fields are slices of them; callers must not modify them.
	Raw() []byte
	message()
}

// Wire "type" values written by the CLI and by us.
const (
	TypeSystem               = "system"
	TypeAssistant            = "assistant"
	TypeUser                 = "user"
	TypeResult               = "result"
	TypeStreamEvent          = "stream_event"
	TypeControlRequest       = "control_request"
	TypeControlCancelRequest = "control_cancel_request"
	TypeControlResponse      = "control_response"
	TypeRateLimitEvent       = "rate_limit_event"
	TypeCommandLifecycle     = "command_lifecycle"
)

// System subtypes decoded into their own types. Any other subtype decodes to *Unknown.
const (
	SubtypeInit              = "init"
	SubtypeStatus            = "status"
	SubtypeAPIRetry          = "api_retry"
	SubtypeCompactBoundary   = "compact_boundary"
	SubtypeTaskStarted       = "task_started"
	SubtypeTaskUpdated       = "task_updated"
	SubtypeTaskNotification  = "task_notification"
	SubtypeTaskProgress      = "task_progress"
	SubtypeThinkingTokens    = "thinking_tokens"
	SubtypePermissionDenied  = "permission_denied"
	SubtypeHookStarted       = "hook_started"
	SubtypeHookProgress      = "hook_progress"
	SubtypeHookResponse      = "hook_response"
	SubtypeInformational     = "informational"
	SubtypeNotification      = "notification"
	SubtypeSuccess           = "success" // result and control_response
	SubtypeError             = "error"   // control_response
	SubtypeErrorDuringExec   = "error_during_execution"
	SubtypeErrorMaxTurns     = "error_max_turns"
	SubtypeErrorMaxBudgetUSD = "error_max_budget_usd"
	SubtypeErrorMaxStructOut = "error_max_structured_output_retries"
)

// Control request subtypes.
const (
	RequestCanUseTool      = "can_use_tool"
	RequestHookCallback    = "hook_callback"
	RequestInitialize      = "initialize"
	RequestInterrupt       = "interrupt"
	RequestSetPermission   = "set_permission_mode"
	RequestSetModel        = "set_model"
	RequestGetContextUsage = "get_context_usage"
)

// line holds a message's original bytes. It is embedded in every message type.
type line struct{ raw []byte }

// Raw returns the line exactly as read. See Message.
func (l *line) Raw() []byte { return l.raw }

func (*line) message() {}

// SystemHeader holds the fields every system message carries.
type SystemHeader struct {
	line
	Subtype   string `json:"subtype"`
	UUID      string `json:"uuid,omitempty" wire:"text"`
	SessionID string `json:"session_id,omitempty"`
}

// Type returns "system".
func (*SystemHeader) Type() string { return TypeSystem }

// SystemInit is system/init. The CLI sends it at the start of every turn, not once per process.
type SystemInit struct {
	SystemHeader
	CWD               string            `json:"cwd"`
	Model             string            `json:"model"`
	Tools             []string          `json:"tools"`
	SlashCommands     []string          `json:"slash_commands"`
	PermissionMode    string            `json:"permissionMode"`
	MCPServers        []MCPServerStatus `json:"mcp_servers"`
	ClaudeCodeVersion string            `json:"claude_code_version"`
	APIKeySource      string            `json:"apiKeySource"`
	OutputStyle       string            `json:"output_style"`
	Agents            []string          `json:"agents"`
	Skills            []string          `json:"skills"`
	Betas             []string          `json:"betas"`
	Plugins           json.RawMessage   `json:"plugins,omitempty"`
}

// MCPServerStatus is one entry of SystemInit.MCPServers.
type MCPServerStatus struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Source string `json:"source,omitempty"`
}

// SystemStatus is system/status: Status is "requesting", "compacting" or "" (JSON null), possibly with
// the new permission mode or the outcome of a compaction.
type SystemStatus struct {
	SystemHeader
	Status         string `json:"status"`
	PermissionMode string `json:"permissionMode,omitempty"`
	CompactResult  string `json:"compact_result,omitempty"`
	CompactError   string `json:"compact_error,omitempty" wire:"text"`
}

// SystemAPIRetry is system/api_retry: the CLI will retry a failed API call after RetryDelayMS.
type SystemAPIRetry struct {
	SystemHeader
	Attempt      int64  `json:"attempt"`
	MaxRetries   int64  `json:"max_retries"`
	RetryDelayMS int64  `json:"retry_delay_ms"`
	ErrorStatus  int64  `json:"error_status"` // HTTP status; 0 when null
	Error        string `json:"error"`        // rate_limit, overloaded, server_error, …
}

// SystemCompactBoundary is system/compact_boundary: the conversation was compacted.
type SystemCompactBoundary struct {
	SystemHeader
	CompactMetadata CompactMetadata `json:"compact_metadata"`
}

// CompactMetadata describes one compaction.
type CompactMetadata struct {
	Trigger            string `json:"trigger"` // manual or auto
	PreTokens          int64  `json:"pre_tokens"`
	PostTokens         int64  `json:"post_tokens,omitempty"`
	DurationMS         int64  `json:"duration_ms,omitempty"`
	MessagesSummarized int64  `json:"messages_summarized,omitempty"`
	UserContext        string `json:"user_context,omitempty" wire:"text"`
}

// SystemTask is system/task_started, system/task_progress, system/task_updated or
// system/task_notification (Subtype tells which): progress of a subagent or background task.
type SystemTask struct {
	SystemHeader
	TaskID       string          `json:"task_id"`
	RunID        string          `json:"run_id,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Description  string          `json:"description,omitempty" wire:"text"`
	SubagentType string          `json:"subagent_type,omitempty"`
	TaskType     string          `json:"task_type,omitempty"`
	Prompt       string          `json:"prompt,omitempty" wire:"text"`
	Status       string          `json:"status,omitempty"` // task_notification: completed, failed, stopped, …
	Summary      string          `json:"summary,omitempty" wire:"text"`
	OutputFile   string          `json:"output_file,omitempty" wire:"text"`
	Patch        json.RawMessage `json:"patch,omitempty"` // task_updated: the fields that changed
	Usage        json.RawMessage `json:"usage,omitempty"`
	LastToolName string          `json:"last_tool_name,omitempty"` // task_progress
}

// SystemThinkingTokens is system/thinking_tokens: an estimate of thinking tokens so far.
type SystemThinkingTokens struct {
	SystemHeader
	EstimatedTokens      int64 `json:"estimated_tokens"`
	EstimatedTokensDelta int64 `json:"estimated_tokens_delta"`
}

// SystemPermissionDenied is system/permission_denied: a tool call was denied without asking us.
type SystemPermissionDenied struct {
	SystemHeader
	ToolName           string `json:"tool_name"`
	ToolUseID          string `json:"tool_use_id"`
	AgentID            string `json:"agent_id,omitempty"`
	DecisionReasonType string `json:"decision_reason_type,omitempty"`
	DecisionReasonCode string `json:"decision_reason_code,omitempty"`
	DecisionReason     string `json:"decision_reason,omitempty" wire:"text"`
	Message            string `json:"message,omitempty" wire:"text"`
}

// SystemInformational is system/informational: a notice for the person, with a level (notice,
// warning) and often a tag naming its kind. Among them: a Stop hook not answered in time ("… didn't
// respond, so this turn ended without it."), a hook answer that failed (tag hook_callback_failed),
// a Stop hook overridden after blocking too often, auto mode's check unavailable (tag
// auto_mode_no_server_check).
type SystemInformational struct {
	SystemHeader
	Content string `json:"content" wire:"text"`
	Level   string `json:"level,omitempty"`
	Tag     string `json:"tag,omitempty"`
}

// SystemNotification is system/notification: a short notice meant for a terminal's status line
// (key stop-hook-error when a Stop hook blocked, stop-hook-block-cap, …).
type SystemNotification struct {
	SystemHeader
	Key      string `json:"key"`
	Text     string `json:"text" wire:"text"`
	Priority string `json:"priority,omitempty"`
}

// SystemHook is system/hook_started, system/hook_progress or system/hook_response: a hook from
// settings files ran (hooks registered through initialize come as control requests instead).
type SystemHook struct {
	SystemHeader
	HookID    string `json:"hook_id"`
	HookName  string `json:"hook_name"`
	HookEvent string `json:"hook_event"`
	Output    string `json:"output,omitempty" wire:"text"`
	Stdout    string `json:"stdout,omitempty" wire:"text"`
	Stderr    string `json:"stderr,omitempty" wire:"text"`
	ExitCode  *int64 `json:"exit_code,omitempty"`
	Outcome   string `json:"outcome,omitempty"` // success, error, cancelled
}

// AssistantMessage is one assistant frame. The CLI writes one content block per frame; frames of one
// API response share Message.ID. Message.Usage is the message_start usage, not final, and
// Message.StopReason is usually empty.
type AssistantMessage struct {
	line
	Message         APIMessage `json:"message"`
	ParentToolUseID string     `json:"parent_tool_use_id"` // "" for the main agent (JSON null)
	UUID            string     `json:"uuid" wire:"text"`
	SessionID       string     `json:"session_id"`
	Aborted         bool       `json:"aborted,omitempty"`
	// Error is set on a synthetic message standing for an API error (Message.Model "<synthetic>"):
	// authentication_failed, rate_limit, overloaded, invalid_request, server_error, unknown, …
	Error             string `json:"error,omitempty"`
	IsAPIErrorMessage bool   `json:"is_api_error_message,omitempty"`
	APIErrorStatus    int64  `json:"api_error_status,omitempty"`
	APIErrorType      string `json:"api_error_type,omitempty"` // api_error, overloaded_error, …
	// APIError names an error the CLI recognised (usage_limit_reached); APIErrorParams carries
	// its details: for a usage limit, the rate-limit state it met, announced reset included.
	APIError        string          `json:"api_error,omitempty"`
	APIErrorParams  *APIErrorParams `json:"api_error_params,omitempty"`
	RequestID       string          `json:"request_id,omitempty"`
	UserMessageUUID string          `json:"user_message_uuid,omitempty"`
}

// Type returns "assistant".
func (*AssistantMessage) Type() string { return TypeAssistant }

// APIMessage is the Messages API message inside an assistant frame.
type APIMessage struct {
	ID           string         `json:"id"`
	Type         string         `json:"type,omitempty"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []ContentBlock `json:"content"`
	StopReason   string         `json:"stop_reason,omitempty"`
	StopSequence string         `json:"stop_sequence,omitempty"`
	Usage        Usage          `json:"usage"`
}

// Usage is token usage as the Messages API reports it.
type Usage struct {
	InputTokens              int64          `json:"input_tokens"`
	OutputTokens             int64          `json:"output_tokens"`
	CacheCreationInputTokens int64          `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64          `json:"cache_read_input_tokens"`
	CacheCreation            *CacheCreation `json:"cache_creation,omitempty"`
	ServerToolUse            *ServerToolUse `json:"server_tool_use,omitempty"`
	ServiceTier              string         `json:"service_tier,omitempty"`
}

// CacheCreation splits cache writes by lifetime.
type CacheCreation struct {
	Ephemeral5mInputTokens int64 `json:"ephemeral_5m_input_tokens"`
	Ephemeral1hInputTokens int64 `json:"ephemeral_1h_input_tokens"`
}

// ServerToolUse counts server-side tool calls.
type ServerToolUse struct {
	WebSearchRequests int64 `json:"web_search_requests"`
	WebFetchRequests  int64 `json:"web_fetch_requests,omitempty"`
}

// UserMessage is a user frame: tool results, replays of our prompts (IsReplay), interrupt notes,
// and subagent prompts (ParentToolUseID, AgentID).
type UserMessage struct {
	line
	Message         UserContent `json:"message"`
	ParentToolUseID string      `json:"parent_tool_use_id"` // "" for the main agent (JSON null)
	UUID            string      `json:"uuid" wire:"text"`
	SessionID       string      `json:"session_id"`
	// ToolUseResult is the CLI's structured tool output (Bash {stdout,stderr,…}, Edit
	// {structuredPatch,…}, or a string "Error: …"), verbatim.
	ToolUseResult json.RawMessage `json:"tool_use_result,omitempty"`
	IsReplay      bool            `json:"isReplay,omitempty"`
	IsSynthetic   bool            `json:"isSynthetic,omitempty"`
	AgentID       string          `json:"agent_id,omitempty"`
	Timestamp     string          `json:"timestamp,omitempty" wire:"text"`
	Priority      string          `json:"priority,omitempty"`
}

// Type returns "user".
func (*UserMessage) Type() string { return TypeUser }

// UserContent is the message of a user frame.
type UserContent struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// ResultMessage ends a turn; there is exactly one per turn. Decide failure by IsError, not Subtype.
//
// TotalCostUSD, ModelUsage and DurationAPIMS are running totals over the process and across
// --resume. Usage, ModelUsageSinceLastResult, DurationMS and NumTurns are per turn.
type ResultMessage struct {
	line
	Subtype                   string                `json:"subtype"`
	IsError                   bool                  `json:"is_error"`
	Result                    string                `json:"result,omitempty" wire:"text"` // the last assistant text block
	SessionID                 string                `json:"session_id"`
	UUID                      string                `json:"uuid" wire:"text"` // not a transcript entry
	TotalCostUSD              float64               `json:"total_cost_usd"`
	Usage                     Usage                 `json:"usage"`
	ModelUsage                map[string]ModelUsage `json:"modelUsage"`
	ModelUsageSinceLastResult map[string]ModelUsage `json:"model_usage_since_last_result,omitempty"`
	DurationMS                int64                 `json:"duration_ms"`
	DurationAPIMS             int64                 `json:"duration_api_ms"`
	NumTurns                  int64                 `json:"num_turns"`
	StopReason                string                `json:"stop_reason,omitempty"`
	TerminalReason            string                `json:"terminal_reason,omitempty"` // api_error, aborted_streaming, aborted_tools, …
	APIErrorStatus            int64                 `json:"api_error_status,omitempty"`
	// APIError and APIErrorCode name an API error the CLI recognised: usage_limit_reached (a
	// subscription's usage limit or spend cap), enforced_spend_limit_reached (an API key's
	// monthly cap).
	APIError          string             `json:"api_error,omitempty"`
	APIErrorCode      string             `json:"api_error_code,omitempty"`
	Errors            []string           `json:"errors,omitempty"`
	PermissionDenials []PermissionDenial `json:"permission_denials,omitempty"`
	ResultIndex       int64              `json:"result_index,omitempty"`
	TTFTMS            int64              `json:"ttft_ms,omitempty"`
	UserMessageUUID   string             `json:"user_message_uuid,omitempty"`
}

// Type returns "result".
func (*ResultMessage) Type() string { return TypeResult }

// ModelUsage is one model's entry of ResultMessage.ModelUsage (camelCase on the wire).
type ModelUsage struct {
	InputTokens              int64   `json:"inputTokens"`
	OutputTokens             int64   `json:"outputTokens"`
	CacheReadInputTokens     int64   `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int64   `json:"cacheCreationInputTokens"`
	WebSearchRequests        int64   `json:"webSearchRequests"`
	CostUSD                  float64 `json:"costUSD"`
	ContextWindow            int64   `json:"contextWindow"`
	MaxOutputTokens          int64   `json:"maxOutputTokens"`
}

// PermissionDenial is one tool call denied during the turn.
type PermissionDenial struct {
	ToolName  string          `json:"tool_name"`
	ToolUseID string          `json:"tool_use_id"`
	ToolInput json.RawMessage `json:"tool_input,omitempty"`
}

// StreamEvent carries one raw Messages API SSE event (only with --include-partial-messages). Its UUID
// is not a transcript entry.
type StreamEvent struct {
	line
	Event           APIEvent `json:"event"`
	ParentToolUseID string   `json:"parent_tool_use_id"`
	UUID            string   `json:"uuid" wire:"text"`
	SessionID       string   `json:"session_id"`
	TTFTMS          int64    `json:"ttft_ms,omitempty"`
	// APIMessageID is the API's msg_… id of the response the event belongs to (absent on pings).
	APIMessageID string `json:"api_message_id,omitempty"`
}

// Type returns "stream_event".
func (*StreamEvent) Type() string { return TypeStreamEvent }

// APIEvent is a Messages API streaming event: message_start, content_block_start,
// content_block_delta, content_block_stop, message_delta, message_stop, ping, …
type APIEvent struct {
	Type         string        `json:"type"`
	Index        int64         `json:"index"`
	Delta        *Delta        `json:"delta,omitempty"`
	ContentBlock *ContentBlock `json:"content_block,omitempty"`
	Message      *APIMessage   `json:"message,omitempty"`
	Usage        *Usage        `json:"usage,omitempty"`
	// Raw is the event object verbatim.
	Raw json.RawMessage `json:"-" wire:"verbatim"`
}

// Delta is the delta of content_block_delta (text_delta, thinking_delta, signature_delta,
// input_json_delta) or of message_delta (StopReason).
type Delta struct {
	Type         string `json:"type,omitempty"`
	Text         string `json:"text,omitempty" wire:"text"`
	Thinking     string `json:"thinking,omitempty" wire:"text"`
	Signature    string `json:"signature,omitempty" wire:"text"`
	PartialJSON  string `json:"partial_json,omitempty" wire:"text"`
	StopReason   string `json:"stop_reason,omitempty"`
	StopSequence string `json:"stop_sequence,omitempty"`
}

// ControlCancelRequest withdraws a pending control request of the CLI (a can_use_tool after an
// interrupt, for example).
type ControlCancelRequest struct {
	line
	RequestID string `json:"request_id"`
}

// Type returns "control_cancel_request".
func (*ControlCancelRequest) Type() string { return TypeControlCancelRequest }

// RateLimitEvent reports the account's rate-limit state (claude.ai credentials only).
type RateLimitEvent struct {
	line
	RateLimitInfo RateLimitInfo `json:"rate_limit_info"`
	UUID          string        `json:"uuid" wire:"text"`
	SessionID     string        `json:"session_id"`
}

// Type returns "rate_limit_event".
func (*RateLimitEvent) Type() string { return TypeRateLimitEvent }

// APIErrorParams are the details of a recognised API error.
type APIErrorParams struct {
	RateLimitInfo *RateLimitInfo `json:"rate_limit_info,omitempty"`
}

// RateLimitInfo is the rate-limit state. ResetsAt is in Unix seconds (0 when absent).
type RateLimitInfo struct {
	Status         string  `json:"status"` // allowed, allowed_warning, rejected
	ResetsAt       int64   `json:"resetsAt,omitempty"`
	RateLimitType  string  `json:"rateLimitType,omitempty"`
	Utilization    float64 `json:"utilization,omitempty"`
	IsUsingOverage bool    `json:"isUsingOverage,omitempty"`
	OverageStatus  string  `json:"overageStatus,omitempty"`
	// OverageDisabledReason says why extra usage is refused (org_level_disabled_until at an
	// organization's spend cap, out_of_credits, …).
	OverageDisabledReason string `json:"overageDisabledReason,omitempty"`
}

// CommandLifecycle reports the state of a prompt we sent with a uuid: queued, started, completed or
// cancelled.
type CommandLifecycle struct {
	line
	// CommandUUID is the uuid we gave the prompt.
	CommandUUID string `json:"command_uuid"`
	State       string `json:"state"`
	// UUID is this frame's own uuid, not a transcript entry.
	UUID      string `json:"uuid" wire:"text"`
	SessionID string `json:"session_id,omitempty"`
}

// Type returns "command_lifecycle".
func (*CommandLifecycle) Type() string { return TypeCommandLifecycle }

// Unknown is a JSON object whose type (or, for system messages, subtype) this package does not
// model. Only the fields below are decoded; Raw has everything.
type Unknown struct {
	line
	MessageType string `json:"type"`
	Subtype     string `json:"subtype,omitempty"`
	UUID        string `json:"uuid,omitempty" wire:"text"`
	SessionID   string `json:"session_id,omitempty"`
}

// Type returns the wire type.
func (u *Unknown) Type() string { return u.MessageType }

// Malformed is a line that is not a JSON object. Client delivers it in place of a message and carries
// on with the next line.
type Malformed struct {
	line
	// Line is the 1-based number of the line in the stream.
	Line int64
	// Err says what is wrong with it.
	Err error
}

// Type returns "".
func (*Malformed) Type() string { return "" }

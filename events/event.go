package events

import "time"

// Type names the kind of an AgentEvent. Its values are part of the stable JSON form.
type Type string

// Event types.
const (
	TypeSessionStatus       Type = "session_status"
	TypeAvailableCommands   Type = "available_commands"
	TypeUserMessage         Type = "user_message"
	TypeMessageChunk        Type = "message_chunk"
	TypeReasoning           Type = "reasoning"
	TypeToolCall            Type = "tool_call"
	TypeToolUpdate          Type = "tool_update"
	TypeContextWindow       Type = "context_window"
	TypeComplete            Type = "complete"
	TypeError               Type = "error"
	TypeRateLimit           Type = "rate_limit"
	TypePermissionRequest   Type = "permission_request"
	TypePermissionCancelled Type = "permission_cancelled"
	TypePermissionDecision  Type = "permission_decision"
	TypePermissionDenied    Type = "permission_denied"
	TypeCompaction          Type = "compaction"
	TypeInterrupted         Type = "interrupted"
	TypeSubagentTask        Type = "subagent_task"
	TypeTurnRetry           Type = "turn_retry"
	TypeWait                Type = "wait"
	// TypeBudgetExhausted: the turn spent what was left of its task's budget (Budget says how).
	TypeBudgetExhausted Type = "budget_exhausted"
	// TypeWorkspaceRestored: a managed task's worktree was put back at its last committed
	// checkpoint before the attempt ran (Workspace says why, and where what it held is kept).
	TypeWorkspaceRestored Type = "workspace_restored"
)

// SessionStatus tells whether a session started fresh or continued an earlier one.
type SessionStatus string

// Session statuses.
const (
	SessionNew     SessionStatus = "new"
	SessionResumed SessionStatus = "resumed"
)

// ToolStatus is the state of a tool call.
type ToolStatus string

// Tool statuses.
const (
	ToolRunning  ToolStatus = "running"
	ToolComplete ToolStatus = "complete"
	ToolError    ToolStatus = "error"
)

// AgentEvent is one normalized thing that happened in an agent session. It is a flat record:
// Type says which of the other fields are meaningful (see the package documentation for the
// table). The zero value of every optional field is left out of the JSON form.
type AgentEvent struct {
	Type      Type   `json:"type"`
	SessionID string `json:"session_id,omitempty"`
	// Time is set only when the producer has a clock; adapters leave it zero by default so that
	// their output is deterministic.
	Time time.Time `json:"time,omitzero"`
	// ParentToolCallID is the tool call (Task/Agent) that spawned the subagent this event
	// comes from; empty for the main session.
	ParentToolCallID string `json:"parent_tool_call_id,omitempty"`

	// Text is the text of message_chunk and user_message events.
	Text string `json:"text,omitempty"`
	// ReasoningText is the text of reasoning events.
	ReasoningText string `json:"reasoning_text,omitempty"`
	// MessageID groups the chunks of one model message (the API's message id).
	MessageID string `json:"message_id,omitempty"`
	// UUID is the transcript entry of a user_message.
	UUID string `json:"uuid,omitempty"`
	// By names the person (an API token's name, a user of the command line) who sent a
	// user_message's prompt, or who asked for the interrupt an interrupted event (or an error of
	// kind interrupted) reports; empty when unknown.
	By string `json:"by,omitempty"`

	ToolCallID string             `json:"tool_call_id,omitempty"`
	ToolName   string             `json:"tool_name,omitempty"`
	ToolTitle  string             `json:"tool_title,omitempty"`
	ToolStatus ToolStatus         `json:"tool_status,omitempty"`
	Normalized *NormalizedPayload `json:"normalized,omitempty"`
	// ToolError is the tool's message when a tool_update reports status "error".
	ToolError string `json:"tool_error,omitempty"`

	AvailableCommands []Command `json:"available_commands,omitempty"`

	// ContextWindow is embedded so that its four fields appear at the top level of the JSON
	// form, all together or not at all. Read it as ev.ContextWindow after checking for nil.
	*ContextWindow

	// PendingID identifies a permission request: the CLI's request_id.
	PendingID  string      `json:"pending_id,omitempty"`
	Permission *Permission `json:"permission,omitempty"`
	Decision   *Decision   `json:"decision,omitempty"`

	RateLimitMessage string     `json:"rate_limit_message,omitempty"`
	RateLimit        *RateLimit `json:"rate_limit,omitempty"`

	Error      *ErrorInfo        `json:"error,omitempty"`
	Compaction *Compaction       `json:"compaction,omitempty"`
	Subagent   *SubagentProgress `json:"subagent,omitempty"`
	TurnRetry  *TurnRetry        `json:"turn_retry,omitempty"`
	Wait       *Wait             `json:"wait,omitempty"`
	Budget     *BudgetSpent      `json:"budget,omitempty"`
	Workspace  *WorkspaceRestore `json:"workspace,omitempty"`
	Data       *Data             `json:"data,omitempty"`
}

// Command is a slash command the session accepts.
type Command struct {
	Name         string `json:"name"`
	Description  string `json:"description,omitempty"`
	ArgumentHint string `json:"argument_hint,omitempty"`
}

// ContextWindow is how much of the model's context the main session uses.
type ContextWindow struct {
	Size      int64 `json:"context_window_size"`
	Used      int64 `json:"context_window_used"`
	Remaining int64 `json:"context_window_remaining"`
	// Efficiency is the share of the window still free, from 0 to 1.
	Efficiency float64 `json:"context_efficiency"`
	// Model is the model whose window this is: the main session's.
	Model string `json:"context_window_model,omitempty"`
}

// NewContextWindow computes the remaining tokens and the efficiency of a window of size tokens
// of which used are taken. A size of zero or less yields an efficiency of zero.
func NewContextWindow(size, used int64) *ContextWindow {
	cw := &ContextWindow{Size: size, Used: used, Remaining: max(size-used, 0)}
	if size > 0 {
		cw.Efficiency = float64(cw.Remaining) / float64(size)
	}
	return cw
}

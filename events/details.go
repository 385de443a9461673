package events

import (
	"encoding/json"
	"time"
)

// Data holds the details of session_status and complete events under the "data" key.
type Data struct {
	// SessionStatus is set on session_status events.
	SessionStatus SessionStatus `json:"session_status,omitempty"`
	// Completion is set on complete events; its fields appear directly under "data".
	*Completion
}

// Completion is the accounting of one turn. Costs, tokens and durations are this turn's own,
// never the CLI's running totals (those are only in TotalCostUSD).
type Completion struct {
	CostUSD float64 `json:"cost_usd"`
	// TotalCostUSD is the CLI's running total after this turn, over the session so far.
	TotalCostUSD             float64 `json:"total_cost_usd"`
	DurationMS               int64   `json:"duration_ms"`
	NumTurns                 int     `json:"num_turns"`
	InputTokens              int64   `json:"input_tokens"`
	OutputTokens             int64   `json:"output_tokens"`
	CacheCreationInputTokens int64   `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64   `json:"cache_read_input_tokens"`
	// LastMessageUUID is the last transcript entry that is safe to resume at after this turn.
	LastMessageUUID string `json:"last_message_uuid,omitempty"`
	SessionID       string `json:"session_id,omitempty"`
	// ResultUUID is the uuid of the CLI's result message. It is not a transcript entry.
	ResultUUID     string `json:"result_uuid,omitempty"`
	StopReason     string `json:"stop_reason,omitempty"`
	TerminalReason string `json:"terminal_reason,omitempty"`
	Subtype        string `json:"subtype,omitempty"`
	IsError        bool   `json:"is_error"`
	// Models is this turn's usage per model, when the CLI reported it.
	Models map[string]ModelUsage `json:"models,omitempty"`
	// Checkpoint is the commit that recorded a managed task's worktree when the turn committed
	// (set by the layer that runs turns, not the CLI).
	Checkpoint string `json:"checkpoint,omitempty"`
}

// ModelUsage is one model's share of a turn.
type ModelUsage struct {
	InputTokens              int64   `json:"input_tokens"`
	OutputTokens             int64   `json:"output_tokens"`
	CacheCreationInputTokens int64   `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64   `json:"cache_read_input_tokens"`
	CostUSD                  float64 `json:"cost_usd"`
	// ContextWindow is the model's context window, as the CLI reports it; 0 when it does not.
	ContextWindow int64 `json:"context_window,omitempty"`
}

// ErrorKind classifies why a turn failed.
type ErrorKind string

// Error kinds.
const (
	ErrorAPI            ErrorKind = "api_error"
	ErrorMaxTurns       ErrorKind = "max_turns"
	ErrorMaxBudget      ErrorKind = "max_budget"
	ErrorInterrupted    ErrorKind = "interrupted"
	ErrorResumeRejected ErrorKind = "resume_rejected"
	ErrorExecution      ErrorKind = "execution"
	// ErrorProtocol marks output of the agent that could not be read (a malformed line).
	ErrorProtocol ErrorKind = "protocol"
)

// ErrorInfo describes a failed turn.
type ErrorInfo struct {
	Kind    ErrorKind `json:"kind"`
	Message string    `json:"message"`
	// Subtype and TerminalReason are the CLI's own words for the failure.
	Subtype        string `json:"subtype,omitempty"`
	TerminalReason string `json:"terminal_reason,omitempty"`
	APIErrorStatus int    `json:"api_error_status,omitempty"`
	// APIError and APIErrorCode are the CLI's names for an API error it recognised
	// (usage_limit_reached, enforced_spend_limit_reached).
	APIError     string   `json:"api_error,omitempty"`
	APIErrorCode string   `json:"api_error_code,omitempty"`
	Errors       []string `json:"errors,omitempty"`
}

// Rate-limit sources.
const (
	RateLimitSourceAPIRetry = "api_retry"
	RateLimitSourceEvent    = "rate_limit_event"
	// RateLimitSourceAPIError: the rate-limit state an API error met (the CLI's synthetic
	// message's api_error_params), reported with every usage limit, also when the CLI prints no
	// rate_limit_event because the state did not change.
	RateLimitSourceAPIError = "api_error"
)

// RateLimit details a rate_limit event: either an API request that the CLI retries
// (Source "api_retry") or a change in the account's usage limits (Source "rate_limit_event").
type RateLimit struct {
	Source string `json:"source"`
	// Retry details (api_retry).
	Attempt      int    `json:"attempt,omitempty"`
	MaxRetries   int    `json:"max_retries,omitempty"`
	RetryDelayMS int64  `json:"retry_delay_ms,omitempty"`
	ErrorStatus  int    `json:"error_status,omitempty"`
	Error        string `json:"error,omitempty"`
	// Usage-limit details (rate_limit_event).
	Status        string  `json:"status,omitempty"`
	ResetsAt      int64   `json:"resets_at,omitempty"`
	RateLimitType string  `json:"rate_limit_type,omitempty"`
	Utilization   float64 `json:"utilization,omitempty"`
	// OverageStatus and OverageDisabledReason describe the account's extra usage.
	OverageStatus         string `json:"overage_status,omitempty"`
	OverageDisabledReason string `json:"overage_disabled_reason,omitempty"`
}

// Wait phases.
const (
	WaitStarted = "started"
	WaitEnded   = "ended"
)

// Wait details a wait event: the task's turn began, or ended, to wait for its account (its
// usage limit, rate limit, spend cap or concurrency limit). Written by drover, not the CLI.
type Wait struct {
	Phase   string `json:"phase"`
	Account string `json:"account"`
	// Reason is usage_limit, rate_limit, spend_cap or concurrency.
	Reason    string    `json:"reason"`
	LimitType string    `json:"limit_type,omitempty"`
	ResetsAt  time.Time `json:"resets_at,omitzero"`
	RetryAt   time.Time `json:"retry_at,omitzero"`
	Position  int       `json:"position,omitempty"`
	// Waited is how long the wait lasted (phase ended).
	WaitedMS int64 `json:"waited_ms,omitempty"`
}

// Permission details a permission_request or permission_denied event.
type Permission struct {
	// Input is the tool input the CLI asks about, verbatim.
	Input       json.RawMessage `json:"input,omitempty"`
	DisplayName string          `json:"display_name,omitempty"`
	Description string          `json:"description,omitempty"`
	// Summary is one line a person reads first: the Bash command, the path a file tool changes or
	// reads, the URL or query of a web tool, the first question, the plan's first line; otherwise
	// the tool's title.
	Summary string `json:"summary,omitempty"`
	// Diff shows what a file tool (Write, Edit, MultiEdit, NotebookEdit) would change, as a unified
	// diff whose hunks have no line numbers (they are not known before the tool runs).
	Diff string `json:"diff,omitempty"`
	// Suggestions are the CLI's permission_suggestions, verbatim.
	Suggestions json.RawMessage `json:"suggestions,omitempty"`
	// AllowAlways are the "allow always" choices drover offers for this request: CLI permission
	// updates (addRules, kept in the session), one of which a decision may accept. The choices
	// depend only on the tool and its input. None are offered when the answer must be a person's
	// each time (RequiresUserInteraction) or the CLI forbids it (a flagged dangerous command).
	AllowAlways        json.RawMessage `json:"allow_always,omitempty"`
	BlockedPath        string          `json:"blocked_path,omitempty"`
	DecisionReason     string          `json:"decision_reason,omitempty"`
	DecisionReasonType string          `json:"decision_reason_type,omitempty"`
	AgentID            string          `json:"agent_id,omitempty"`
	// RequiresUserInteraction is set when only a person's answer on this request will do
	// (AskUserQuestion, ExitPlanMode).
	RequiresUserInteraction bool `json:"requires_user_interaction,omitempty"`
	// Questions are what an AskUserQuestion call asks.
	Questions []Question `json:"questions,omitempty"`
	// Plan is the plan an ExitPlanMode call presents for approval, and PlanFile the file it is
	// kept in.
	Plan     string `json:"plan,omitempty"`
	PlanFile string `json:"plan_file,omitempty"`
	// Message is why a permission was denied (permission_denied).
	Message string `json:"message,omitempty"`
	// Reasked marks a request asked again after a retry of its turn, about something the lost
	// attempt had not asked (or that was not decided the same way).
	Reasked bool `json:"reasked,omitempty"`
	// Deadline is when the request is denied if nobody answers it.
	Deadline time.Time `json:"deadline,omitzero"`
}

// Decision is the answer a permission request got, as the agent received it
// (permission_decision).
type Decision struct {
	// Outcome is "allowed", "denied", "expired" (nobody answered by the deadline) or "cancelled".
	Outcome string `json:"outcome"`
	// By is who decided; empty for an expired request.
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at,omitzero"`
	// Grant is the label of the "allow always" choice the decision accepted, which holds for the
	// rest of the task.
	Grant string `json:"grant,omitempty"`
	// Answers are the chosen option labels per question of an AskUserQuestion call.
	Answers map[string][]string `json:"answers,omitempty"`
	// NextMode is, for an approved plan, the permission mode the task continues in.
	NextMode string `json:"next_mode,omitempty"`
}

// Question is one question the agent asks the person, with its options.
type Question struct {
	Question string `json:"question"`
	// Header is a short label for the question.
	Header      string           `json:"header,omitempty"`
	MultiSelect bool             `json:"multi_select,omitempty"`
	Options     []QuestionOption `json:"options,omitempty"`
}

// QuestionOption is one answer a person may choose.
type QuestionOption struct {
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// Compaction phases.
const (
	CompactionStarted  = "started"
	CompactionFinished = "finished"
)

// Compaction details a compaction event: the CLI summarising the conversation to free context.
type Compaction struct {
	Phase string `json:"phase"`
	// Trigger is "manual" or "auto" when the CLI says so.
	Trigger    string `json:"trigger,omitempty"`
	PreTokens  int64  `json:"pre_tokens,omitempty"`
	PostTokens int64  `json:"post_tokens,omitempty"`
	// Result is "success" or "failed" when a compaction finished.
	Result string `json:"result,omitempty"`
	// Error is why a compaction failed.
	Error string `json:"error,omitempty"`
}

// Subagent progress phases, named after the CLI's system subtypes.
const (
	SubagentStarted      = "task_started"
	SubagentProgressed   = "task_progress"
	SubagentUpdated      = "task_updated"
	SubagentNotification = "task_notification"
)

// SubagentProgress details a subagent_task event: progress of work the session runs beside its
// main conversation, a subagent (TaskType "local_agent") or a background shell command
// ("local_bash").
type SubagentProgress struct {
	Phase       string `json:"phase"`
	TaskID      string `json:"task_id,omitempty"`
	TaskType    string `json:"task_type,omitempty"`
	Description string `json:"description,omitempty"`
	Status      string `json:"status,omitempty"`
	Summary     string `json:"summary,omitempty"`
	// LastToolName is the tool the subagent used most recently, when reported.
	LastToolName string `json:"last_tool_name,omitempty"`
	// Usage is the CLI's usage report for the task, verbatim.
	Usage json.RawMessage `json:"usage,omitempty"`
}

// TurnRetry details a turn_retry event, which the layer that runs turns emits when an attempt
// failed and the turn starts again: the failed attempt's events before it are partial output.
type TurnRetry struct {
	// Attempt is the number of the attempt that failed (1 for the first).
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason,omitempty"`
}

// Causes of a workspace_restored event.
const (
	// RestoredForRetry: the attempt runs a turn again after an attempt that did not commit it.
	RestoredForRetry = "retry"
	// RestoredChangedByHand: the worktree was changed between turns, outside any turn.
	RestoredChangedByHand = "changed_by_hand"
	// RestoredForRewind: the task was rewound to an earlier turn (drover task rewind) since its
	// last turn; its files go back to that turn's checkpoint.
	RestoredForRewind = "rewind"
)

// WorkspaceRestore details a workspace_restored event: a managed task's worktree was put back
// at its last committed checkpoint before the attempt ran, so that the turn sees the files its
// conversation saw. What the worktree held instead is kept on a git ref, never discarded.
type WorkspaceRestore struct {
	// Cause is RestoredForRetry, RestoredChangedByHand or RestoredForRewind.
	Cause string `json:"cause"`
	// Checkpoint is the commit restored to; Turn the turn that recorded it (0: the task's base).
	Checkpoint string `json:"checkpoint"`
	Turn       int    `json:"turn"`
	// Kept is the ref that keeps what the worktree held instead, Files the files that differed;
	// both empty when it already held the checkpoint.
	Kept  string   `json:"kept,omitempty"`
	Files []string `json:"files,omitempty"`
	// Message says it for a person, side effects outside the worktree included.
	Message string `json:"message"`
}

// BudgetSpent is the detail of a budget_exhausted event: which bound of its task's budget the
// turn reached, what the task had spent then, and whether the turn was cut for it.
type BudgetSpent struct {
	// Bound is max_cost_usd, max_turns or max_duration.
	Bound          string  `json:"bound"`
	CostUSD        float64 `json:"cost_usd"`
	MaxCostUSD     float64 `json:"max_cost_usd,omitempty"`
	Turns          int     `json:"turns"`
	MaxTurns       int     `json:"max_turns,omitempty"`
	WorkDurationMS int64   `json:"work_duration_ms"`
	MaxDurationMS  int64   `json:"max_duration_ms,omitempty"`
	// Cut says the turn was interrupted for the budget; otherwise it ended at the bound.
	Cut bool `json:"cut,omitempty"`
}

// Package task defines what crosses the Temporal boundary for a drover task: the
// workflow's parameters and state, the Updates and Queries it answers, and the
// inputs and results of the activities it schedules.
//
// Everything here is a plain, JSON-serialisable value with no behaviour that
// touches I/O, so the deterministic workflow code, the activities, the worker
// and the command line can all share it without importing each other. The
// defaults and checks of a task's input live here too (Params.WithDefaults,
// Params.Validate, ValidatePrompt, ValidateID), so that every caller refuses
// what the workflow would refuse before anything is sent.
package task

import (
	"strings"
	"time"
)

// DefaultNamespace is the Temporal namespace of tasks when none is named: the one name every
// layer that talks to Temporal (the worker, the HTTP API's links, the command line) defaults to.
const DefaultNamespace = "default"

// Names of the workflow, its Updates, Queries and activities. They are part of
// the history of every running task: renaming one breaks replay.
const (
	WorkflowName = "TaskWorkflow"

	// UpdatePrompt queues a prompt; its result is a PromptAccepted.
	UpdatePrompt = "prompt"
	// UpdateInterrupt interrupts the running turn, if any; its result is an
	// InterruptResult.
	UpdateInterrupt = "interrupt"
	// UpdateClose lets the task finish once its queued prompts have run.
	UpdateClose = "close"

	// QueryState returns the task's State.
	QueryState = "state"

	ActivityAssignHost = "AssignHost"
	// ActivityHostTakesWork answers whether the host of a queue is alive and not draining.
	ActivityHostTakesWork = "HostTakesWork"
	ActivityRunTurn       = "RunTurn"
	ActivityInterruptTurn = "InterruptTurn"
	ActivityStopExecutor  = "StopExecutor"
	// ActivityCancelTurn stops a running turn at once when its task is cancelled, instead of
	// waiting for the attempt to learn of the cancellation from its next heartbeat.
	ActivityCancelTurn = "CancelTurn"
)

// SharedQueue is the default task queue every worker polls for workflows and
// host assignment. Turns run on a host's own queue, see HostQueue.
const SharedQueue = "drover"

// HostQueue is the task queue of one worker host, named after its stable
// executor id.
func HostQueue(executorID string) string { return hostQueuePrefix + executorID }

const hostQueuePrefix = "executor/"

// ControlQueue is the task queue of the short calls (interrupt, cancel, stop the CLI) sent to the
// host of hostQueue. A host serves it with slots of its own, so that a call to stop a turn never
// waits behind the turns that fill the host's queue, and those turns are bounded by the host's
// limit alone.
func ControlQueue(hostQueue string) string { return hostQueue + controlQueueSuffix }

const controlQueueSuffix = "/control"

// WarmQueue is the task queue of the turns sent to the host of hostQueue because it ran the
// task's previous turn, and may keep its process. A host serves it with room for every process
// it keeps, so that first turns, which fill the host's queue while they wait for a slot or for
// room for a process, never keep a warm process's next turn from reaching the host.
func WarmQueue(hostQueue string) string { return hostQueue + warmQueueSuffix }

const warmQueueSuffix = "/warm"

// HostOfQueue returns the executor id of a host queue; ok is false when queue is not one.
func HostOfQueue(queue string) (executorID string, ok bool) {
	id, ok := strings.CutPrefix(queue, hostQueuePrefix)
	return id, ok && id != "" && !strings.HasSuffix(id, controlQueueSuffix) && !strings.HasSuffix(id, warmQueueSuffix)
}

// PermissionMode is how a task's tool calls are approved.
type PermissionMode string

const (
	// Autonomous runs every tool without asking.
	Autonomous PermissionMode = "autonomous"
	// Supervised asks a human before any tool that is not read-only.
	Supervised PermissionMode = "supervised"
	// Plan lets the agent plan freely and asks before it leaves plan mode.
	Plan PermissionMode = "plan"
)

// Valid reports whether m is one of the known modes. The empty mode is valid
// and means Autonomous.
func (m PermissionMode) Valid() bool {
	switch m {
	case "", Autonomous, Supervised, Plan:
		return true
	}
	return false
}

// MCPServer is one MCP server given to the CLI. Command and Args describe a
// stdio server; Type ("sse" or "http") and URL a remote one.
type MCPServer struct {
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Type    string            `json:"type,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// Profile is the agent configuration of a task.
type Profile struct {
	// Model is passed to the CLI's --model. Empty means the CLI's default.
	Model string `json:"model,omitempty"`
	// PermissionMode defaults to Autonomous.
	PermissionMode PermissionMode `json:"permission_mode,omitempty"`
	// AfterPlan is the mode a Plan task continues in once a person approves its plan:
	// Autonomous (the default) or Supervised.
	AfterPlan PermissionMode `json:"after_plan,omitempty"`
	// MaxTurns bounds the agentic loop of one turn (--max-turns); 0 means no bound.
	MaxTurns int `json:"max_turns,omitempty"`
	// MCPServers are handed to the CLI with --mcp-config, by name.
	MCPServers map[string]MCPServer `json:"mcp_servers,omitempty"`
	// AppendSystemPrompt is added to Claude Code's own system prompt.
	AppendSystemPrompt string `json:"append_system_prompt,omitempty"`
}

// Params start a task. They travel with every continue-as-new, so keep them small.
type Params struct {
	// Title names the task for a person (lists, its page, the Temporal UI); WithTitle makes
	// one from the first prompt when none is given.
	Title string `json:"title,omitempty"`
	// Workspace is the directory the CLI runs in, on the executor's host: an unmanaged folder
	// (no isolation, checkpoint or move to another host). Empty when Repo is set.
	Workspace string `json:"workspace"`
	// Repo makes the task managed: a git repository (URL or path, as the workers' hosts reach
	// it) that the task works on in a worktree of its own, on branch drover/<task id>,
	// checkpointed every turn. Empty when Workspace is set.
	Repo string `json:"repo,omitempty"`
	// Base is the branch, tag or commit of Repo the task starts from; empty means the
	// repository's default branch.
	Base string `json:"base,omitempty"`
	// Fork, set on a task forked from another's turn, is where its worktree and conversation
	// start (see ForkPoint); Repo is the other task's.
	Fork    *ForkPoint `json:"fork,omitempty"`
	Profile Profile    `json:"profile"`
	// IdleTimeout ends the task when no prompt arrives for this long after its
	// last turn. Zero means the task waits for prompts until it is closed.
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
	// TurnTimeout bounds one attempt of one turn. Defaults to 1h.
	TurnTimeout time.Duration `json:"turn_timeout,omitempty"`
	// MaxAttempts bounds the attempts of one turn. Defaults to 3.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// ApprovalTimeout is how long a permission request waits for a person before it is denied
	// (supervised and plan modes). Defaults to DefaultApprovalTimeout; a person can extend one
	// request's deadline.
	ApprovalTimeout time.Duration `json:"approval_timeout,omitempty"`
	// Budget bounds what the task may spend (see Budget); zero bounds nothing but what its
	// host's default budget bounds.
	Budget Budget `json:"budget,omitzero"`
	// Retention is how long the task's rows stay in Postgres once it is finished (after its
	// last activity) before they are archived and deleted; zero means the archive job's own
	// (--retention, DefaultRetention).
	Retention time.Duration `json:"retention,omitempty"`
	// Carry is the state handed over by continue-as-new; nil on a new task.
	Carry *Carry `json:"carry,omitempty"`
	// First is the prompt the task was started with, queued as turn 1 when its first run
	// starts; nil when the first prompt came as an Update. The next run of a continue-as-new
	// has none.
	First *FirstPrompt `json:"first,omitempty"`
}

// FirstPrompt is a prompt carried by a task's start: Temporal records it with the start, so
// that it needs no worker to be accepted and is never lost before one takes it.
type FirstPrompt struct {
	Prompt Prompt `json:"prompt"`
	// UpdateID is the id under which the task remembers its answer: the same prompt sent again
	// as an Update with this id is answered once and queued once.
	UpdateID string `json:"update_id,omitempty"`
}

// Prompt is one user prompt.
type Prompt struct {
	Text string `json:"text"`
	// By names who sent it (an API token's name, a user of the command line), for the record.
	By string `json:"by,omitempty"`
	// Attachments are workspace-relative paths of files (images) to attach.
	Attachments []string `json:"attachments,omitempty"`
	// Mode, when set, is the permission mode the task runs in from this prompt's turn on.
	Mode PermissionMode `json:"mode,omitempty"`
}

// PromptAccepted is the result of UpdatePrompt.
type PromptAccepted struct {
	// Turn is the number the prompt will run as (1-based).
	Turn int `json:"turn"`
	// PromptUUID is the transcript uuid the prompt will have in the session.
	PromptUUID string `json:"prompt_uuid"`
	// Queued is the number of prompts ahead of this one, counting a running turn.
	Queued int `json:"queued"`
}

// InterruptResult is the result of UpdateInterrupt.
type InterruptResult struct {
	// Interrupted is false when no turn was running.
	Interrupted bool `json:"interrupted"`
	Turn        int  `json:"turn,omitempty"`
}

// Status of a task, as shown by QueryState and the DroverStatus search attribute.
type Status string

const (
	StatusIdle      Status = "idle"
	StatusRunning   Status = "running"
	StatusClosing   Status = "closing"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// QueuedPrompt is a prompt waiting for its turn.
type QueuedPrompt struct {
	Turn       int    `json:"turn"`
	PromptUUID string `json:"prompt_uuid"`
	Prompt     Prompt `json:"prompt"`
}

// Carry is what a task hands to its next run on continue-as-new: only small values.
type Carry struct {
	Turn            int            `json:"turn"`
	SessionID       string         `json:"session_id,omitempty"`
	LastMessageUUID string         `json:"last_message_uuid,omitempty"`
	HostQueue       string         `json:"host_queue,omitempty"`
	Totals          Totals         `json:"totals"`
	Pending         []QueuedPrompt `json:"pending,omitempty"`
	Closing         bool           `json:"closing,omitempty"`
	LastError       string         `json:"last_error,omitempty"`
	// Recent are the latest accepted prompt Updates, so that a client retrying
	// one after a continue-as-new gets the first answer instead of a second
	// turn (Temporal deduplicates Update ids only within a run).
	Recent []RecentPrompt `json:"recent,omitempty"`
	// Awaiting are the permission requests waiting for a decision.
	Awaiting []PendingRequest `json:"awaiting,omitempty"`
	// Grants are the permissions granted for the rest of the task ("allow always").
	Grants []Grant `json:"grants,omitempty"`
	// Decided are the latest decisions, so that a decision sent twice is told it came late.
	Decided []DecisionRecord `json:"decided,omitempty"`
	// HostBudget is the default budget of the host that ran the task's last turn.
	HostBudget Budget `json:"host_budget,omitzero"`
	// BudgetExhausted is set while the task's budget is spent.
	BudgetExhausted *BudgetExhausted `json:"budget_exhausted,omitempty"`
	// Attention is set while the task needs a person (its session could not be resumed).
	Attention *Attention `json:"attention,omitempty"`
	// NewSessionTurn is the turn a person chose to start in a new session, until it runs.
	NewSessionTurn int `json:"new_session_turn,omitempty"`
	// Rewound is set when the task was rewound since its last turn ran (RunTurnInput.Rewound).
	Rewound bool `json:"rewound,omitempty"`
}

// RecentPrompt is one accepted prompt Update and the answer it got.
type RecentPrompt struct {
	UpdateID string         `json:"update_id"`
	Accepted PromptAccepted `json:"accepted"`
}

// Totals add up the accounting of a task's completed turns.
type Totals struct {
	// CostUSD is what the API billed the attempts that committed the task's turns: each turn
	// counted once.
	CostUSD      float64 `json:"cost_usd"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Turns        int     `json:"turns"`
	FailedTurns  int     `json:"failed_turns"`
	// FailedAttemptsCostUSD is what the API billed attempts that did not commit their turn
	// (failed, lost with their worker, cut by a limit, then retried): real spend, kept apart
	// from CostUSD.
	FailedAttemptsCostUSD float64 `json:"failed_attempts_cost_usd,omitempty"`
	// WorkDuration is the time the task's turns ran, added up.
	WorkDuration time.Duration `json:"work_duration,omitempty"`
}

// BilledCostUSD is everything the API billed the task: what its budget's MaxCostUSD bounds.
func (t Totals) BilledCostUSD() float64 { return t.CostUSD + t.FailedAttemptsCostUSD }

// State is the answer to QueryState.
type State struct {
	Status    Status `json:"status"`
	Title     string `json:"title,omitempty"`
	Workspace string `json:"workspace"`
	// Repo and Base are a managed task's repository and base (see Params).
	Repo            string         `json:"repo,omitempty"`
	Base            string         `json:"base,omitempty"`
	Model           string         `json:"model,omitempty"`
	PermissionMode  PermissionMode `json:"permission_mode"`
	Turn            int            `json:"turn"`
	RunningTurn     int            `json:"running_turn,omitempty"`
	SessionID       string         `json:"session_id,omitempty"`
	LastMessageUUID string         `json:"last_message_uuid,omitempty"`
	HostQueue       string         `json:"host_queue,omitempty"`
	Totals          Totals         `json:"totals"`
	Pending         []QueuedPrompt `json:"pending,omitempty"`
	LastError       string         `json:"last_error,omitempty"`
	// Awaiting are the permission requests waiting for a person, oldest first.
	Awaiting []PendingRequest `json:"awaiting,omitempty"`
	// Grants are the permissions granted for the rest of the task.
	Grants []Grant `json:"grants,omitempty"`
	// Wait says why and until when the task waits for its account, while its status is
	// waiting_for_limit, waiting_for_spend_cap or queued_for_account.
	Wait *Wait `json:"wait,omitempty"`
	// Budget is the task's budget as it now stands; BudgetBy names who changed it last (empty:
	// as the task was started).
	Budget   Budget `json:"budget,omitzero"`
	BudgetBy string `json:"budget_by,omitempty"`
	// BudgetExhausted says which bound the task reached, while its status is budget_exhausted.
	BudgetExhausted *BudgetExhausted `json:"budget_exhausted,omitempty"`
	// Retention is the task's own (Params.Retention), zero when it has none: the archive job
	// reads it from the recorded state.
	Retention time.Duration `json:"retention,omitempty"`
	// Attention says why the task waits for a person, while its status is needs_attention.
	Attention *Attention `json:"attention,omitempty"`
}

// RunTurnInput is the input of the RunTurn activity.
type RunTurnInput struct {
	TaskID     string `json:"task_id"`
	Turn       int    `json:"turn"`
	Prompt     Prompt `json:"prompt"`
	PromptUUID string `json:"prompt_uuid"`
	Workspace  string `json:"workspace"`
	// Repo and Base make the turn run in the task's managed worktree (see Params).
	Repo string `json:"repo,omitempty"`
	Base string `json:"base,omitempty"`
	// Fork is the task's Params.Fork: the turn's first attempt on a host with no worktree of
	// the task forks it from there.
	Fork *ForkPoint `json:"fork,omitempty"`
	// Rewound: the task was rewound since its last turn (UpdateRewind); the worktree goes back
	// to the rewound turn's checkpoint, and the event says why.
	Rewound bool    `json:"rewound,omitempty"`
	Profile Profile `json:"profile"`
	// SessionID and LastMessageUUID are the workflow's view of the resume point
	// before this turn. The executor row in Postgres is the source of truth; these
	// are used only when it has none.
	SessionID       string `json:"session_id,omitempty"`
	LastMessageUUID string `json:"last_message_uuid,omitempty"`
	// Grants are the permissions granted for the rest of the task so far.
	Grants []Grant `json:"grants,omitempty"`
	// ApprovalTimeout is how long a permission request of this turn waits for a person.
	ApprovalTimeout time.Duration `json:"approval_timeout,omitempty"`
	// AttemptsBefore counts the attempts this turn made on hosts that could not finish it
	// (they drained or were lost); the attempts here are numbered after them.
	AttemptsBefore int `json:"attempts_before,omitempty"`
	// Budget is the task's own budget; the host completes it with its default. Spent is what
	// the task had spent before this turn, as the workflow counts it (the host reads the cost
	// from Postgres, which also knows the attempts the workflow never heard of).
	Budget Budget  `json:"budget,omitzero"`
	Spent  *Totals `json:"spent,omitempty"`
	// NewSession starts the turn in a new session, whatever the task's committed resume point:
	// a person chose so when the old session could not be resumed (ResolveNewSession).
	NewSession bool `json:"new_session,omitempty"`
}

// TurnStatus is where a turn stands: running, or how it ended. The same names are the status
// of the turn's accounting row in Postgres.
type TurnStatus string

// The turn statuses. Every status but TurnRunning is final; a RunTurnResult carries a final one.
const (
	TurnRunning     TurnStatus = "running"
	TurnCompleted   TurnStatus = "completed"
	TurnFailed      TurnStatus = "failed"
	TurnInterrupted TurnStatus = "interrupted"
)

// Valid reports whether s is one of the turn statuses.
func (s TurnStatus) Valid() bool {
	switch s {
	case TurnRunning, TurnCompleted, TurnFailed, TurnInterrupted:
		return true
	}
	return false
}

// RunTurnResult is the result of the RunTurn activity: small values only; the
// events themselves live in Postgres.
type RunTurnResult struct {
	Status          TurnStatus `json:"status"`
	SessionID       string     `json:"session_id"`
	LastMessageUUID string     `json:"last_message_uuid"`
	ResultUUID      string     `json:"result_uuid,omitempty"`
	CostUSD         float64    `json:"cost_usd"`
	InputTokens     int64      `json:"input_tokens"`
	OutputTokens    int64      `json:"output_tokens"`
	DurationMS      int64      `json:"duration_ms"`
	NumTurns        int        `json:"num_turns"`
	Attempt         int        `json:"attempt"`
	// Error describes a turn that ended with is_error (for example --max-turns).
	Error string `json:"error,omitempty"`
	// Checkpoint is the commit that recorded a managed task's worktree when the turn committed.
	Checkpoint string `json:"checkpoint,omitempty"`
	// FailedAttemptsCostUSD is what the API billed the task's attempts that did not commit their
	// turn, all turns so far, as Postgres records it (Totals.FailedAttemptsCostUSD).
	FailedAttemptsCostUSD float64 `json:"failed_attempts_cost_usd,omitempty"`
	// HostBudget is the default budget of the host that ran the turn.
	HostBudget Budget `json:"host_budget,omitzero"`
	// BudgetExhausted is set when the turn spent what was left of the task's budget: it was cut
	// (status interrupted) or ended at the bound.
	BudgetExhausted *BudgetExhausted `json:"budget_exhausted,omitempty"`
}

// InterruptTurnInput is the input of the InterruptTurn and StopExecutor activities.
type InterruptTurnInput struct {
	TaskID string `json:"task_id"`
	Turn   int    `json:"turn"`
	// Repo is a managed task's repository, given to StopExecutor when the task ends: its
	// worktree is removed with its process.
	Repo string `json:"repo,omitempty"`
	// By names who asked for the interrupt (InterruptRequest.By).
	By string `json:"by,omitempty"`
}

// InterruptRequest is the argument of UpdateInterrupt (a task from before it takes none).
type InterruptRequest struct {
	// By names who asks, for the record: the turn's interrupted event names them.
	By string `json:"by,omitempty"`
}

// Search attribute names shown in the Temporal UI.
const (
	SearchStatus    = "DroverStatus"
	SearchCostUSD   = "DroverCostUSD"
	SearchTurns     = "DroverTurns"
	SearchModel     = "DroverModel"
	SearchWorkspace = "DroverWorkspace"
	// SearchTitle is the task's title (Text), set when the task starts.
	SearchTitle = "DroverTitle"
	// SearchAwaitingApproval is true while a permission request of the task waits for a
	// person; SearchAwaitingSince is when the oldest of them was asked (unset when none waits).
	// The Temporal UI's list of waiting tasks is the query
	// `DroverAwaitingApproval = true ORDER BY DroverAwaitingSince`.
	SearchAwaitingApproval = "DroverAwaitingApproval"
	SearchAwaitingSince    = "DroverAwaitingSince"
)

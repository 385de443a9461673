package task

import "slices"

// Error types of the application errors the turn activities return: the Type of a
// temporal.ApplicationError, stable across releases, so that workflows, dashboards and fleet
// policies can branch on them. Retryable reports which ones a retry of the same turn can cure.
const (
	// ErrTypeInvalidInput: the turn cannot run as given (a malformed id or prompt uuid, an
	// unknown or unavailable permission mode, an attachment outside the workspace or not an
	// image, a turn record begun with another prompt). Not retryable.
	ErrTypeInvalidInput = "InvalidInput"
	// ErrTypeWorkspaceMissing: the task's workspace is not a directory on the host that took the
	// turn. Not retryable: the message names the path. (A workspace outside the host's
	// workspace root is InvalidInput.)
	ErrTypeWorkspaceMissing = "WorkspaceMissing"
	// ErrTypeWorkspacesUnmanaged: the task is managed (it names a repository) and the host that
	// took the turn manages no workspaces. Not retryable.
	ErrTypeWorkspacesUnmanaged = "WorkspacesUnmanaged"
	// ErrTypeRepoUnreachable: a managed task's repository, or the durable remote of its
	// checkpoints, could not be fetched from or pushed to. Retryable.
	ErrTypeRepoUnreachable = "RepoUnreachable"
	// ErrTypeBaseMissing: a managed task's base names nothing in its repository. Not retryable.
	ErrTypeBaseMissing = "BaseMissing"
	// ErrTypeDiskFull: the host's disk filled up while the task's worktree was made, restored or
	// checkpointed; the turn is not committed without its checkpoint. Retryable.
	ErrTypeDiskFull = "DiskFull"
	// ErrTypeFileTooLarge: a file in a managed task's worktree is over the host's checkpoint
	// limit; the message names it. The turn is not committed without its checkpoint. Not
	// retryable: the file stays until a person removes it or lists it in .gitignore.
	ErrTypeFileTooLarge = "FileTooLarge"
	// ErrTypeWorkspaceLocked: a managed task's worktree is locked by a git command (index.lock
	// and the like), a person's or one that was stopped; the message names the file. What the
	// worktree held is kept on a side ref first. Retryable: the lock may go.
	ErrTypeWorkspaceLocked = "WorkspaceLocked"
	// ErrTypeWorkspaceFailed: git failed otherwise on a managed task's worktree. Retryable.
	ErrTypeWorkspaceFailed = "WorkspaceFailed"
	// ErrTypeResumeRejected: the CLI refused every way to resume the session at the committed
	// point. Not retryable: the task needs a person's choice (StatusNeedsAttention).
	ErrTypeResumeRejected = "ResumeRejected"
	// ErrTypeClaudeStartFailed: the CLI could not be started or did not answer initialize.
	ErrTypeClaudeStartFailed = "ClaudeStartFailed"
	// ErrTypeClaudeExited: the CLI exited or was killed before the turn ended.
	ErrTypeClaudeExited = "ClaudeExited"
	// ErrTypeClaudeStalled: the CLI printed nothing for the stall timeout and was stopped.
	ErrTypeClaudeStalled = "ClaudeStalled"
	// ErrTypeClaudeProtocol: the CLI's output broke the protocol (for example a result with no
	// transcript position to resume at).
	ErrTypeClaudeProtocol = "ClaudeProtocol"
	// ErrTypeModelAPI: the turn ended with a Messages API error the CLI's own retries did not
	// cure. Retryable; when the API said when to come back, the next attempt waits that long.
	ErrTypeModelAPI = "ModelAPI"
	// ErrTypeStoreUnavailable: Postgres could not record the attempt or its commit in time.
	ErrTypeStoreUnavailable = "StoreUnavailable"
	// ErrTypeAttemptSuperseded: a newer attempt owns the task; this one stopped without writing
	// anything. Not retryable (the newer attempt carries the turn).
	ErrTypeAttemptSuperseded = "AttemptSuperseded"
	// ErrTypeAttemptTimedOut: the attempt outlived its start-to-close bound. Temporal reports its
	// own timeout to the workflow; this type is what the executor row and the logs record.
	ErrTypeAttemptTimedOut = "AttemptTimedOut"
	// ErrTypeWorkerStopping: the host drains (its worker is shutting down): the turn outlived
	// the drain timeout and its CLI was stopped, or it reached the host after the drain began.
	// The workflow runs the turn again at once on another host, from its committed point (see
	// Reassign).
	ErrTypeWorkerStopping = "WorkerStopping"
	// ErrTypeHostLost: the host running the attempt stopped beating in Postgres; a live host
	// reported the attempt failed so that the workflow runs the turn at once on another host
	// (see Reassign).
	ErrTypeHostLost = "HostLost"
	// ErrTypeSessionMirrorCorrupt: the session's mirror in Postgres does not rebuild what its
	// hashes say; the session is not resumed from it. Not retryable: an operator must look.
	ErrTypeSessionMirrorCorrupt = "SessionMirrorCorrupt"
	// ErrTypeWorkerLost: the worker running the attempt died; its host reported the attempt
	// failed when it came back, so that the retry need not wait for a heartbeat timeout.
	ErrTypeWorkerLost = "WorkerLost"
	// ErrTypeInternal: drover itself failed running the turn (a bug); the attempt is retried.
	ErrTypeInternal = "Internal"
	// ErrTypeCancelled: the task was cancelled while the turn ran. The activity acknowledges
	// Temporal's cancellation (a CanceledError whose details carry this type) rather than
	// failing, so the workflow and the UI see a cancelled activity.
	ErrTypeCancelled = "Cancelled"
)

// Retryable reports whether an activity error of type t is worth another attempt of the turn.
// Unknown types are retryable: Temporal's default.
func Retryable(t string) bool {
	return !slices.Contains(notRetryable, t)
}

// notRetryable lists the error types a retry of the same turn cannot cure.
var notRetryable = []string{ErrTypeInvalidInput, ErrTypeWorkspaceMissing, ErrTypeWorkspacesUnmanaged,
	ErrTypeBaseMissing, ErrTypeFileTooLarge, ErrTypeResumeRejected,
	ErrTypeAttemptSuperseded, ErrTypeCancelled, ErrTypeSessionMirrorCorrupt, ErrTypeBudgetExhausted}

// reassigned lists the error types after which the workflow runs the turn on another host.
var reassigned = []string{ErrTypeWorkerStopping, ErrTypeHostLost}

// Reassign reports whether an error of type t means the turn's host cannot run it (it drains,
// or it is gone): the workflow then runs the turn again at once on another host instead of
// letting Temporal retry it on the same host's queue, where nobody would take it.
func Reassign(t string) bool {
	return slices.Contains(reassigned, t)
}

// ReassignDetails are the details of an error of a Reassign type: the attempt that ended,
// counted over the turn, so that the attempts on the next host continue the count.
type ReassignDetails struct {
	Attempt int `json:"attempt"`
}

// NonRetryableErrorTypes lists the error types a retry policy must not retry: those Retryable
// refuses, and those the workflow reassigns itself.
func NonRetryableErrorTypes() []string {
	return slices.Concat(notRetryable, reassigned)
}

// Error types of the application errors TaskWorkflow itself returns (its validators refuse an
// Update, or it fails to start), so that callers can branch on ApplicationError.Type.
const (
	// ErrTypeInvalidParams: the workflow was started with task.Params it cannot run.
	ErrTypeInvalidParams = "InvalidParams"
	// ErrTypeInvalidPrompt: a prompt Update was rejected for its content
	// (empty, too large, a bad attachment path).
	ErrTypeInvalidPrompt = "InvalidPrompt"
	// ErrTypeTaskClosed: an Update was rejected because the task is closing or has ended.
	ErrTypeTaskClosed = "TaskClosed"
	// ErrTypeQueueFull: a prompt Update was rejected because too many prompts,
	// or too many bytes of them, are already waiting.
	ErrTypeQueueFull = "QueueFull"
	// ErrTypeNotPending: a decision or deadline was refused because its permission request is
	// not pending in this task (unknown, already decided, withdrawn, or another task's).
	ErrTypeNotPending = "NotPending"
	// ErrTypeInvalidDecision: a decision was refused for its content (a grant the request did
	// not offer, an answer that is not an option, a denial without a reason).
	ErrTypeInvalidDecision = "InvalidDecision"
	// ErrTypeInterruptFailed: an interrupt did not reach the running turn (its host did not take
	// the call in time, or failed it); the turn goes on, and the interrupt can be sent again.
	ErrTypeInterruptFailed = "InterruptFailed"
	// ErrTypeInvalidBudget: a budget change was refused for its content (a negative bound, or
	// nothing to change).
	ErrTypeInvalidBudget = "InvalidBudget"
)

package task

import (
	"encoding/json"
	"time"
)

// Names of the approval messages of TaskWorkflow. Like the other names in this package they are
// part of every task's history.
const (
	// UpdateDecide records a person's decision on a pending permission request (a Decision);
	// its result is a DecisionRecord. The validator refuses a request that is not pending in
	// this task — unknown, already decided, or another task's — before anything is recorded.
	UpdateDecide = "decide"
	// UpdateExtendDeadline moves a pending request's deadline (an ExtendDeadline); its result is
	// the PendingRequest as it now stands.
	UpdateExtendDeadline = "extend_deadline"
	// SignalDecide carries a Decision, as UpdateDecide does, when no worker takes the Update
	// in time (none runs): a signal is in the task's history at once. The workflow checks it
	// as the Update's validator would once a worker runs it again, and applies it, or drops it
	// with a log line when it no longer holds (decided meanwhile, its turn ended).
	SignalDecide = "decide_later"
	// SignalPermissionAsked tells the workflow that the CLI asks for permission (a
	// PendingRequest). Sent by the turn's attempt; an ask repeated after a retry of the turn
	// carries the same RequestID.
	SignalPermissionAsked = "permission_asked"
	// SignalPermissionClosed tells the workflow that a pending request was withdrawn (a
	// PermissionClosed): the CLI cancelled it, or its turn or process ended.
	SignalPermissionClosed = "permission_closed"

	// ActivityDeliverDecision hands a recorded decision to the host that waits for it.
	ActivityDeliverDecision = "DeliverDecision"
	// ActivityRecordDeadline records a pending request's moved deadline (a DeadlineMoved) where
	// the inbox (drover task pending) reads it.
	ActivityRecordDeadline = "RecordDeadline"
)

// DefaultApprovalTimeout is Params.ApprovalTimeout when it is zero: how long a permission
// request waits for a person before it is denied.
const DefaultApprovalTimeout = 24 * time.Hour

// RequestKind says what a permission request asks a person.
type RequestKind string

// The kinds of permission requests.
const (
	// KindTool: may the agent run this tool call?
	KindTool RequestKind = "tool"
	// KindQuestion: the agent asks the person a question with options (AskUserQuestion); the
	// decision carries the chosen answers.
	KindQuestion RequestKind = "question"
	// KindPlan: the agent presents a plan and asks to leave plan mode (ExitPlanMode).
	KindPlan RequestKind = "plan"
)

// RequestKinds lists every kind of permission request.
func RequestKinds() []RequestKind { return []RequestKind{KindTool, KindQuestion, KindPlan} }

// Suggestion is one permission the CLI offers to grant for the rest of the task when a person
// allows a request ("allow always"). A decision may accept one of the request's suggestions and
// nothing else.
type Suggestion struct {
	// Key names the suggestion within its request ("1", "2", …).
	Key string `json:"key"`
	// Label says, for a person, what accepting it grants ("Bash(npm test:*)").
	Label string `json:"label"`
	// Raw is the suggestion as the CLI gave it.
	Raw json.RawMessage `json:"raw"`
}

// Question is one question of an AskUserQuestion request.
type Question struct {
	Question    string   `json:"question"`
	Header      string   `json:"header,omitempty"`
	Options     []string `json:"options"`
	MultiSelect bool     `json:"multi_select,omitempty"`
}

// PendingRequest is a permission request waiting for a decision, as the workflow keeps it (and
// QueryState shows it): small values only; the tool's whole input is in Postgres.
type PendingRequest struct {
	RequestID string      `json:"request_id"`
	Turn      int         `json:"turn"`
	Kind      RequestKind `json:"kind"`
	Tool      string      `json:"tool"`
	// Summary says in one line what is asked: the command, the file, the question.
	Summary     string       `json:"summary"`
	Suggestions []Suggestion `json:"suggestions,omitempty"`
	Questions   []Question   `json:"questions,omitempty"`
	// Reasked marks a request asked anew after a retry of its turn: the attempt before asked
	// something else, or was lost before the person answered something different.
	Reasked  bool      `json:"reasked,omitempty"`
	Since    time.Time `json:"since"`
	Deadline time.Time `json:"deadline"`
}

// PermissionClosed is the argument of SignalPermissionClosed.
type PermissionClosed struct {
	RequestID string `json:"request_id"`
	Reason    string `json:"reason"`
}

// Decision is a person's answer to a pending permission request: the argument of UpdateDecide.
type Decision struct {
	RequestID string `json:"request_id"`
	Allow     bool   `json:"allow"`
	// Reason says why; a denial's reason is what the agent reads.
	Reason string `json:"reason,omitempty"`
	// By names who decided.
	By string `json:"by,omitempty"`
	// Always, on an allow, is the Key of one of the request's suggestions to grant for the rest
	// of the task.
	Always string `json:"always,omitempty"`
	// Answers, for a question request, are the chosen option labels per question text.
	Answers map[string][]string `json:"answers,omitempty"`
}

// Outcome is where a permission request stands: pending, or how it ended. The same names are
// the status of the request's row in Postgres.
type Outcome string

// The outcomes of a permission request. Every one but OutcomePending is final; a DecisionRecord
// carries a final one.
const (
	OutcomePending   Outcome = "pending"   // it waits for a decision
	OutcomeAllowed   Outcome = "allowed"   // by a person
	OutcomeDenied    Outcome = "denied"    // by a person
	OutcomeExpired   Outcome = "expired"   // nobody answered by the deadline; denied by drover
	OutcomeCancelled Outcome = "cancelled" // withdrawn before anybody answered: the CLI cancelled it, or its turn or task ended
)

// Outcomes lists every outcome of a permission request.
func Outcomes() []Outcome {
	return []Outcome{OutcomeAllowed, OutcomeDenied, OutcomeExpired, OutcomeCancelled}
}

// Final reports whether o is a decided outcome (allowed, denied, expired, cancelled).
func (o Outcome) Final() bool {
	switch o {
	case OutcomeAllowed, OutcomeDenied, OutcomeExpired, OutcomeCancelled:
		return true
	}
	return false
}

// DecisionRecord is a decision as the workflow recorded it: the result of UpdateDecide, and the
// input of DeliverDecision.
type DecisionRecord struct {
	TaskID    string              `json:"task_id"`
	RequestID string              `json:"request_id"`
	Turn      int                 `json:"turn"`
	Kind      RequestKind         `json:"kind"`
	Outcome   Outcome             `json:"outcome"`
	By        string              `json:"by"`
	Reason    string              `json:"reason,omitempty"`
	At        time.Time           `json:"at"`
	Grant     *Suggestion         `json:"grant,omitempty"`
	Answers   map[string][]string `json:"answers,omitempty"`
	// NextMode, for an allowed plan, is the mode the task runs in from now on.
	NextMode PermissionMode `json:"next_mode,omitempty"`
}

// ExtendDeadline is the argument of UpdateExtendDeadline.
type ExtendDeadline struct {
	RequestID string    `json:"request_id"`
	Deadline  time.Time `json:"deadline"`
}

// DeadlineMoved is the input of ActivityRecordDeadline.
type DeadlineMoved struct {
	TaskID    string    `json:"task_id"`
	RequestID string    `json:"request_id"`
	Deadline  time.Time `json:"deadline"`
}

// Grant is a permission granted for the rest of a task: a suggestion a person accepted.
type Grant struct {
	Tool       string     `json:"tool"`
	Suggestion Suggestion `json:"suggestion"`
}

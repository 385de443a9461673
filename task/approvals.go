package task

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Names of the approval messages of TaskWorkflow. Like the other names in this package they are
// part of every task's history.
const (
	// UpdateDecide records a person's decision on a pending permission request (a Decision);
	// its result is a DecisionRecord. The validator refuses a request that is not pending in
	// this task — unknown, already decided, or another task's — before anything is recorded.
	// drover decides through SignalDecide (taskclient.Decider); the workflow keeps this
	// Update's handler for the histories that hold one, and for clients that send it.
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

// Outcomes lists every final outcome of a permission request (all but OutcomePending).
func Outcomes() []Outcome {
	return []Outcome{OutcomeAllowed, OutcomeDenied, OutcomeExpired, OutcomeCancelled}
}

// Final reports whether o is a decided outcome (allowed, denied, expired, cancelled).
func (o Outcome) Final() bool { return slices.Contains(Outcomes(), o) }

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

// Validate checks what a decision says on its own: a denial needs a reason (the agent reads
// it), and neither a grant for the rest of the task nor answers go with a denial. A refusal is
// an *InvalidError that names the decision's field (reason, always, answers).
func (d Decision) Validate() error {
	if d.Allow {
		return nil
	}
	// The workflow checks decisions already in histories: a rule here must keep every answer
	// it gave them.
	if d.Reason == "" {
		return invalid("reason", "a denial needs a reason: the agent reads it")
	}
	if d.Always != "" {
		return invalid("always", "a grant for the rest of the task goes with an approval, not a denial")
	}
	if len(d.Answers) > 0 {
		return invalid("answers", "answers go with approving a question")
	}
	return nil
}

// Check checks decision d against the request r it answers. It is the one check of a
// decision's content, made by everything that records or applies one (taskclient.Decider, and
// the task's workflow when it applies it), so that each refusal reads the same wherever it is
// met: what Validate checks, and then that Always names one of the suggestions r offers, and
// that Answers go with a question, one for each of its questions, from its options. A refusal
// is an *InvalidError that names the decision's field. Whether r still waits for a decision is
// the caller's to check.
func (d Decision) Check(r PendingRequest) error {
	if err := d.Validate(); err != nil {
		return err
	}
	if d.Always != "" && !slices.ContainsFunc(r.Suggestions, func(sg Suggestion) bool { return sg.Key == d.Always }) {
		return invalid("always", "request %s offers no suggestion %q; it offers %s", r.RequestID, d.Always, offered(r.Suggestions))
	}
	if r.Kind == KindQuestion && d.Allow {
		if err := CheckAnswers(r.Questions, d.Answers); err != nil {
			return invalid("answers", "%v", err)
		}
	} else if len(d.Answers) > 0 {
		return invalid("answers", "answers go with approving a question")
	}
	return nil
}

// offered lists the suggestions a request offers, for a person: "1 (Bash(npm test:*)), 2 (…)".
func offered(sgs []Suggestion) string {
	if len(sgs) == 0 {
		return "nothing to grant for the rest of the task"
	}
	out := make([]string, 0, len(sgs))
	for _, sg := range sgs {
		out = append(out, fmt.Sprintf("%s (%s)", sg.Key, sg.Label))
	}
	return strings.Join(out, ", ")
}

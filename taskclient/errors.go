package taskclient

import (
	"fmt"
	"time"

	"github.com/drover-run/drover/task"
)

// NotPendingError refuses a decision on a request that waits for none: decided already (a
// decision recorded and not yet applied counts), expired, or withdrawn. Nothing was changed.
type NotPendingError struct {
	TaskID    string
	RequestID string
	// Status is how the request stands: allowed, denied, expired or cancelled; pending when a
	// decision is recorded that the task has not applied yet (Recorded).
	Status   task.Outcome
	Recorded bool
	By       string
	At       time.Time
}

func (e *NotPendingError) Error() string {
	how := string(e.Status)
	switch {
	case e.Recorded:
		how = "decided already"
	case e.Status == task.OutcomeExpired:
		how = "expired: nobody answered it in time"
	case e.Status == task.OutcomeCancelled:
		how = "withdrawn"
	}
	if e.By != "" && e.By != "drover" {
		how += " by " + e.By
	}
	if !e.At.IsZero() {
		how += " at " + e.At.UTC().Format(time.RFC3339)
	}
	msg := fmt.Sprintf("request %q is not waiting for a decision in task %s: it was %s", e.RequestID, e.TaskID, how)
	if e.Recorded {
		msg += "; the task applies that decision when its worker runs"
	}
	return msg + fmt.Sprintf("; run drover task pending %s to see what waits", e.TaskID)
}

// InvalidDecisionError refuses a decision for its content (task.Decision.Check): a grant the
// request did not offer, an answer that is not an option, a denial without a reason. Nothing
// was recorded.
type InvalidDecisionError struct {
	TaskID    string
	RequestID string
	// Err is Check's refusal: a *task.InvalidError that names the field and what is allowed.
	Err error
}

func (e *InvalidDecisionError) Error() string {
	return fmt.Sprintf("decision on request %s of task %s: %v", e.RequestID, e.TaskID, e.Err)
}

func (e *InvalidDecisionError) Unwrap() error { return e.Err }

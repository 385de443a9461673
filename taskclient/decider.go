package taskclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskview"
)

// Decider records a person's decisions on permission requests; no worker needs to run. The
// command line and the HTTP API both decide through it.
//
// A decision is checked against the request as Postgres has it (it must wait for a person, and
// may grant only what the request offered, answer only with its options), recorded there by
// compare-and-set (a second decision on the same request is refused), and sent to the task's
// workflow as task.SignalDecide, which Temporal keeps in the task's history at once. The worker
// that runs the task next (the one waiting, or the one that comes back) applies it: the grant,
// the next mode of a plan, and the answer to the agent.
type Decider struct {
	Temporal client.Client
	View     *taskview.View
}

// appliedPoll is how often Decide reads whether a recorded decision was applied, while it waits.
const appliedPoll = 200 * time.Millisecond

// Decide records d on the task's request d.RequestID, or, when d.RequestID is empty, on the
// task's only waiting request (taskview.OnlyPending), and tells the task. It returns once the
// decision is durably recorded; with wait above zero it then waits up to wait for a worker to
// apply it, and applied says whether one did (rec is then the decision as the task applied it).
//
// Refusals, with nothing recorded: *taskview.NotFoundError (no such task or request),
// *taskview.OnlyPendingError (no request named, and not exactly one waits),
// *NotPendingError (decided already, expired or withdrawn), *InvalidDecisionError (its
// content). When the task cannot be told (Temporal unreachable), the record is withdrawn and
// the error says so: the same decision can be sent again.
func (c *Decider) Decide(ctx context.Context, taskID string, d task.Decision, wait time.Duration) (rec task.DecisionRecord, applied bool, err error) {
	if d.RequestID == "" {
		r, err := c.View.OnlyPending(ctx, taskID)
		if err != nil {
			return rec, false, err
		}
		d.RequestID = r.RequestID
	}
	if d.By == "" {
		d.By = "unknown"
	}
	row, err := c.View.Request(ctx, taskID, d.RequestID)
	if err != nil {
		return rec, false, err
	}
	if err := notPending(row); err != nil {
		return rec, false, err
	}
	if err := d.Check(askOf(row)); err != nil {
		return rec, false, &InvalidDecisionError{TaskID: taskID, RequestID: d.RequestID, Err: err}
	}
	body, err := json.Marshal(d)
	if err != nil {
		return rec, false, fmt.Errorf("deciding request %s of task %s: %w", d.RequestID, taskID, err)
	}
	row, err = store.RecordDecision(ctx, c.View.Pool, taskID, d.RequestID, body, d.By)
	if errors.Is(err, store.ErrAlreadyDecided) {
		return rec, false, notPending(row) // decided by somebody else meanwhile
	}
	if err != nil {
		return rec, false, fmt.Errorf("deciding request %s of task %s: %w", d.RequestID, taskID, err)
	}
	if err := c.Temporal.SignalWorkflow(ctx, taskID, "", task.SignalDecide, d); err != nil {
		err = fmt.Errorf("telling task %s of the decision on request %s: %w", taskID, d.RequestID, err)
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if werr := store.WithdrawDecision(wctx, c.View.Pool, taskID, d.RequestID, row.RequestedAt); werr != nil {
			return rec, false, fmt.Errorf("%w; the decision stays recorded (%v) and applies when the task hears of it", err, werr)
		}
		return rec, false, fmt.Errorf("%w; nothing was recorded: send the decision again", err)
	}
	if wait <= 0 {
		return rec, false, nil
	}
	return c.awaitApplied(ctx, taskID, d.RequestID, wait)
}

// awaitApplied waits up to wait for the request to leave pending, and returns the decision the
// task applied to it.
func (c *Decider) awaitApplied(ctx context.Context, taskID, requestID string, wait time.Duration) (task.DecisionRecord, bool, error) {
	var rec task.DecisionRecord
	deadline := time.Now().Add(wait)
	for {
		row, err := c.View.Request(ctx, taskID, requestID)
		if err != nil {
			return rec, false, err
		}
		if row.Status.Final() {
			if len(row.Decision) == 0 || json.Unmarshal(row.Decision, &rec) != nil {
				rec = task.DecisionRecord{TaskID: taskID, RequestID: requestID, Outcome: row.Status,
					By: row.DecidedBy, Reason: row.DecisionReason, At: row.DecidedAt}
			}
			return rec, true, nil
		}
		if time.Now().After(deadline) {
			return rec, false, nil
		}
		select {
		case <-ctx.Done():
			return rec, false, nil // recorded: the caller's wait ended, not the decision
		case <-time.After(appliedPoll):
		}
	}
}

// notPending is the refusal of a decision on row, or nil when row waits for one.
func notPending(row store.PermissionRequest) error {
	if row.Status == task.OutcomePending && len(row.Requested) == 0 {
		return nil
	}
	e := &NotPendingError{TaskID: row.TaskID, RequestID: row.RequestID, Status: row.Status,
		By: row.DecidedBy, At: row.DecidedAt}
	if row.Status == task.OutcomePending {
		e.Recorded, e.By, e.At = true, row.RequestedBy, row.RequestedAt
		var d task.Decision
		if json.Unmarshal(row.Requested, &d) == nil {
			e.Status = task.OutcomeDenied
			if d.Allow {
				e.Status = task.OutcomeAllowed
			}
		}
	}
	return e
}

// askOf is the request of row as task.Decision.Check reads it.
func askOf(row store.PermissionRequest) task.PendingRequest {
	return task.PendingRequest{RequestID: row.RequestID, Turn: row.Turn, Kind: row.Kind,
		Tool: row.ToolName, Summary: row.Summary, Suggestions: taskview.SuggestionsOf(row.Suggestions),
		Questions: taskview.QuestionsOf(row), Reasked: row.Reasked, Since: row.CreatedAt, Deadline: row.Deadline}
}

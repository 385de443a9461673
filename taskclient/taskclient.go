// Package taskclient is the caller's side of a drover task: it starts tasks
// with their first prompt, sends prompts, interrupts, closes, cancels, reads
// a task's state and lists tasks, all through the Temporal client.
package taskclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskview"
	"github.com/drover-run/drover/workflows"
)

// Client sends commands to tasks. The zero TaskQueue means task.SharedQueue. With DB set,
// Cancel records the cancel in Postgres before it asks Temporal (see Cancel).
type Client struct {
	Temporal  client.Client
	TaskQueue string
	DB        store.DB
}

func (c *Client) queue() string {
	if c.TaskQueue == "" {
		return task.SharedQueue
	}
	return c.TaskQueue
}

// Start creates the task taskID with its first prompt, or, when the task
// already runs, sends it the prompt: Update-with-Start either way. updateID
// makes the call idempotent: a retry with the same id is answered with the
// first answer and queues nothing. Empty means a fresh id.
//
// The id, params and prompt are checked first (task.ValidateID,
// task.Params.Validate, task.ValidatePrompt): a bad start never reaches
// Temporal, and its error wraps the *task.InvalidError of each problem.
func (c *Client) Start(ctx context.Context, taskID string, p task.Params, prompt task.Prompt, updateID string) (task.PromptAccepted, error) {
	var out task.PromptAccepted
	if err := errors.Join(task.ValidateID(taskID), p.WithDefaults().Validate(), task.ValidatePrompt(prompt)); err != nil {
		return out, fmt.Errorf("starting task %s: %w", taskID, err)
	}
	if updateID == "" {
		updateID = uuid.NewString() // one id for every send below
	}
	p = p.WithTitle(prompt)
	attrs := workflows.StartSearchAttributes(p)
	send := func() error {
		start := c.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID:                       taskID,
			TypedSearchAttributes:    attrs,
			TaskQueue:                c.queue(),
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		}, task.WorkflowName, p)
		h, err := c.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: start,
			UpdateOptions: client.UpdateWorkflowOptions{
				UpdateID:     updateID,
				UpdateName:   task.UpdatePrompt,
				Args:         []any{prompt},
				WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
		if err != nil {
			return err
		}
		return h.Get(ctx, &out)
	}
	err := retryNotReady(ctx, send)
	if titleUnknown(err) {
		attrs = temporal.NewSearchAttributes()
		err = retryNotReady(ctx, send)
	}
	if err != nil {
		return out, fmt.Errorf("starting task %s: %w", taskID, err)
	}
	return out, nil
}

// notReadyWait bounds how long retryNotReady sends a command again.
const notReadyWait = 30 * time.Second

// retryNotReady calls send until it returns anything but Temporal's WorkflowNotReady, ctx ends,
// or notReadyWait has passed. WorkflowNotReady says the workflow task that was to take an
// Update failed on the server and the Update went with it, unadmitted, so the same Update (same
// id) can be sent again. A task's first workflow task fails so while a namespace's new search
// attributes have not yet reached every cache of the server; the server retries that workflow
// task by itself, and the Update is taken once it passes.
func retryNotReady(ctx context.Context, send func() error) error {
	delay := 100 * time.Millisecond
	deadline := time.Now().Add(notReadyWait)
	for {
		err := send()
		var notReady *serviceerror.WorkflowNotReady
		if !errors.As(err, &notReady) || time.Now().Add(delay).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// Prompt queues a prompt on a running task. A prompt that no task could take
// (task.ValidatePrompt) is refused without reaching Temporal.
func (c *Client) Prompt(ctx context.Context, taskID string, prompt task.Prompt, updateID string) (task.PromptAccepted, error) {
	var out task.PromptAccepted
	if err := task.ValidatePrompt(prompt); err != nil {
		return out, fmt.Errorf("prompting task %s: %w", taskID, err)
	}
	err := c.update(ctx, taskID, task.UpdatePrompt, updateID, &out, prompt)
	if err != nil {
		return out, fmt.Errorf("prompting task %s: %w", taskID, err)
	}
	return out, nil
}

// Interrupt stops the task's running turn, if any. The task stays open.
func (c *Client) Interrupt(ctx context.Context, taskID string) (task.InterruptResult, error) {
	return c.InterruptBy(ctx, taskID, "")
}

// InterruptBy is Interrupt on behalf of by, whom the turn's interrupted event names.
func (c *Client) InterruptBy(ctx context.Context, taskID, by string) (task.InterruptResult, error) {
	var out task.InterruptResult
	if err := c.update(ctx, taskID, task.UpdateInterrupt, "", &out, task.InterruptRequest{By: by}); err != nil {
		return out, fmt.Errorf("interrupting task %s: %w", taskID, err)
	}
	return out, nil
}

// Close lets the task finish once its queued prompts have run.
func (c *Client) Close(ctx context.Context, taskID string) error {
	if err := c.update(ctx, taskID, task.UpdateClose, "", nil); err != nil {
		return fmt.Errorf("closing task %s: %w", taskID, err)
	}
	return nil
}

// Cancel cancels the task: its running turn is stopped and its CLI process ends.
//
// With DB set, the cancel of the task's current workflow run is recorded in Postgres first,
// so that an attempt of its turns that begins afterwards refuses to run, even one that a
// worker starts before it has seen the cancel (store.RecordCancel). When Temporal cannot be
// told, the record is withdrawn.
func (c *Client) Cancel(ctx context.Context, taskID string) error {
	return c.CancelBy(ctx, taskID, "")
}

// CancelBy is Cancel on behalf of by, whom the cancel's record names (with DB set).
func (c *Client) CancelBy(ctx context.Context, taskID, by string) error {
	if c.DB == nil {
		if err := c.Temporal.CancelWorkflow(ctx, taskID, ""); err != nil {
			return fmt.Errorf("cancelling task %s: %w", taskID, err)
		}
		return nil
	}
	desc, err := c.Temporal.DescribeWorkflow(ctx, taskID, "")
	if err != nil {
		return fmt.Errorf("cancelling task %s: %w", taskID, err)
	}
	runID := desc.WorkflowExecution.RunID
	if err := store.RecordCancel(ctx, c.DB, taskID, runID, by); err != nil {
		return fmt.Errorf("cancelling task %s: %w", taskID, err)
	}
	if err := c.Temporal.CancelWorkflow(ctx, taskID, runID); err != nil {
		if werr := store.WithdrawCancel(context.WithoutCancel(ctx), c.DB, taskID, runID); werr != nil {
			err = errors.Join(err, werr)
		}
		return fmt.Errorf("cancelling task %s: %w", taskID, err)
	}
	return nil
}

// State asks the task for its state. A finished task answers from its last
// state as long as Temporal keeps its history.
func (c *Client) State(ctx context.Context, taskID string) (task.State, error) {
	var st task.State
	v, err := c.Temporal.QueryWorkflow(ctx, taskID, "", task.QueryState)
	if err != nil {
		return st, fmt.Errorf("querying task %s: %w", taskID, err)
	}
	if err := v.Get(&st); err != nil {
		return st, fmt.Errorf("decoding the state of task %s: %w", taskID, err)
	}
	return st, nil
}

// WaitIdle polls the task's state until no turn runs and no prompt is queued,
// or the task has ended, and returns that state.
func (c *Client) WaitIdle(ctx context.Context, taskID string, every time.Duration) (task.State, error) {
	if every <= 0 {
		every = 200 * time.Millisecond
	}
	for {
		st, err := c.State(ctx, taskID)
		if err == nil && st.RunningTurn == 0 && len(st.Pending) == 0 && st.Status != task.StatusRunning {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("waiting for task %s to be idle: %w", taskID, context.Cause(ctx))
		case <-time.After(every):
		}
	}
}

// IsNotFound reports whether err says the task does not exist.
func IsNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

func (c *Client) update(ctx context.Context, taskID, name, updateID string, out any, args ...any) error {
	if updateID == "" {
		updateID = uuid.NewString() // one id for every send below
	}
	return retryNotReady(ctx, func() error {
		h, err := c.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID:   taskID,
			UpdateID:     updateID,
			UpdateName:   name,
			Args:         args,
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err != nil {
			return err
		}
		return h.Get(ctx, out)
	})
}

// ExtendDeadline moves the deadline of one of the task's pending permission requests.
func (c *Client) ExtendDeadline(ctx context.Context, taskID, requestID string, deadline time.Time) (task.PendingRequest, error) {
	var out task.PendingRequest
	err := c.update(ctx, taskID, task.UpdateExtendDeadline, "", &out, task.ExtendDeadline{RequestID: requestID, Deadline: deadline})
	if err != nil {
		return out, fmt.Errorf("extending request %s of task %s: %w", requestID, taskID, err)
	}
	return out, nil
}

// UpdateBudget changes the task's budget (task.UpdateBudget) and returns it as it now stands:
// the task's own bounds, completed by its host's default. A task that had spent its budget goes
// on when the new one leaves room. A change that sets no bound, or a negative one, is refused
// without reaching Temporal (its error wraps the *task.InvalidError of each problem).
func (c *Client) UpdateBudget(ctx context.Context, taskID string, change task.BudgetChange) (task.Budget, error) {
	var out task.Budget
	if err := change.Validate(); err != nil {
		return out, fmt.Errorf("changing the budget of task %s: %w", taskID, err)
	}
	if err := c.update(ctx, taskID, task.UpdateBudget, "", &out, change); err != nil {
		return out, fmt.Errorf("changing the budget of task %s: %w", taskID, err)
	}
	return out, nil
}

// Resolve answers a task that needs attention (task.UpdateResolve): retry resumes its session
// again; new_session starts its waiting prompt in a new session seeded with choice.Summary, or,
// when that is empty and the client has a database, with a summary of the old session built from
// the task's records (taskview.View.SessionSummary). It returns the turn that runs the waiting
// prompt.
func (c *Client) Resolve(ctx context.Context, taskID string, choice task.AttentionChoice) (int, error) {
	if err := choice.Validate(); err != nil {
		return 0, fmt.Errorf("resolving task %s: %w", taskID, &task.InvalidError{Field: "choice", Reason: err.Error()})
	}
	if choice.Choice == task.ResolveNewSession && choice.Summary == "" {
		if c.DB != nil {
			s, err := taskview.SessionSummary(ctx, c.DB, taskID)
			if err != nil {
				return 0, fmt.Errorf("resolving task %s: %w", taskID, err)
			}
			choice.Summary = s
		}
	}
	var turn int
	if err := c.update(ctx, taskID, task.UpdateResolve, "", &turn, choice); err != nil {
		return 0, fmt.Errorf("resolving task %s: %w", taskID, err)
	}
	return turn, nil
}

package taskclient

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// Fork starts task dst from the end of src's turn: a managed task on src's repository with src's
// settings, whose worktree starts at the turn's checkpoint on its own branch (drover/<dst>) and
// whose conversation resumes at the turn's last message in a session of its own (the CLI's
// --fork-session), so that src goes on untouched. prompt, when not empty, is dst's first prompt;
// without one dst waits for it. It needs DB (the turn's resume point and checkpoint).
func (c *Client) Fork(ctx context.Context, src, dst string, turn int, prompt task.Prompt) (task.PromptAccepted, error) {
	var out task.PromptAccepted
	if c.DB == nil {
		return out, errors.New("forking: no database to read the turn from")
	}
	p, err := c.params(ctx, src)
	if err != nil {
		return out, fmt.Errorf("forking task %s: %w", src, err)
	}
	if p.Repo == "" {
		return out, fmt.Errorf("forking task %s: %w", src, &task.InvalidError{Field: "task",
			Reason: "it has no managed workspace (it was started with a folder, not a repository): its files cannot be forked"})
	}
	end, err := store.TurnEnd(ctx, c.DB, src, turn)
	if err != nil {
		return out, fmt.Errorf("forking task %s at turn %d: %w", src, turn, err)
	}
	p.Carry, p.First = nil, nil
	p.Fork = &task.ForkPoint{Task: src, Turn: turn, SessionID: end.SessionID, LastMessageUUID: end.LastMessageUUID, Checkpoint: end.Checkpoint}
	if err := task.ValidateStart(dst, p); err != nil {
		return out, fmt.Errorf("forking task %s: %w", src, err)
	}
	if prompt.Text != "" || len(prompt.Attachments) > 0 {
		return c.Create(ctx, dst, p, prompt, "")
	}
	_, err = c.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: dst, TaskQueue: c.queue(),
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, task.WorkflowName, p)
	if err != nil {
		return out, fmt.Errorf("forking task %s into %s: %w", src, dst, err)
	}
	return out, nil
}

// params reads the parameters the task's current run started with, from its history's first
// event: what a fork copies.
func (c *Client) params(ctx context.Context, taskID string) (task.Params, error) {
	var p task.Params
	it := c.Temporal.GetWorkflowHistory(ctx, taskID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return p, fmt.Errorf("reading the start of task %s: no history", taskID)
	}
	ev, err := it.Next()
	if err != nil {
		return p, fmt.Errorf("reading the start of task %s: %w", taskID, err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return p, fmt.Errorf("reading the start of task %s: its first event is %s", taskID, ev.GetEventType())
	}
	if err := converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), &p); err != nil {
		return p, fmt.Errorf("decoding the parameters of task %s: %w", taskID, err)
	}
	return p, nil
}

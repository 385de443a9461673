package taskclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/workflows"
)

// Create starts the task taskID with its first prompt carried by the start itself
// (task.Params.First): Temporal records both at once, so the answer needs no worker, a busy
// worker does not hold it up, and the prompt cannot be lost before a worker takes it. When a
// task taskID runs already, the prompt goes to it as Prompt sends one, with updateID.
//
// updateID makes the call idempotent: the task remembers its first prompt's answer under it,
// so a creation sent again with the same id is answered once and queued once. Empty means a
// fresh id. Input is checked first, as Start checks it.
func (c *Client) Create(ctx context.Context, taskID string, p task.Params, prompt task.Prompt, updateID string) (task.PromptAccepted, error) {
	var out task.PromptAccepted
	if err := errors.Join(task.ValidateID(taskID), p.WithDefaults().Validate(), task.ValidatePrompt(prompt)); err != nil {
		return out, fmt.Errorf("creating task %s: %w", taskID, err)
	}
	if updateID == "" {
		updateID = uuid.NewString()
	}
	p = p.WithTitle(prompt)
	p.First = &task.FirstPrompt{Prompt: prompt, UpdateID: updateID}
	opts := client.StartWorkflowOptions{
		ID:                                       taskID,
		TypedSearchAttributes:                    workflows.StartSearchAttributes(p),
		TaskQueue:                                c.queue(),
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}
	run, err := c.Temporal.ExecuteWorkflow(ctx, opts, task.WorkflowName, p)
	if titleUnknown(err) {
		opts.TypedSearchAttributes = temporal.NewSearchAttributes()
		run, err = c.Temporal.ExecuteWorkflow(ctx, opts, task.WorkflowName, p)
	}
	var running *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &running):
		return c.Prompt(ctx, taskID, prompt, updateID)
	case err != nil:
		return out, fmt.Errorf("creating task %s: %w", taskID, err)
	}
	return task.PromptAccepted{Turn: 1, PromptUUID: workflows.PromptUUID(run.GetRunID(), 1)}, nil
}

// titleUnknown reports whether a start was refused because the namespace lacks the title's search
// attribute (a namespace set up before it existed, whose workers have not registered it yet):
// the task then starts without it, its title on the read side all the same.
func titleUnknown(err error) bool {
	var invalid *serviceerror.InvalidArgument
	return err != nil && strings.Contains(err.Error(), task.SearchTitle) &&
		(errors.As(err, &invalid) || strings.Contains(err.Error(), "not defined"))
}

// pollerFresh is how recently a worker must have polled to count as running: a poll waits up
// to about a minute for work before the worker polls again.
const pollerFresh = 90 * time.Second

// WorkersPolling reports whether a worker has polled the tasks' queue for workflow tasks
// lately, that is whether a command sent now can be taken.
func (c *Client) WorkersPolling(ctx context.Context) (bool, error) {
	resp, err := c.Temporal.DescribeTaskQueue(ctx, c.queue(), enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return false, fmt.Errorf("describing task queue %s: %w", c.queue(), err)
	}
	for _, p := range resp.GetPollers() {
		if time.Since(p.GetLastAccessTime().AsTime()) < pollerFresh {
			return true, nil
		}
	}
	return false, nil
}

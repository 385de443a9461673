package taskclient

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/internal/testkit/temporaltest"
	"github.com/drover-run/drover/task"
)

// A task whose first workflow task fails on the server (here: it sets a search attribute the
// namespace does not know, as a task does while a new namespace's attributes have not reached
// the server's caches) loses the Update that came with it. Start and Prompt send it again and
// the prompt is taken once, when the server's retry of the workflow task passes.
func TestCommandsOutlastAFailedWorkflowTask(t *testing.T) {
	t.Parallel()
	srv := temporaltest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tc, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: srv.Namespace()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)

	// The workflow fails the workflow task that first takes each prompt by setting an unknown
	// search attribute with the prompt's answer.
	var seen sync.Map
	var fails atomic.Int32
	queue := "notready"
	w := sdkworker.New(tc, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, _ task.Params) error {
		prompts := 0
		err := workflow.SetUpdateHandler(ctx, task.UpdatePrompt, func(ctx workflow.Context, p task.Prompt) (task.PromptAccepted, error) {
			prompts++
			if _, again := seen.LoadOrStore(p.Text, true); !again && !workflow.IsReplaying(ctx) {
				fails.Add(1)
				if err := workflow.UpsertTypedSearchAttributes(ctx, temporal.NewSearchAttributeKeyKeyword("DroverNoSuchAttribute").ValueSet("x")); err != nil {
					return task.PromptAccepted{}, err
				}
			}
			return task.PromptAccepted{Turn: prompts}, nil
		})
		if err != nil {
			return err
		}
		return workflow.Await(ctx, func() bool { return prompts == 2 })
	}, workflow.RegisterOptions{Name: task.WorkflowName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	c := &Client{Temporal: tc, TaskQueue: queue}
	acc, err := c.Start(ctx, "t1", task.Params{Workspace: "/w"}, task.Prompt{Text: "one"}, "")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if acc.Turn != 1 {
		t.Errorf("Start: turn %d, want 1", acc.Turn)
	}
	acc, err = c.Prompt(ctx, "t1", task.Prompt{Text: "two"}, "")
	if err != nil {
		t.Fatalf("Prompt: %v", err)
	}
	if acc.Turn != 2 {
		t.Errorf("Prompt: turn %d, want 2", acc.Turn)
	}
	if n := fails.Load(); n != 2 {
		t.Errorf("%d workflow tasks failed, want the first try of each command", n)
	}
}

package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
)

// controlVerbs are the commands that act on one task and return.
var controlVerbs = map[string]string{
	"interrupt": "Stop the running turn; the task stays open",
	"close":     "Let the task finish once its queued prompts have run",
	"cancel":    "Cancel the task: its running turn stops and its CLI process ends",
}

// newTaskControlCommand makes interrupt, close or cancel.
func newTaskControlCommand(a *app, verb string) *cobra.Command {
	c := &cobra.Command{
		Use:   verb + " TASK",
		Short: controlVerbs[verb],
		Args:  taskArg,
	}
	var out *output
	if verb == "interrupt" {
		out = addOutputFlags(c, false)
	}
	var pub *publishOptions
	if verb == "close" {
		pub = addPublishFlags(c, a)
	}
	c.RunE = func(c *cobra.Command, args []string) error {
		id, ctx := args[0], c.Context()
		return a.withClient(ctx, func(tc *taskclient.Client) error {
			switch verb {
			case "interrupt":
				r, err := tc.InterruptBy(ctx, id, currentUser())
				if err != nil {
					return err
				}
				if out.isJSON() {
					return writeJSON(a.stdout, struct {
						TaskID string `json:"task_id"`
						task.InterruptResult
					}{id, r})
				}
				if !r.Interrupted {
					fmt.Fprintf(a.stdout, "task %s: no turn was running\n", id)
					return nil
				}
				fmt.Fprintf(a.stdout, "task %s: turn %d interrupted\n", id, r.Turn)
			case "close":
				if err := tc.Close(ctx, id); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "task %s: closing after its queued prompts\n", id)
				if pub.remote != "" {
					return a.publishAfterClose(ctx, id, args[1], pub)
				}
			case "cancel":
				if err := a.cancelTask(ctx, tc, id); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "task %s: cancel requested\n", id)
			}
			return nil
		})
	}
	return c
}

// cancelTask cancels the task through tc with the cancel recorded in Postgres first, so that
// no attempt of the task's turns begins once the cancel is accepted (taskclient.Client.Cancel).
func (a *app) cancelTask(ctx context.Context, tc *taskclient.Client, id string) error {
	pool, err := store.Connect(ctx, a.env.databaseURL)
	if err != nil {
		return fmt.Errorf("cancelling task %s: %w", id, err)
	}
	defer pool.Close()
	withDB := *tc
	withDB.DB = pool
	return withDB.CancelBy(ctx, id, currentUser())
}

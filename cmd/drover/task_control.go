package main

import (
	"fmt"

	"github.com/spf13/cobra"

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
	c.RunE = func(c *cobra.Command, args []string) error {
		id, ctx := args[0], c.Context()
		return a.withClient(ctx, func(tc *taskclient.Client) error {
			switch verb {
			case "interrupt":
				r, err := tc.Interrupt(ctx, id)
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
			case "cancel":
				if err := tc.Cancel(ctx, id); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "task %s: cancel requested\n", id)
			}
			return nil
		})
	}
	return c
}

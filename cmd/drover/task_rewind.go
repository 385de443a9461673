package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/taskclient"
)

func newTaskRewindCommand(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "rewind TASK --to-turn N",
		Short: "Take a managed task back to an earlier turn, conversation and files",
		Long: `Take an idle managed task (one started with --repo) back to the end of turn N: its
next turn resumes the conversation at turn N's last message, in the files of turn N's
checkpoint. The later turns stay in the task's history; their checkpoints are kept
aside on the workspace remote, never deleted. --to-turn 0 goes back to the task's
start (a new conversation, the base's files). A running turn or queued prompts
refuse it: interrupt the task or let its queue finish first.`,
		Example: `  drover task rewind fix-login --to-turn 1`,
		Args:    taskArg,
	}
	out := addOutputFlags(c, false)
	turn := -1
	c.Flags().IntVar(&turn, "to-turn", -1, "the turn whose end the task goes back to (0: its start)")
	c.RunE = func(c *cobra.Command, args []string) error {
		if turn < 0 {
			return usageErrorf(c, "--to-turn N is required: the turn to go back to (0: the task's start)")
		}
		id, ctx := args[0], c.Context()
		return a.withClient(ctx, func(tc *taskclient.Client) error {
			r, err := tc.Rewind(ctx, id, turn)
			if err != nil {
				return err
			}
			if out.isJSON() {
				return writeJSON(a.stdout, struct {
					TaskID  string `json:"task_id"`
					Rewound any    `json:"rewound"`
				}{id, r})
			}
			fmt.Fprintf(a.stdout, "task %s: back at the end of turn %d (checkpoint %s)", id, r.Turn, short(r.Checkpoint))
			if len(r.SetAside) > 0 {
				fmt.Fprintf(a.stdout, "; turns %v kept aside under %s", r.SetAside, r.KeptRefs)
			}
			fmt.Fprintln(a.stdout)
			return nil
		})
	}
	return c
}

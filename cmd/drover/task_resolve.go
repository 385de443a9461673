package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
)

func newTaskResolveCommand(a *app) *cobra.Command {
	var retry, newSession bool
	var summary string
	c := &cobra.Command{
		Use:   "resolve TASK (--retry | --new-session)",
		Short: "Choose what a task whose session could not be resumed does (status needs_attention)",
		Long: `A task needs attention when the CLI refused every way drover has to resume its
session: its prompts wait, and drover never starts a new session by itself.
--retry resumes the session again (after you repaired what kept it from resuming,
or to try once more). --new-session starts the waiting prompt in a new session
whose first prompt carries a summary of the old one: each completed turn's prompt
and answer, read from the task's records, or the text of --summary.`,
		Example: `  drover task resolve review --retry
  drover task resolve review --new-session
  drover task resolve review --new-session --summary "We renamed the package; tests pass."`,
		Args: taskArg,
	}
	out := addOutputFlags(c, false)
	f := c.Flags()
	f.BoolVar(&retry, "retry", false, "resume the session again")
	f.BoolVar(&newSession, "new-session", false, "start the waiting prompt in a new session seeded with a summary of the old one")
	f.StringVar(&summary, "summary", "", "with --new-session: the summary to seed it with (default: built from the task's turns)")
	c.MarkFlagsMutuallyExclusive("retry", "new-session")
	c.RunE = func(c *cobra.Command, args []string) error {
		choice := task.AttentionChoice{Summary: summary}
		switch {
		case retry && summary == "":
			choice.Choice = task.ResolveRetry
		case newSession:
			choice.Choice = task.ResolveNewSession
		case retry:
			return usageErrorf(c, "--summary goes with --new-session")
		default:
			return usageErrorf(c, "which choice? give --retry or --new-session")
		}
		id, ctx := args[0], c.Context()
		return a.withClient(ctx, func(tc *taskclient.Client) error {
			if choice.Choice == task.ResolveNewSession && choice.Summary == "" {
				pool, err := store.Connect(ctx, a.env.databaseURL)
				if err != nil {
					return fmt.Errorf("reading the task's turns for the summary: %w", err)
				}
				defer pool.Close()
				tc.DB = pool
			}
			turn, err := tc.Resolve(ctx, id, choice)
			if err != nil {
				return err
			}
			if out.isJSON() {
				return writeJSON(a.stdout, struct {
					TaskID string          `json:"task_id"`
					Choice task.Resolution `json:"choice"`
					Turn   int             `json:"turn"`
				}{id, choice.Choice, turn})
			}
			fmt.Fprintf(a.stdout, "task %s: %s; the waiting prompt runs as turn %d\n", id, choice.Choice, turn)
			return nil
		})
	}
	return c
}

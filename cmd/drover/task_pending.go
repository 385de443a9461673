package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/taskview"
)

func newTaskPendingCommand(a *app) *cobra.Command {
	var taskID string
	var limit int
	c := &cobra.Command{
		Use:   "pending [TASK]",
		Short: "List the permission requests waiting for a decision, across tasks or of TASK, oldest first",
		Args: func(c *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return usageErrorf(c, "want at most TASK; got %d arguments", len(args))
			case len(args) == 1 && taskID != "" && taskID != args[0]:
				return usageErrorf(c, "TASK %q and --task %q name different tasks", args[0], taskID)
			case len(args) == 1:
				return checkTaskArg(c, args[0])
			}
			return nil
		},
	}
	out := addOutputFlags(c, false)
	c.Flags().StringVar(&taskID, "task", "", "only this task's requests (same as TASK)")
	c.Flags().IntVar(&limit, "limit", 100, "at most this many (0: all)")
	c.RunE = func(c *cobra.Command, args []string) error {
		if limit < 0 {
			return inputError(fmt.Errorf("--limit: %d is negative; use 0 (all) or more", limit))
		}
		if len(args) == 1 {
			taskID = args[0]
		}
		ctx := c.Context()
		return a.withView(ctx, func(v *taskview.View) error {
			reqs, err := v.Pending(ctx, taskID, limit)
			if err != nil {
				return err
			}
			if out.isJSON() {
				return writeJSON(a.stdout, reqs)
			}
			if len(reqs) == 0 {
				fmt.Fprintln(a.stdout, "nothing waits for a decision")
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK\tREQUEST\tTURN\tTOOL\tWAITING SINCE\tDEADLINE\tWHAT")
			for _, r := range reqs {
				what := r.Summary
				if r.Reasked {
					what = "(asked again after a retry) " + what
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.TaskID, r.RequestID, r.Turn, r.Tool,
					r.Since.Local().Format(time.DateTime), r.Deadline.Local().Format(time.DateTime), clip(what, 80))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, "\nanswer with: drover task approve TASK REQUEST   or   drover task deny TASK REQUEST --reason WHY")
			return nil
		})
	}
	return c
}

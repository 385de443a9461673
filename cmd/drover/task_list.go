package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/taskclient"
)

func newTaskListCommand(a *app) *cobra.Command {
	var (
		query string
		limit int
	)
	c := &cobra.Command{
		Use:   "list",
		Short: "List the most recent tasks, newest first",
		Args:  noArgs,
	}
	out := addOutputFlags(c, false)
	c.Flags().StringVar(&query, "query", "", `extra visibility filter, e.g. DroverStatus = "idle"`)
	c.Flags().IntVar(&limit, "limit", 50, "at most this many tasks (0: all)")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if limit < 0 {
			return inputError(fmt.Errorf("--limit: %d is negative; use 0 (all) or more", limit))
		}
		ctx := c.Context()
		return a.withClient(ctx, func(tc *taskclient.Client) error {
			list, err := tc.List(ctx, query, limit)
			if err != nil {
				return err
			}
			if out.isJSON() {
				if list == nil {
					list = []taskclient.Summary{}
				}
				return writeJSON(a.stdout, list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK\tSTATUS\tTURNS\tCOST USD\tMODEL\tSTARTED\tWORKSPACE")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%.4f\t%s\t%s\t%s\n", s.TaskID, s.Status, s.Turns, s.CostUSD,
					dash(s.Model), s.Started.Local().Format(time.DateTime), s.Workspace)
			}
			return tw.Flush()
		})
	}
	return c
}

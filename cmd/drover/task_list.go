package main

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskview"
)

func newTaskListCommand(a *app) *cobra.Command {
	var (
		status   string
		awaiting bool
		text     string
		limit    int
	)
	c := &cobra.Command{
		Use:   "list",
		Short: "List the most recent tasks, newest first",
		Long: `List the most recent tasks, newest first, from Postgres: no worker needs to run.
The status is what each task's workflow last recorded; turns and cost add up its
turns' accounting.`,
		Example: `  drover task list
  drover task list --status idle --search refactor
  drover task list --awaiting-approval -o json`,
		Args: noArgs,
	}
	out := addOutputFlags(c, false)
	c.Flags().StringVar(&status, "status", "", "only tasks with this status ("+statusNames()+")")
	c.Flags().BoolVar(&awaiting, "awaiting-approval", false, "only tasks with a request waiting for a decision")
	c.Flags().StringVarP(&text, "search", "q", "", "only tasks whose id, title, workspace, model or a prompt contains this text (any case)")
	c.Flags().StringVar(&text, "text", "", "another name for --search")
	c.Flags().IntVar(&limit, "limit", 50, "at most this many tasks (0: all)")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if limit < 0 {
			return inputError(fmt.Errorf("--limit: %d is negative; use 0 (all) or more", limit))
		}
		if status != "" && !slices.Contains(task.Statuses(), task.Status(status)) {
			return inputError(fmt.Errorf("--status: %q is not a status; use one of %s", status, statusNames()))
		}
		ctx := c.Context()
		return a.withView(ctx, func(v *taskview.View) error {
			list, err := v.List(ctx, taskview.Filter{Status: task.Status(status), AwaitingApproval: awaiting, Text: text, Limit: limit})
			if err != nil {
				return err
			}
			if out.isJSON() {
				return writeJSON(a.stdout, list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK\tTITLE\tSTATUS\tWAITING\tTURNS\tCOST USD\tMODEL\tCREATED\tWORKSPACE")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.4f\t%s\t%s\t%s\n", s.ID, dash(listTitle(s.Title)), s.Status, s.PendingApprovals,
					s.Turns, s.CostUSD, dash(s.Model), s.CreatedAt.Local().Format(time.DateTime), s.Workspace)
			}
			return tw.Flush()
		})
	}
	return c
}

// listTitleRunes bounds a title in the table, so that a row stays on one line of a terminal.
const listTitleRunes = 40

// listTitle is title cut to listTitleRunes characters for the table (the JSON form has it whole).
func listTitle(title string) string {
	if r := []rune(title); len(r) > listTitleRunes {
		return strings.TrimSpace(string(r[:listTitleRunes-1])) + "…"
	}
	return title
}

func statusNames() string {
	var names []string
	for _, s := range task.Statuses() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

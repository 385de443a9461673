package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/taskclient"
)

func newTaskShowCommand(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "show TASK",
		Short: "Print a task's state, cost and turns",
		Args:  taskArg,
	}
	out := addOutputFlags(c, true)
	c.RunE = func(c *cobra.Command, args []string) error {
		id, ctx := args[0], c.Context()
		return a.withClient(ctx, func(tc *taskclient.Client) error {
			st, err := tc.State(ctx, id)
			if err != nil {
				return err
			}
			if out.isJSON() {
				return writeJSON(a.stdout, st)
			}
			w := a.stdout
			fmt.Fprintf(w, "task        %s\nstatus      %s\nworkspace   %s\nmode        %s\nmodel       %s\n",
				id, st.Status, st.Workspace, st.PermissionMode, dash(st.Model))
			fmt.Fprintf(w, "turns       %d (failed %d)\ncost        $%.6f\ntokens      in %d, out %d\n",
				st.Totals.Turns, st.Totals.FailedTurns, st.Totals.CostUSD, st.Totals.InputTokens, st.Totals.OutputTokens)
			fmt.Fprintf(w, "session     %s\nresume at   %s\nhost queue  %s\n", dash(st.SessionID), dash(st.LastMessageUUID), dash(st.HostQueue))
			if st.RunningTurn > 0 {
				fmt.Fprintf(w, "running     turn %d\n", st.RunningTurn)
			}
			for _, p := range st.Pending {
				fmt.Fprintf(w, "queued      turn %d: %s\n", p.Turn, clip(p.Prompt.Text, 60))
			}
			showBudget(w, st)
			if st.LastError != "" {
				fmt.Fprintf(w, "last error  %s\n", st.LastError)
			}
			return showTurns(ctx, a.env, id, w)
		})
	}
	return c
}

// showTurns prints the task's accounting rows when the database is reachable.
func showTurns(ctx context.Context, e env, id string, stdout io.Writer) error {
	pool, err := store.Connect(ctx, e.databaseURL)
	if err != nil {
		fmt.Fprintf(stdout, "(turn records unavailable: %v)\n", err)
		return nil
	}
	defer pool.Close()
	turns, err := store.ListTurns(ctx, pool, id)
	if err != nil {
		fmt.Fprintf(stdout, "(turn records unavailable: %v)\n", err)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nTURN\tSTATUS\tATTEMPTS\tCOST USD\tIN\tOUT\tPROMPT")
	for _, t := range turns {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.6f\t%d\t%d\t%s\n", t.Turn, t.Status, t.Attempts, t.CostUSD, t.InputTokens, t.OutputTokens, clip(t.Prompt, 50))
	}
	return tw.Flush()
}

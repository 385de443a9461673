package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskview"
)

// showAuthors says who changed the task's budget last and who cancelled it.
func showAuthors(w io.Writer, d taskview.Detail) {
	if d.BudgetBy != "" {
		fmt.Fprintf(w, "budget by   %s\n", d.BudgetBy)
	}
	if d.CancelledBy != "" && d.CancelledAt != nil {
		fmt.Fprintf(w, "cancelled   by %s at %s\n", d.CancelledBy, d.CancelledAt.Local().Format(time.DateTime))
	}
}

func newTaskShowCommand(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "show TASK",
		Short: "Print a task's state, cost, turns and waiting requests",
		Long: `Print a task's state, cost, turns and waiting requests, from Postgres: no worker
needs to run. The status, mode and queued prompts are what the task's workflow last
recorded.`,
		Args: taskArg,
	}
	out := addOutputFlags(c, true)
	c.RunE = func(c *cobra.Command, args []string) error {
		id, ctx := args[0], c.Context()
		return a.withView(ctx, func(v *taskview.View) error {
			d, err := v.Show(ctx, id)
			if err != nil {
				return err
			}
			if out.isJSON() {
				return writeJSON(a.stdout, d)
			}
			if err := printShow(a.stdout, id, d); err != nil {
				return err
			}
			if len(d.Pending) > 0 {
				fmt.Fprintf(a.stdout, "\nanswer with: drover task approve %s REQUEST   or   drover task deny %s REQUEST --reason WHY\n", id, id)
			}
			return nil
		})
	}
	return c
}

// printShow prints what task show says of a task as text, but for its closing hint.
func printShow(w io.Writer, id string, d taskview.Detail) error {
	fmt.Fprintf(w, "task        %s\ntitle       %s\nstatus      %s\nworkspace   %s\nmode        %s\nmodel       %s\n",
		id, dash(d.Title), d.Status, dash(d.Workspace), dash(string(d.Mode)), dash(d.Model))
	printRepo(w, d.Repo, d.Base)
	fmt.Fprintf(w, "turns       %d (failed %d)\ncost        $%.6f\ntokens      in %d, out %d, cache read %d, cache written %d\n",
		d.Summary.Turns, d.FailedTurns, d.CostUSD, d.Tokens.Input, d.Tokens.Output, d.Tokens.CacheRead, d.Tokens.CacheCreation)
	if cw := d.ContextWindow; cw != nil {
		fmt.Fprintf(w, "context     %d of %d tokens\n", cw.Used, cw.Limit)
	}
	fmt.Fprintf(w, "session     %s\nresume at   %s\nhost        %s\n", dash(d.SessionID), dash(d.ResumeAt), dash(d.Host))
	if d.RunningTurn > 0 {
		fmt.Fprintf(w, "running     turn %d\n", d.RunningTurn)
	}
	for _, p := range d.Queued {
		fmt.Fprintf(w, "queued      turn %d: %s\n", p.Turn, clip(p.Prompt.Text, 60))
	}
	if d.Totals != nil {
		st := task.State{Totals: *d.Totals, BudgetExhausted: d.BudgetExhausted}
		if d.Budget != nil {
			st.Budget = *d.Budget
		}
		showBudget(w, st)
	}
	showAuthors(w, d)
	if d.Wait != nil {
		fmt.Fprintf(w, "waits       for account %s (%s) since %s\n", d.Wait.Account, d.Wait.Reason, d.Wait.Since.Local().Format(time.DateTime))
	}
	for _, p := range d.Pending {
		fmt.Fprintf(w, "waits for   a decision on request %s (%s: %s) since %s\n", p.RequestID, p.Tool, clip(p.Summary, 50),
			p.Since.Local().Format(time.DateTime))
	}
	for _, r := range d.Deciding {
		verb := "denied"
		if r.Allow {
			verb = "approved"
		}
		fmt.Fprintf(w, "decided     request %s (%s: %s) %s by %s; applies when the task's worker runs\n", r.RequestID, r.Tool,
			clip(r.Summary, 50), verb, r.By)
	}
	if at := d.Attention; at != nil {
		fmt.Fprintf(w, "NEEDS ATTENTION since %s: the session of turn %d could not be resumed (%s)\n", at.At.Local().Format(time.DateTime), at.Turn, clip(at.Error, 120))
		fmt.Fprintf(w, "            nothing runs until you choose: drover task resolve %s --retry   or   drover task resolve %s --new-session\n", id, id)
	}
	if d.LastError != "" {
		fmt.Fprintf(w, "last error  %s\n", d.LastError)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nTURN\tSTATUS\tATTEMPTS\tCOST USD\tIN\tOUT\tPROMPT")
	for _, t := range d.Turns {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.6f\t%d\t%d\t%s\n", t.Turn, t.Status, t.Attempts, t.CostUSD, t.Tokens.Input, t.Tokens.Output, clip(t.Prompt, 50))
	}
	return tw.Flush()
}

// printRepo prints a managed task's repository and base; nothing for an unmanaged task.
func printRepo(w io.Writer, repo, base string) {
	if repo == "" {
		return
	}
	if base == "" {
		base = "the default branch"
	}
	fmt.Fprintf(w, "repo        %s (base %s)\n", repo, base)
}

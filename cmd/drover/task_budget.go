package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
)

func newTaskBudgetCommand(a *app) *cobra.Command {
	var budget task.Budget
	c := &cobra.Command{
		Use:   "budget TASK",
		Short: "Change a task's budget; a task that spent it goes on when the new one leaves room",
		Long: `Change a task's budget. Each flag given replaces that bound of the task's own
budget; 0 removes it (the worker's default then applies). A task whose budget is
spent (status budget_exhausted) goes on when the new budget leaves room: its
waiting prompts run, and a turn cut for the budget is continued.`,
		Example: `  drover task budget review --budget-cost 5
  drover task budget review --budget-turns 40 --budget-duration 2h`,
		Args: taskArg,
	}
	out := addOutputFlags(c, false)
	f := c.Flags()
	// The flags are named as on drover task start. --max-cost and --max-duration are accepted too;
	// --max-turns is not: it names the agent's loop limit.
	f.Float64Var(&budget.MaxCostUSD, "budget-cost", 0, "bound what the API bills the task, failed attempts included, in US dollars (0: no bound of its own)")
	f.IntVar(&budget.MaxTurns, "budget-turns", 0, "bound the task's turns (0: no bound of its own)")
	f.DurationVar(&budget.MaxDuration, "budget-duration", 0, "bound the time the task's turns run, added up (0: no bound of its own)")
	f.Float64Var(&budget.MaxCostUSD, "max-cost", 0, "another name of --budget-cost")
	f.DurationVar(&budget.MaxDuration, "max-duration", 0, "another name of --budget-duration")
	_ = f.MarkHidden("max-cost")
	_ = f.MarkHidden("max-duration")
	c.RunE = func(c *cobra.Command, args []string) error {
		var change task.BudgetChange
		if f.Changed("budget-cost") || f.Changed("max-cost") {
			change.MaxCostUSD = &budget.MaxCostUSD
		}
		if f.Changed("budget-turns") {
			change.MaxTurns = &budget.MaxTurns
		}
		if f.Changed("budget-duration") || f.Changed("max-duration") {
			change.MaxDuration = &budget.MaxDuration
		}
		if change == (task.BudgetChange{}) {
			return usageErrorf(c, "which bound? give --budget-cost, --budget-turns or --budget-duration")
		}
		if err := change.Validate(); err != nil {
			return inputError(err)
		}
		change.By = currentUser()
		id, ctx := args[0], c.Context()
		return a.withClient(ctx, func(tc *taskclient.Client) error {
			b, err := tc.UpdateBudget(ctx, id, change)
			if err != nil {
				return err
			}
			if out.isJSON() {
				return writeJSON(a.stdout, struct {
					TaskID string      `json:"task_id"`
					Budget task.Budget `json:"budget"`
				}{id, b})
			}
			fmt.Fprintf(a.stdout, "task %s: budget %s\n", id, budgetText(b))
			return nil
		})
	}
	return c
}

// budgetText is a budget for a person: its bounds, or "none".
func budgetText(b task.Budget) string {
	var parts []string
	if b.MaxCostUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.4f", b.MaxCostUSD))
	}
	if b.MaxTurns > 0 {
		parts = append(parts, fmt.Sprintf("%d turns", b.MaxTurns))
	}
	if b.MaxDuration > 0 {
		parts = append(parts, b.MaxDuration.String())
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// showBudget prints a task's budget, what it spent, and which bound it reached.
func showBudget(w io.Writer, st task.State) {
	t := st.Totals
	if t.FailedAttemptsCostUSD > 0 || !st.Budget.IsZero() {
		fmt.Fprintf(w, "billed      $%.6f (failed attempts $%.6f)\nwork time   %s\n", t.BilledCostUSD(), t.FailedAttemptsCostUSD, t.WorkDuration)
	}
	if !st.Budget.IsZero() {
		fmt.Fprintf(w, "budget      %s\n", budgetText(st.Budget))
	}
	if x := st.BudgetExhausted; x != nil {
		how := "reached"
		if x.Cut {
			how = "cut"
		}
		fmt.Fprintf(w, "spent       %s at turn %d (%s): $%.6f, %d turns, %s; raise it with drover task budget\n",
			x.Bound, x.Turn, how, x.CostUSD, x.Turns, x.WorkDuration)
	}
}

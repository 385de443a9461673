package workflows

import (
	"errors"
	"fmt"
	"math"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// budgetChangeID gates task budgets: a history from before them runs its turns without a budget
// and records no spend.
const budgetChangeID = "task-budget"

// continueAfterBudget is the prompt that continues a turn cut for its budget, once the budget
// is raised.
const continueAfterBudget = "Your budget was raised. Continue the work you were doing where you stopped."

// budgetOn reports whether this task's turns run with budgets (see budgetChangeID).
func (s *taskState) budgetOn(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, budgetChangeID, workflow.DefaultVersion, 1) != workflow.DefaultVersion
}

// budget is the task's budget as it stands: its own, completed by the default of the host that
// ran its last turn.
func (s *taskState) budget() task.Budget { return s.p.Budget.WithDefault(s.hostBudget) }

// setBudgetHandler registers UpdateBudget.
func (s *taskState) setBudgetHandler(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, task.UpdateBudget, s.updateBudget,
		workflow.UpdateHandlerOptions{Validator: s.validateBudget, Description: "change the task's budget"}); err != nil {
		return fmt.Errorf("setting the %s update handler: %w", task.UpdateBudget, err)
	}
	return nil
}

// validateBudget is the validator of UpdateBudget.
func (s *taskState) validateBudget(ctx workflow.Context, c task.BudgetChange) error {
	if err := s.validateOpen(ctx); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return rejection(task.ErrTypeInvalidBudget, err.Error())
	}
	return nil
}

// updateBudget is the handler of UpdateBudget: it changes the task's own budget and, when the
// task had spent its budget and the new one leaves room, lets it go on: its waiting prompts run,
// and a turn cut for the budget is continued by a prompt of its own, first in the queue. A
// running turn keeps the budget it started with.
func (s *taskState) updateBudget(ctx workflow.Context, c task.BudgetChange) (task.Budget, error) {
	// The status may change without a turn: an idle task that had spent its budget is idle again.
	defer s.publish(ctx)
	s.p.Budget = c.Apply(s.p.Budget)
	s.budgetBy = c.By
	b := s.budget()
	log := workflow.GetLogger(ctx)
	if s.exhausted == nil {
		log.Info("budget changed", "budget", b)
		return b, nil
	}
	if bound := b.Reached(s.totals); bound != "" {
		s.exhausted.Budget, s.exhausted.Bound = b, bound
		log.Info("budget changed; still spent", "budget", b, "bound", bound)
		return b, nil
	}
	if s.exhausted.Cut && !s.closing {
		s.turn++
		q := task.QueuedPrompt{Turn: s.turn, PromptUUID: PromptUUID(s.firstRunID, s.turn), Prompt: task.Prompt{Text: continueAfterBudget}}
		s.pending = append([]task.QueuedPrompt{q}, s.pending...)
		s.queuedBytes += task.PromptSize(q.Prompt)
		log.Info("budget raised; the cut turn continues", "budget", b, "cut_turn", s.exhausted.Turn, "turn", q.Turn)
	} else {
		log.Info("budget raised", "budget", b, "pending", len(s.pending))
	}
	s.exhausted = nil
	return b, nil
}

// budgetRejection is the refusal of a prompt sent while the task's budget is spent.
func budgetRejection(x task.BudgetExhausted) error {
	return temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("the task has spent its budget (%s: %s); raise it (drover task budget) to send prompts", x.Bound, spentOf(x)),
		task.ErrTypeBudgetExhausted, temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{x}})
}

// spentOf says what a task spent against the bound it reached, for a person.
func spentOf(x task.BudgetExhausted) string {
	switch x.Bound {
	case task.BoundCost:
		return fmt.Sprintf("$%.4f of $%.4f", x.CostUSD, x.Budget.MaxCostUSD)
	case task.BoundTurns:
		return fmt.Sprintf("%d of %d turns", x.Turns, x.Budget.MaxTurns)
	case task.BoundDuration:
		return fmt.Sprintf("%s of %s", x.WorkDuration, x.Budget.MaxDuration)
	}
	return "spent"
}

// budgetAfterTurn takes in what a turn that ran reports of the task's spend: its duration, the
// cost of the task's failed attempts, its host's default budget, and whether it spent the budget
// (the host says so, or the totals reach a bound).
func (s *taskState) budgetAfterTurn(ctx workflow.Context, turn int, res task.RunTurnResult) {
	s.totals.WorkDuration += msDuration(res.DurationMS)
	s.totals.FailedAttemptsCostUSD = math.Max(s.totals.FailedAttemptsCostUSD, res.FailedAttemptsCostUSD)
	s.hostBudget = res.HostBudget
	switch {
	case res.BudgetExhausted != nil:
		x := *res.BudgetExhausted
		s.exhausted = &x
	default:
		b := s.budget()
		bound := b.Reached(s.totals)
		if bound == "" {
			return
		}
		s.exhausted = &task.BudgetExhausted{Bound: bound, Budget: b, CostUSD: s.totals.BilledCostUSD(),
			Turns: s.totals.Turns, WorkDuration: s.totals.WorkDuration, Turn: turn, At: workflow.Now(ctx)}
	}
	workflow.GetLogger(ctx).Info("budget spent", "turn", turn, "bound", s.exhausted.Bound, "cut", s.exhausted.Cut)
}

// refusedForBudget reports whether err is the host's refusal to run the turn of q because the
// task's budget is spent. The prompt then goes back to the head of the queue, and the task
// waits for its budget to be raised; the turn did not run and is not counted.
func (s *taskState) refusedForBudget(ctx workflow.Context, q task.QueuedPrompt, err error) bool {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != task.ErrTypeBudgetExhausted {
		return false
	}
	var x task.BudgetExhausted
	var hostBudget task.Budget
	if appErr.HasDetails() {
		if derr := appErr.Details(&x, &hostBudget); derr != nil {
			workflow.GetLogger(ctx).Warn("reading the budget refusal's details", "error", derr)
		}
	}
	if x.Bound == "" {
		x = task.BudgetExhausted{Bound: task.BoundCost, Budget: s.budget(), CostUSD: s.totals.BilledCostUSD(),
			Turns: s.totals.Turns, WorkDuration: s.totals.WorkDuration, Turn: q.Turn, At: workflow.Now(ctx)}
	}
	s.hostBudget = hostBudget
	s.totals.FailedAttemptsCostUSD = math.Max(s.totals.FailedAttemptsCostUSD, x.CostUSD-s.totals.CostUSD)
	s.exhausted = &x
	s.pending = append([]task.QueuedPrompt{q}, s.pending...)
	s.queuedBytes += task.PromptSize(q.Prompt)
	workflow.GetLogger(ctx).Info("turn refused: the task's budget is spent", "turn", q.Turn, "bound", x.Bound)
	return true
}

// waitForBudget waits, while the task's budget is spent and prompts wait, for the budget to be
// raised, the task to close, or a reason to continue as new. A task closed meanwhile ends
// without running its waiting prompts.
func (s *taskState) waitForBudget(ctx workflow.Context) error {
	if s.closing {
		workflow.GetLogger(ctx).Info("task closed with its budget spent; its waiting prompts do not run", "pending", len(s.pending))
		s.setLastError(fmt.Sprintf("%d waiting prompts did not run: the task closed with its budget spent (%s)", len(s.pending), s.exhausted.Bound))
		s.pending = nil
		s.queuedBytes = 0
		return nil
	}
	s.publish(ctx)
	return workflow.Await(ctx, func() bool { return s.exhausted == nil || s.closing || s.wantContinueAsNew(ctx) })
}

// budgetInput gives a turn's RunTurn the task's budget and what it spent so far.
func (s *taskState) budgetInput(in *task.RunTurnInput) {
	if !s.budgeted {
		return
	}
	spent := s.totals
	in.Budget, in.Spent = s.p.Budget, &spent
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

func cloneExhausted(x *task.BudgetExhausted) *task.BudgetExhausted {
	if x == nil {
		return nil
	}
	c := *x
	return &c
}

package api

import (
	"context"
	"net/http"
	"time"

	"github.com/drover-run/drover/task"
)

// BudgetChange is the body of POST /api/v1/tasks/{id}/budget: each bound given replaces the
// task's; a bound set to zero is removed.
type BudgetChange struct {
	MaxCostUSD  *float64  `json:"max_cost_usd,omitempty"`
	MaxTurns    *int      `json:"max_turns,omitempty"`
	MaxDuration *Duration `json:"max_duration,omitempty"`
}

func budgetJSON(b task.Budget) BudgetJSON {
	return BudgetJSON{MaxCostUSD: b.MaxCostUSD, MaxTurns: b.MaxTurns, MaxDuration: Duration(b.MaxDuration)}
}

func (s *Server) changeBudget(w http.ResponseWriter, r *http.Request) {
	id, e := taskID(r)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	var body BudgetChange
	if e := decode(r, &body); e != nil {
		s.writeError(w, r, e)
		return
	}
	c := task.BudgetChange{MaxCostUSD: body.MaxCostUSD, MaxTurns: body.MaxTurns, By: actor(r)}
	if body.MaxDuration != nil {
		d := time.Duration(*body.MaxDuration)
		c.MaxDuration = &d
	}
	if err := c.Validate(); err != nil {
		s.writeError(w, r, invalidInput(err))
		return
	}
	var b task.Budget
	if e := s.command(r, id, true, func(ctx context.Context) (err error) {
		b, err = s.cfg.Tasks.UpdateBudget(ctx, id, c)
		return err
	}); e != nil {
		s.writeError(w, r, e)
		return
	}
	writeJSON(w, http.StatusOK, budgetJSON(b))
}

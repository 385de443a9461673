package store

import (
	"context"
	"errors"
	"fmt"
)

// AttemptCost is what the API billed one attempt of a turn so far.
type AttemptCost struct {
	TaskID    string
	AttemptID string
	Turn      int
	CostUSD   float64
}

// RecordAttemptCost records what an attempt was billed so far. The recorded cost only grows: a
// smaller figure (a late, stale write) changes nothing.
func RecordAttemptCost(ctx context.Context, db DB, c AttemptCost) error {
	if c.TaskID == "" || c.AttemptID == "" || c.Turn < 1 {
		return errors.New("recording an attempt's cost: task id, attempt id and turn are required")
	}
	_, err := db.Exec(ctx, `
		INSERT INTO task_attempt_costs AS c (task_id, attempt_id, turn, cost_usd)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (task_id, attempt_id) DO UPDATE SET
			cost_usd = greatest(c.cost_usd, excluded.cost_usd), updated_at = now()`,
		c.TaskID, c.AttemptID, c.Turn, c.CostUSD)
	if err != nil {
		return fmt.Errorf("recording the cost of attempt %s of task %s: %w", c.AttemptID, c.TaskID, err)
	}
	return nil
}

// Spend is what the API billed a task.
type Spend struct {
	// CommittedUSD is what its committed turns cost (task_turns).
	CommittedUSD float64
	// FailedAttemptsUSD is what its attempts that did not commit their turn cost.
	FailedAttemptsUSD float64
}

// BilledUSD is everything the API billed the task.
func (s Spend) BilledUSD() float64 { return s.CommittedUSD + s.FailedAttemptsUSD }

// TaskSpend sums what the API billed the task: its committed turns, and the attempts that did
// not commit (failed, lost with their worker, or still running).
func TaskSpend(ctx context.Context, db DB, taskID string) (Spend, error) {
	var s Spend
	err := db.QueryRow(ctx, `
		SELECT
			(SELECT coalesce(sum(cost_usd), 0) FROM task_turns WHERE task_id = $1)::float8,
			(SELECT coalesce(sum(cost_usd), 0) FROM task_attempt_costs WHERE task_id = $1 AND NOT committed)::float8`,
		taskID).Scan(&s.CommittedUSD, &s.FailedAttemptsUSD)
	if err != nil {
		return Spend{}, fmt.Errorf("summing what task %s was billed: %w", taskID, err)
	}
	return s, nil
}

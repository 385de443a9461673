package store

import (
	"context"
	"fmt"
)

// RecordCancel records that the task's workflow run runID is being cancelled. A later cancel
// of the same task replaces the record.
func RecordCancel(ctx context.Context, db DB, taskID, runID string) error {
	_, err := db.Exec(ctx, `
		INSERT INTO task_cancels (task_id, run_id) VALUES ($1, $2)
		ON CONFLICT (task_id) DO UPDATE SET run_id = EXCLUDED.run_id, requested_at = now()`,
		taskID, runID)
	if err != nil {
		return fmt.Errorf("recording the cancel of task %s: %w", taskID, err)
	}
	return nil
}

// WithdrawCancel removes the record of a cancel of the run runID that Temporal was not told of.
func WithdrawCancel(ctx context.Context, db DB, taskID, runID string) error {
	if _, err := db.Exec(ctx, `DELETE FROM task_cancels WHERE task_id = $1 AND run_id = $2`, taskID, runID); err != nil {
		return fmt.Errorf("withdrawing the cancel of task %s: %w", taskID, err)
	}
	return nil
}

// Cancelled reports whether a cancel of the task's workflow run runID is recorded.
func Cancelled(ctx context.Context, db DB, taskID, runID string) (bool, error) {
	var found bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM task_cancels WHERE task_id = $1 AND run_id = $2)`,
		taskID, runID).Scan(&found)
	if err != nil {
		return false, fmt.Errorf("reading whether task %s was cancelled: %w", taskID, err)
	}
	return found, nil
}

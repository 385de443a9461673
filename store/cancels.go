package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RecordCancel records that the task's workflow run runID is being cancelled, by by (empty:
// nobody named). A later cancel of the same task replaces the record.
func RecordCancel(ctx context.Context, db DB, taskID, runID, by string) error {
	_, err := db.Exec(ctx, `
		INSERT INTO task_cancels (task_id, run_id, requested_by) VALUES ($1, $2, $3)
		ON CONFLICT (task_id) DO UPDATE SET run_id = EXCLUDED.run_id, requested_at = now(),
			requested_by = EXCLUDED.requested_by`,
		taskID, runID, by)
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

// CancelOf returns who cancelled the task and when, and whether a cancel is recorded at all.
func CancelOf(ctx context.Context, db DB, taskID string) (by string, at time.Time, found bool, err error) {
	err = db.QueryRow(ctx, `SELECT requested_by, requested_at FROM task_cancels WHERE task_id = $1`, taskID).Scan(&by, &at)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", time.Time{}, false, nil
	case err != nil:
		return "", time.Time{}, false, fmt.Errorf("reading the cancel of task %s: %w", taskID, err)
	}
	return by, at, true, nil
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

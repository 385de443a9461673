package store

import (
	"context"
	"fmt"
)

// ListExecutorsOnHost returns the executor rows a host (executor id) serves.
func ListExecutorsOnHost(ctx context.Context, db DB, executorID string) ([]Executor, error) {
	rows, err := db.Query(ctx, `SELECT `+executorColumns+` FROM executors_running WHERE executor_id = $1 ORDER BY task_id`, executorID)
	if err != nil {
		return nil, fmt.Errorf("listing executors of host %s: %w", executorID, err)
	}
	defer rows.Close()
	var out []Executor
	for rows.Next() {
		e, err := scanExecutor(rows)
		if err != nil {
			return nil, fmt.Errorf("listing executors of host %s: %w", executorID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing executors of host %s: %w", executorID, err)
	}
	return out, nil
}

// ClearResumePoint forgets the task's session on behalf of executionID, after
// the CLI refused to resume it: the next turn starts a new session. The row
// becomes not resumable. A stale executionID gets ErrStaleExecution.
func ClearResumePoint(ctx context.Context, db DB, taskID, executionID, reason string) error {
	tag, err := db.Exec(ctx, `
		UPDATE executors_running SET
			session_id = '', resume_token = '', last_message_uuid = '',
			resumable = false, status = 'failed', pid = NULL,
			error_message = $3, updated_at = now()
		WHERE task_id = $1 AND execution_id = $2`, taskID, executionID, reason)
	if err != nil {
		return fmt.Errorf("clearing the resume point of task %s: %w", taskID, err)
	}
	if tag.RowsAffected() == 0 {
		return staleOrMissing(ctx, db, "clearing the resume point", taskID, executionID)
	}
	return nil
}

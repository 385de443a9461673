package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ExecutorStatus is the life-cycle state of a task's executor row.
type ExecutorStatus string

// The executor statuses.
const (
	ExecutorStarting ExecutorStatus = "starting" // an attempt owns the row; its CLI is not up yet
	ExecutorRunning  ExecutorStatus = "running"  // the attempt's CLI process runs the turn (PID set)
	ExecutorIdle     ExecutorStatus = "idle"     // the last turn committed; its process waits for the next (PID set) or is gone
	ExecutorFailed   ExecutorStatus = "failed"   // the attempt failed (see Error); its process is gone
	ExecutorStopped  ExecutorStatus = "stopped"  // the process was stopped on purpose; the resume point stands
)

// Valid reports whether s is one of the executor statuses.
func (s ExecutorStatus) Valid() bool {
	switch s {
	case ExecutorStarting, ExecutorRunning, ExecutorIdle, ExecutorFailed, ExecutorStopped:
		return true
	}
	return false
}

// Live reports whether an attempt holds the row with a process that may still run: starting or
// running.
func (s ExecutorStatus) Live() bool { return s == ExecutorStarting || s == ExecutorRunning }

// Executor is a task's row in executors_running: where the task's session resumes, and which
// attempt, host and process serve it.
type Executor struct {
	TaskID string
	// SessionID and LastMessageUUID are the committed resume point: the session and the last
	// transcript entry of the last committed turn (--resume, --resume-session-at). Only a commit
	// moves them; a rejected resume clears them.
	SessionID       string
	LastMessageUUID string
	Status          ExecutorStatus
	// AttemptID is the attempt that owns the row; every write on an attempt's behalf is
	// compare-and-set on it.
	AttemptID string
	// AttemptToken is the owner's opaque handle, by which a host that restarts can end an attempt
	// its earlier run left behind. Nil when none was given.
	AttemptToken []byte
	Turn         int    // the turn the owner runs or last ran
	HostID       string // the worker host serving the task
	PID          int    // the CLI's process id while it runs or waits; 0 when none
	Workspace    string
	Model        string
	// Checkpoint and CheckpointTurn are a managed task's last committed checkpoint and the turn
	// that recorded it ("" and 0: none yet).
	Checkpoint     string
	CheckpointTurn int
	Error          string // why the last attempt failed or its process stopped
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

const executorColumns = `task_id, session_id, last_message_uuid, status, attempt_id, attempt_token,
	turn, host_id, coalesce(pid, 0), workspace, model, checkpoint, checkpoint_turn, error, created_at, updated_at`

func scanExecutor(row pgx.Row) (Executor, error) {
	var e Executor
	err := row.Scan(&e.TaskID, &e.SessionID, &e.LastMessageUUID, &e.Status, &e.AttemptID, &e.AttemptToken,
		&e.Turn, &e.HostID, &e.PID, &e.Workspace, &e.Model, &e.Checkpoint, &e.CheckpointTurn, &e.Error, &e.CreatedAt, &e.UpdatedAt)
	return e, err
}

// GetExecutor returns the task's executor row, or ErrNotFound.
func GetExecutor(ctx context.Context, db DB, taskID string) (Executor, error) {
	e, err := scanExecutor(db.QueryRow(ctx,
		`SELECT `+executorColumns+` FROM executors_running WHERE task_id = $1`, taskID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Executor{}, fmt.Errorf("getting executor for task %s: %w", taskID, ErrNotFound)
	}
	if err != nil {
		return Executor{}, fmt.Errorf("getting executor for task %s: %w", taskID, err)
	}
	return e, nil
}

// ListHostExecutors returns the executor rows of the tasks a host serves, by task id.
func ListHostExecutors(ctx context.Context, db DB, hostID string) ([]Executor, error) {
	rows, err := db.Query(ctx, `SELECT `+executorColumns+` FROM executors_running WHERE host_id = $1 ORDER BY task_id`, hostID)
	if err != nil {
		return nil, fmt.Errorf("listing executors of host %s: %w", hostID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Executor, error) { return scanExecutor(row) })
	if err != nil {
		return nil, fmt.Errorf("listing executors of host %s: %w", hostID, err)
	}
	return out, nil
}

// SetExecutorRunning records that the attempt's CLI process is up and runs the turn: status
// running and its pid. A stale attemptID gets ErrStaleAttempt.
func SetExecutorRunning(ctx context.Context, db DB, taskID, attemptID string, pid int) error {
	tag, err := db.Exec(ctx, `
		UPDATE executors_running SET status = 'running', pid = $3, error = '', updated_at = now()
		WHERE task_id = $1 AND attempt_id = $2`,
		taskID, attemptID, pid)
	if err != nil {
		return fmt.Errorf("setting executor for task %s running: %w", taskID, err)
	}
	if tag.RowsAffected() == 0 {
		return staleOrMissing(ctx, db, "setting executor running", taskID, attemptID)
	}
	return nil
}

// MarkExecutorStopped records that the process which served the task's last committed turn
// (owned by attemptID) has stopped on purpose: an idle row becomes stopped and forgets its pid;
// the resume point stands. A row in any other state, or owned by another attempt, is left alone
// (applied=false): a newer attempt has taken over.
func MarkExecutorStopped(ctx context.Context, db DB, taskID, attemptID, reason string) (applied bool, err error) {
	tag, err := db.Exec(ctx, `
		UPDATE executors_running SET status = 'stopped', pid = NULL, error = $3, updated_at = now()
		WHERE task_id = $1 AND attempt_id = $2 AND status = 'idle'`,
		taskID, attemptID, reason)
	if err != nil {
		return false, fmt.Errorf("marking executor for task %s stopped: %w", taskID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// staleOrMissing explains why a compare-and-set on the executor row matched nothing: the row is
// missing (ErrNotFound) or owned by another attempt (ErrStaleAttempt).
func staleOrMissing(ctx context.Context, db DB, op, taskID, attemptID string) error {
	var owner string
	err := db.QueryRow(ctx, `SELECT attempt_id FROM executors_running WHERE task_id = $1`, taskID).Scan(&owner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%s for task %s: executor %w", op, taskID, ErrNotFound)
	case err != nil:
		return fmt.Errorf("%s for task %s: attempt %s does not own the row (%w), and reading the owner failed: %w",
			op, taskID, attemptID, ErrStaleAttempt, err)
	}
	return fmt.Errorf("%s for task %s: %w: attempt %s, owner is %s", op, taskID, ErrStaleAttempt, attemptID, owner)
}

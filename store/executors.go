package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ExecutorStatus is the life-cycle state of a task's executor row.
type ExecutorStatus string

// The executor statuses.
const (
	ExecutorStarting ExecutorStatus = "starting" // claimed by an attempt; the CLI is not up yet
	ExecutorRunning  ExecutorStatus = "running"  // the CLI process is up and serving a turn
	ExecutorIdle     ExecutorStatus = "idle"     // the last turn committed; waiting for the next
	ExecutorFailed   ExecutorStatus = "failed"   // the attempt failed; see ErrorMessage
	ExecutorStopped  ExecutorStatus = "stopped"  // the process was stopped on purpose
)

// Valid reports whether s is one of the executor statuses.
func (s ExecutorStatus) Valid() bool {
	switch s {
	case ExecutorStarting, ExecutorRunning, ExecutorIdle, ExecutorFailed, ExecutorStopped:
		return true
	}
	return false
}

// Executor is a task's row in executors_running.
type Executor struct {
	TaskID string
	// SessionID is the Claude session the latest process runs (set when it starts and when a
	// turn commits). It may be ahead of the resume point: see ResumePoint.
	SessionID string
	// ResumeToken and LastMessageUUID are the committed resume point: the session and the last
	// transcript entry of the last committed turn. Only CommitTurn writes them.
	ResumeToken     string
	LastMessageUUID string
	Status          ExecutorStatus
	Resumable       bool
	ExecutionID     string // the attempt that owns the row
	ExecutorID      string // the host (worker) serving the task
	PID             int    // the CLI's process id; 0 when none is known
	WorktreePath    string
	Model           string
	ErrorMessage    string
	Metadata        json.RawMessage // a JSON object; {} when empty
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// ResumePoint returns the committed resume point: the session to pass to --resume and the
// transcript entry to pass to --resume-session-at. Both are empty before the first commit.
func (e Executor) ResumePoint() (sessionID, messageUUID string) {
	return e.ResumeToken, e.LastMessageUUID
}

// Claim asks for a task's executor row on behalf of one attempt.
type Claim struct {
	TaskID       string // required
	ExecutionID  string // required: identifies the attempt, e.g. the activity's id and attempt
	ExecutorID   string // the host (worker identity)
	WorktreePath string
	Model        string
	// Metadata, a JSON object, is merged into the row's metadata (its top-level keys replace
	// existing ones). Nil leaves the metadata unchanged.
	Metadata json.RawMessage
}

const executorColumns = `task_id, session_id, resume_token, status, resumable, last_message_uuid,
	execution_id, executor_id, coalesce(pid, 0), worktree_path, model, error_message, metadata,
	created_at, updated_at`

func scanExecutor(row pgx.Row) (Executor, error) {
	var e Executor
	err := row.Scan(&e.TaskID, &e.SessionID, &e.ResumeToken, &e.Status, &e.Resumable,
		&e.LastMessageUUID, &e.ExecutionID, &e.ExecutorID, &e.PID, &e.WorktreePath, &e.Model,
		&e.ErrorMessage, &e.Metadata, &e.CreatedAt, &e.UpdatedAt)
	return e, err
}

// ClaimExecutor makes c.ExecutionID the owner of the task's executor row, creating the row for a
// new task, and returns it with status starting. The session and committed resume point are
// kept: they are what the claiming attempt resumes from. Any earlier owner is stale from now on.
func ClaimExecutor(ctx context.Context, db DB, c Claim) (Executor, error) {
	if c.TaskID == "" || c.ExecutionID == "" {
		return Executor{}, errors.New("claiming executor: task id and execution id are required")
	}
	metadata := c.Metadata
	if metadata == nil {
		metadata = json.RawMessage("{}")
	}
	var object map[string]json.RawMessage
	if err := json.Unmarshal(metadata, &object); err != nil || object == nil {
		return Executor{}, fmt.Errorf("claiming executor for task %s: metadata is not a JSON object", c.TaskID)
	}
	row := db.QueryRow(ctx, `
		INSERT INTO executors_running AS x
			(task_id, execution_id, executor_id, worktree_path, model, metadata, status)
		VALUES ($1, $2, $3, $4, $5, $6, 'starting')
		ON CONFLICT (task_id) DO UPDATE SET
			execution_id = excluded.execution_id,
			executor_id = excluded.executor_id,
			worktree_path = excluded.worktree_path,
			model = excluded.model,
			metadata = x.metadata || excluded.metadata,
			status = 'starting',
			pid = NULL,
			error_message = '',
			updated_at = now()
		RETURNING `+executorColumns,
		c.TaskID, c.ExecutionID, c.ExecutorID, c.WorktreePath, c.Model, metadata)
	e, err := scanExecutor(row)
	if err != nil {
		return Executor{}, fmt.Errorf("claiming executor for task %s: %w", c.TaskID, err)
	}
	return e, nil
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

// SetExecutorRunning records that the attempt's CLI process is up: status running, its pid, and
// the session it runs (an empty sessionID keeps the recorded one). The resume point is not
// touched. A stale executionID gets ErrStaleExecution.
func SetExecutorRunning(ctx context.Context, db DB, taskID, executionID string, pid int, sessionID string) error {
	tag, err := db.Exec(ctx, `
		UPDATE executors_running SET
			status = 'running',
			pid = $3,
			session_id = CASE WHEN $4 = '' THEN session_id ELSE $4 END,
			error_message = '',
			updated_at = now()
		WHERE task_id = $1 AND execution_id = $2`,
		taskID, executionID, pid, sessionID)
	if err != nil {
		return fmt.Errorf("setting executor for task %s running: %w", taskID, err)
	}
	if tag.RowsAffected() == 0 {
		return staleOrMissing(ctx, db, "setting executor running", taskID, executionID)
	}
	return nil
}

// MarkExecutor sets the status, error message and resumable flag of the task's executor row
// on behalf of executionID. Failed and stopped clear the pid: the process is gone. A stale
// executionID gets ErrStaleExecution.
func MarkExecutor(ctx context.Context, db DB, taskID, executionID string, status ExecutorStatus, errMsg string, resumable bool) error {
	if !status.Valid() {
		return fmt.Errorf("marking executor for task %s: invalid status %q", taskID, status)
	}
	tag, err := db.Exec(ctx, `
		UPDATE executors_running SET
			status = $3,
			error_message = $4,
			resumable = $5,
			pid = CASE WHEN $3 IN ('failed', 'stopped') THEN NULL ELSE pid END,
			updated_at = now()
		WHERE task_id = $1 AND execution_id = $2`,
		taskID, executionID, string(status), errMsg, resumable)
	if err != nil {
		return fmt.Errorf("marking executor for task %s %s: %w", taskID, status, err)
	}
	if tag.RowsAffected() == 0 {
		return staleOrMissing(ctx, db, "marking executor "+string(status), taskID, executionID)
	}
	return nil
}

// staleOrMissing explains why a compare-and-set on the executor row matched nothing: the row is
// missing (ErrNotFound) or owned by another execution (ErrStaleExecution).
func staleOrMissing(ctx context.Context, db DB, op, taskID, executionID string) error {
	var owner string
	err := db.QueryRow(ctx, `SELECT execution_id FROM executors_running WHERE task_id = $1`, taskID).Scan(&owner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%s for task %s: executor %w", op, taskID, ErrNotFound)
	case err != nil:
		return fmt.Errorf("%s for task %s: execution %s does not own the row (%w), and reading the owner failed: %w",
			op, taskID, executionID, ErrStaleExecution, err)
	}
	return fmt.Errorf("%s for task %s: %w: execution %s, owner is %s", op, taskID, ErrStaleExecution, executionID, owner)
}

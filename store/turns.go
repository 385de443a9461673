package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-run/drover/task"
)

// TurnRecord is a turn's row in task_turns.
type TurnRecord struct {
	TaskID     string
	Turn       int
	Prompt     string
	PromptUUID string
	// ResumeSessionID and ResumeFromUUID are the resume point recorded by the turn's first
	// attempt: every attempt of the turn resumes there.
	ResumeSessionID     string
	ResumeFromUUID      string
	Status              task.TurnStatus
	Attempts            int
	CostUSD             float64
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64
	DurationMS          int64
	NumTurns            int
	ResultUUID          string
	LastMessageUUID     string
	IsError             bool
	Error               string
	// Checkpoint is the commit that recorded a managed task's worktree when the turn committed;
	// empty for an unmanaged task or a turn not committed.
	Checkpoint string
	StartedAt  time.Time
	FinishedAt time.Time // zero while the turn runs
}

// Finished reports whether the turn has its final status and accounting: a new attempt must not
// run it again.
func (r TurnRecord) Finished() bool { return r.Status != task.TurnRunning }

// TurnCommit is what an attempt commits when its turn reaches a result.
type TurnCommit struct {
	TaskID    string // required
	Turn      int
	AttemptID string // required: the attempt committing; must own the executor row
	// SessionID and LastMessageUUID become the executor's committed resume point; empty keeps
	// the previous value.
	SessionID       string
	LastMessageUUID string
	ResultUUID      string
	Status          task.TurnStatus // completed, failed or interrupted
	// This turn's own cost and tokens, not the CLI's running totals.
	CostUSD             float64
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64
	DurationMS          int64
	NumTurns            int
	IsError             bool
	Error               string
	// Checkpoint is the commit that recorded a managed task's worktree after the turn (empty for
	// an unmanaged task): stored with the turn and as the executor row's last committed
	// checkpoint, with the turn's number.
	Checkpoint string
	// Mirror brings the session's mirror to the files as they stand at this commit (see
	// MirrorUpdate); nil leaves it alone. Written in the same transaction, so the mirror never
	// lags the resume point.
	Mirror *MirrorUpdate
}

const turnColumns = `task_id, turn, prompt, prompt_uuid, resume_session_id, resume_from_uuid, status,
	attempts, cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens,
	duration_ms, num_turns, result_uuid, last_message_uuid, is_error, error, checkpoint, started_at, finished_at`

func scanTurn(row pgx.Row) (TurnRecord, error) {
	var r TurnRecord
	var finished *time.Time
	err := row.Scan(&r.TaskID, &r.Turn, &r.Prompt, &r.PromptUUID, &r.ResumeSessionID,
		&r.ResumeFromUUID, &r.Status, &r.Attempts, &r.CostUSD, &r.InputTokens, &r.OutputTokens,
		&r.CacheReadTokens, &r.CacheCreationTokens, &r.DurationMS, &r.NumTurns, &r.ResultUUID,
		&r.LastMessageUUID, &r.IsError, &r.Error, &r.Checkpoint, &r.StartedAt, &finished)
	if finished != nil {
		r.FinishedAt = *finished
	}
	return r, err
}

// CommitTurn records a turn's result in one transaction: it moves the executor's committed
// resume point (session and last message), marks the executor idle, and finishes the turn's row
// with its status, cost and tokens. It returns applied=false and writes nothing if the turn was
// already finished, so a second commit never counts cost twice. If c.AttemptID no longer owns
// the executor row it returns ErrStaleAttempt and writes nothing.
func CommitTurn(ctx context.Context, db TxDB, c TurnCommit) (applied bool, err error) {
	if c.TaskID == "" || c.AttemptID == "" {
		return false, errors.New("committing turn: task id and attempt id are required")
	}
	if !c.Status.Valid() || c.Status == task.TurnRunning {
		return false, fmt.Errorf("committing turn %d of task %s: invalid final status %q", c.Turn, c.TaskID, c.Status)
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		// The executor row first, in every function that writes both, so that two commits
		// queue on it instead of deadlocking.
		tag, err := tx.Exec(ctx, `
			UPDATE executors_running SET
				session_id = CASE WHEN $3 = '' THEN session_id ELSE $3 END,
				last_message_uuid = CASE WHEN $4 = '' THEN last_message_uuid ELSE $4 END,
				checkpoint = CASE WHEN $5 = '' THEN checkpoint ELSE $5 END,
				checkpoint_turn = CASE WHEN $5 = '' THEN checkpoint_turn ELSE $6 END,
				status = 'idle',
				error = '',
				updated_at = now()
			WHERE task_id = $1 AND attempt_id = $2`,
			c.TaskID, c.AttemptID, c.SessionID, c.LastMessageUUID, c.Checkpoint, c.Turn)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return staleOrMissing(ctx, tx, "committing turn", c.TaskID, c.AttemptID)
		}
		tag, err = tx.Exec(ctx, `
			UPDATE task_turns SET
				status = $3, cost_usd = $4, input_tokens = $5, output_tokens = $6,
				cache_read_tokens = $7, cache_creation_tokens = $8, duration_ms = $9, num_turns = $10,
				result_uuid = $11, last_message_uuid = $12, is_error = $13, error = $14,
				checkpoint = $15, finished_at = now()
			WHERE task_id = $1 AND turn = $2 AND status = 'running'`,
			c.TaskID, c.Turn, string(c.Status), c.CostUSD, c.InputTokens, c.OutputTokens,
			c.CacheReadTokens, c.CacheCreationTokens, c.DurationMS, c.NumTurns,
			c.ResultUUID, c.LastMessageUUID, c.IsError, c.Error, c.Checkpoint)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			applied = true
			// This attempt's cost is now the turn's, not a failed attempt's.
			if _, err := tx.Exec(ctx, `UPDATE task_attempt_costs SET committed = true, updated_at = now()
				WHERE task_id = $1 AND attempt_id = $2`, c.TaskID, c.AttemptID); err != nil {
				return err
			}
			return insertMirror(ctx, tx, c.TaskID, c.Turn, c.SessionID, c.Mirror)
		}
		if _, err := GetTurn(ctx, tx, c.TaskID, c.Turn); err != nil {
			return err
		}
		return errAlreadyFinished // roll the executor update back: the turn was committed before
	})
	if errors.Is(err, errAlreadyFinished) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("committing turn %d of task %s: %w", c.Turn, c.TaskID, err)
	}
	return applied, nil
}

// errAlreadyFinished makes CommitTurn roll back when the turn was already committed.
var errAlreadyFinished = errors.New("turn already finished")

// GetTurn returns one turn's row, or ErrNotFound.
func GetTurn(ctx context.Context, db DB, taskID string, turn int) (TurnRecord, error) {
	r, err := scanTurn(db.QueryRow(ctx,
		`SELECT `+turnColumns+` FROM task_turns WHERE task_id = $1 AND turn = $2`, taskID, turn))
	if errors.Is(err, pgx.ErrNoRows) {
		return TurnRecord{}, fmt.Errorf("getting turn %d of task %s: %w", turn, taskID, ErrNotFound)
	}
	if err != nil {
		return TurnRecord{}, fmt.Errorf("getting turn %d of task %s: %w", turn, taskID, err)
	}
	return r, nil
}

// ListTurns returns the task's turns in turn order; none for an unknown task.
func ListTurns(ctx context.Context, db DB, taskID string) ([]TurnRecord, error) {
	rows, err := db.Query(ctx,
		`SELECT `+turnColumns+` FROM task_turns WHERE task_id = $1 ORDER BY turn`, taskID)
	if err != nil {
		return nil, fmt.Errorf("listing turns of task %s: %w", taskID, err)
	}
	turns, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TurnRecord, error) { return scanTurn(row) })
	if err != nil {
		return nil, fmt.Errorf("listing turns of task %s: %w", taskID, err)
	}
	return turns, nil
}

// Totals sums a task's turns.
type Totals struct {
	Turns               int // turns begun, finished or not
	CostUSD             float64
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64
}

// TaskTotals sums the accounting of the task's turns; zero for an unknown task.
func TaskTotals(ctx context.Context, db DB, taskID string) (Totals, error) {
	var t Totals
	err := db.QueryRow(ctx, `
		SELECT count(*), coalesce(sum(cost_usd), 0), coalesce(sum(input_tokens), 0),
			coalesce(sum(output_tokens), 0), coalesce(sum(cache_read_tokens), 0),
			coalesce(sum(cache_creation_tokens), 0)
		FROM task_turns WHERE task_id = $1`, taskID).
		Scan(&t.Turns, &t.CostUSD, &t.InputTokens, &t.OutputTokens, &t.CacheReadTokens, &t.CacheCreationTokens)
	if err != nil {
		return Totals{}, fmt.Errorf("summing turns of task %s: %w", taskID, err)
	}
	return t, nil
}

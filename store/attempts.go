package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// AttemptStart is what an attempt of a turn knows when it begins.
type AttemptStart struct {
	TaskID    string // required
	AttemptID string // required: unique per attempt; becomes the owner of the executor row
	// AttemptToken is an opaque handle kept with the row while the attempt owns it (see
	// Executor.AttemptToken).
	AttemptToken []byte
	HostID       string
	Turn         int // 1-based
	Prompt       string
	PromptUUID   string // the same on every attempt of the turn
	Workspace    string
	Model        string
	// PID is the process that will run the attempt when it is already up (a warm process kept
	// from the task's previous turn): the row goes straight to running. Zero: starting.
	PID int
	// FallbackSessionID and FallbackMessageUUID are the caller's view of the resume point
	// before this turn. The row's committed resume point wins; these count only when the row
	// has none (a task whose rows were lost).
	FallbackSessionID   string
	FallbackMessageUUID string
	// NewSession starts the turn in a new session: the row's committed resume point is not
	// taken (a person chose so when it could not be resumed). Only the turn's first attempt
	// fixes its resume point; later ones get the same.
	NewSession bool
	// LostTurnError is recorded on earlier turns of the task still marked running: turns run
	// one at a time, so their last attempt died with its worker.
	LostTurnError string
}

// AttemptBegun is what BeginAttempt found and recorded.
type AttemptBegun struct {
	// Turn is the turn's record. Its ResumeSessionID and ResumeFromUUID are the resume point
	// fixed by the turn's first attempt: every attempt resumes there. When Turn.Finished(), an
	// earlier attempt committed the turn and this one must not run it again.
	Turn TurnRecord
	// SessionID and LastMessageUUID are the executor row's committed resume point as the claim
	// found it: where the last committed turn (this one, when it is finished) left the session.
	SessionID       string
	LastMessageUUID string
	// Checkpoint and CheckpointTurn are the executor row's last committed checkpoint of a
	// managed task's worktree and the turn that recorded it ("" and 0: none yet, the task's
	// base): what a retried attempt restores the worktree to.
	Checkpoint     string
	CheckpointTurn int
	// PriorCostUSD is what the task's committed turns cost so far.
	PriorCostUSD float64
	// LostTurns counts the earlier turns closed as failed (see AttemptStart.LostTurnError).
	LostTurns int64
}

// BeginAttempt begins an attempt of a turn in one transaction: it makes s.AttemptID the owner
// of the task's executor row (starting, or running with s.PID), closes earlier turns that were
// left running, records the turn (the first attempt inserts it with the resume point; later
// ones count themselves and get that same point back), sums the task's cost, and registers the
// attempt's event writer (see Writer).
//
// If the turn was already finished by an earlier attempt, the row is returned to idle and the
// finished record is returned: the caller answers from it. A turn begun with another prompt
// uuid gets ErrPromptMismatch, and an attempt of a turn older than the one the row serves (a
// straggler the task has moved past) gets ErrStaleAttempt; either way nothing is written.
func BeginAttempt(ctx context.Context, db TxDB, s AttemptStart) (AttemptBegun, error) {
	if err := s.check(); err != nil {
		return AttemptBegun{}, err
	}
	var out AttemptBegun
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		br := tx.SendBatch(ctx, s.batch())
		err := out.read(br)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		return out.settle(ctx, tx, s)
	})
	if err != nil {
		return AttemptBegun{}, fmt.Errorf("beginning attempt %s of turn %d of task %s: %w", s.AttemptID, s.Turn, s.TaskID, err)
	}
	return out, nil
}

// check refuses an attempt that names no task, no attempt or no turn.
func (s AttemptStart) check() error {
	if s.TaskID == "" || s.AttemptID == "" {
		return errors.New("beginning an attempt: task id and attempt id are required")
	}
	if s.Turn < 1 {
		return fmt.Errorf("beginning an attempt of task %s: turn %d is not a turn number", s.TaskID, s.Turn)
	}
	return nil
}

// The statements of BeginAttempt, in the order of its batch. The executor row comes first, as
// in every transaction that writes both tables, so that two of them queue on it instead of
// deadlocking.
const (
	claimExecutorSQL = `
		INSERT INTO executors_running AS x
			(task_id, attempt_id, attempt_token, turn, host_id, workspace, model, status, pid)
		VALUES ($1, $2, $3, $4, $5, $6, $7,
			CASE WHEN $8::integer > 0 THEN 'running' ELSE 'starting' END, nullif($8::integer, 0))
		ON CONFLICT (task_id) DO UPDATE SET
			attempt_id = excluded.attempt_id,
			attempt_token = excluded.attempt_token,
			turn = excluded.turn,
			host_id = excluded.host_id,
			workspace = excluded.workspace,
			model = excluded.model,
			status = excluded.status,
			pid = excluded.pid,
			error = '',
			updated_at = now()
		WHERE x.turn <= excluded.turn
		RETURNING session_id, last_message_uuid, checkpoint, checkpoint_turn`
	closeLostTurnsSQL = `
		UPDATE task_turns SET status = 'failed', is_error = true, error = $3, finished_at = now()
		WHERE task_id = $1 AND turn < $2 AND status = 'running'`
	recordTurnSQL = `
		INSERT INTO task_turns AS t (task_id, turn, prompt, prompt_uuid, resume_session_id, resume_from_uuid)
		SELECT $1, $2, $3, $4,
			CASE WHEN x.session_id <> '' AND NOT $7 THEN x.session_id ELSE $5 END,
			CASE WHEN x.session_id <> '' AND NOT $7 THEN x.last_message_uuid ELSE $6 END
		FROM executors_running x WHERE x.task_id = $1
		ON CONFLICT (task_id, turn) DO UPDATE SET attempts = t.attempts + 1
		WHERE t.status = 'running' AND t.prompt_uuid = excluded.prompt_uuid`
	taskCostSQL = `SELECT coalesce(sum(cost_usd), 0) FROM task_turns WHERE task_id = $1`
)

// batch queues BeginAttempt's statements: claim the executor row, close the lost turns, record
// the turn, read it back, sum the task's cost, register the event writer.
func (s AttemptStart) batch() *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(claimExecutorSQL, s.TaskID, s.AttemptID, s.AttemptToken, s.Turn, s.HostID, s.Workspace, s.Model, s.PID)
	b.Queue(closeLostTurnsSQL, s.TaskID, s.Turn, s.LostTurnError)
	b.Queue(recordTurnSQL, s.TaskID, s.Turn, s.Prompt, s.PromptUUID, s.FallbackSessionID, s.FallbackMessageUUID, s.NewSession)
	b.Queue(`SELECT `+turnColumns+` FROM task_turns WHERE task_id = $1 AND turn = $2`, s.TaskID, s.Turn)
	b.Queue(taskCostSQL, s.TaskID)
	b.Queue(registerWriterSQL, s.TaskID, s.AttemptID)
	return b
}

// read takes the answers of batch's statements, in order.
func (out *AttemptBegun) read(br pgx.BatchResults) error {
	if err := br.QueryRow().Scan(&out.SessionID, &out.LastMessageUUID, &out.Checkpoint, &out.CheckpointTurn); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			// A later turn's attempt owns the row: this one is a straggler.
			return fmt.Errorf("claiming the executor row: %w: a later turn owns it", ErrStaleAttempt)
		}
		return fmt.Errorf("claiming the executor row: %w", err)
	}
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("closing lost turns: %w", err)
	}
	out.LostTurns = tag.RowsAffected()
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("recording the turn: %w", err)
	}
	if out.Turn, err = scanTurn(br.QueryRow()); err != nil {
		return fmt.Errorf("reading the turn: %w", err)
	}
	if err := br.QueryRow().Scan(&out.PriorCostUSD); err != nil {
		return fmt.Errorf("summing the task's cost: %w", err)
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("registering the attempt's event writer: %w", err)
	}
	return nil
}

// settle refuses a turn begun with another prompt, and returns the executor row to idle when
// an earlier attempt finished the turn: the caller answers from its record.
func (out *AttemptBegun) settle(ctx context.Context, tx pgx.Tx, s AttemptStart) error {
	if out.Turn.PromptUUID != s.PromptUUID {
		return fmt.Errorf("%w: turn %d has prompt uuid %q, not %q", ErrPromptMismatch, s.Turn, out.Turn.PromptUUID, s.PromptUUID)
	}
	if !out.Turn.Finished() {
		return nil
	}
	_, err := tx.Exec(ctx, `UPDATE executors_running SET status = 'idle', updated_at = now()
		WHERE task_id = $1 AND attempt_id = $2`, s.TaskID, s.AttemptID)
	return err
}

// AttemptEnd is how an attempt that did not commit its turn ended.
type AttemptEnd struct {
	TaskID    string // required
	AttemptID string // required: must own the executor row
	// Status is ExecutorFailed (the attempt failed) or ExecutorStopped (stopped on purpose:
	// cancelled). Either way its process is gone.
	Status ExecutorStatus
	Error  string
	// ForgetSession clears the committed resume point. (A refused resume no longer does: the
	// task waits for a person, who may choose a new session, AttemptStart.NewSession.)
	ForgetSession bool
	// AbandonTurn, when positive, is the turn that gets no further attempt: its record is closed
	// as failed with Error (a finished record is left alone).
	AbandonTurn int
}

// EndAttempt records, in one transaction, the end of an attempt that did not commit: the
// executor row takes e.Status with no pid, and the turn is closed when it is abandoned. An
// attempt that no longer owns the row gets ErrStaleAttempt and writes nothing: the owner
// decides.
func EndAttempt(ctx context.Context, db TxDB, e AttemptEnd) error {
	if e.TaskID == "" || e.AttemptID == "" {
		return errors.New("ending an attempt: task id and attempt id are required")
	}
	if e.Status != ExecutorFailed && e.Status != ExecutorStopped {
		return fmt.Errorf("ending attempt %s of task %s: status %q is not an end", e.AttemptID, e.TaskID, e.Status)
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			UPDATE executors_running SET
				status = $3, pid = NULL, error = $4,
				session_id = CASE WHEN $5 THEN '' ELSE session_id END,
				last_message_uuid = CASE WHEN $5 THEN '' ELSE last_message_uuid END,
				updated_at = now()
			WHERE task_id = $1 AND attempt_id = $2`,
			e.TaskID, e.AttemptID, string(e.Status), e.Error, e.ForgetSession)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return staleOrMissing(ctx, tx, "ending the attempt", e.TaskID, e.AttemptID)
		}
		if e.AbandonTurn > 0 {
			_, err = tx.Exec(ctx, `
				UPDATE task_turns SET status = 'failed', is_error = true, error = $3, finished_at = now()
				WHERE task_id = $1 AND turn = $2 AND status = 'running'`,
				e.TaskID, e.AbandonTurn, e.Error)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("ending attempt %s of task %s: %w", e.AttemptID, e.TaskID, err)
	}
	return nil
}

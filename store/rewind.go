package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrTurnRunning: the task's executor row says a turn runs; its committed point cannot move.
var ErrTurnRunning = errors.New("a turn of the task is running")

// RewindPoint is where a rewound task's next turn resumes: the session and the last message of
// the turn gone back to, and its checkpoint ("" and turn 0: the task's start, a new session and
// the base).
type RewindPoint struct {
	Turn            int
	SessionID       string
	LastMessageUUID string
	Checkpoint      string
}

// TurnEnd reads where a completed turn of the task left it: its last message and checkpoint,
// with the session the task runs. Turn 0 is the task's start. A turn that did not complete is
// ErrNotFound.
func TurnEnd(ctx context.Context, db DB, taskID string, turn int) (RewindPoint, error) {
	p := RewindPoint{Turn: turn}
	if turn == 0 {
		return p, nil
	}
	err := db.QueryRow(ctx, `
		SELECT coalesce(e.session_id, ''), t.last_message_uuid, t.checkpoint
		FROM task_turns t LEFT JOIN executors_running e ON e.task_id = t.task_id
		WHERE t.task_id = $1 AND t.turn = $2 AND t.status = 'completed' AND t.last_message_uuid <> ''`,
		taskID, turn).Scan(&p.SessionID, &p.LastMessageUUID, &p.Checkpoint)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, fmt.Errorf("turn %d of task %s did not complete: %w", turn, taskID, ErrNotFound)
	}
	if err != nil {
		return p, fmt.Errorf("reading turn %d of task %s: %w", turn, taskID, err)
	}
	return p, nil
}

// Rewind sets the task's committed point back to p: the executor row's resume point and last
// committed checkpoint. A running turn refuses it (ErrTurnRunning); a task with no executor row
// has nothing to set back (ErrNotFound).
func Rewind(ctx context.Context, db TxDB, taskID string, p RewindPoint) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var status string
		err := tx.QueryRow(ctx, `SELECT status FROM executors_running WHERE task_id = $1 FOR UPDATE`, taskID).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("rewinding task %s: no executor: %w", taskID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("rewinding task %s: %w", taskID, err)
		}
		if status == string(ExecutorRunning) || status == string(ExecutorStarting) {
			return fmt.Errorf("rewinding task %s: %w", taskID, ErrTurnRunning)
		}
		_, err = tx.Exec(ctx, `
			UPDATE executors_running SET session_id = $2, last_message_uuid = $3, checkpoint = $4,
				checkpoint_turn = $5, updated_at = now()
			WHERE task_id = $1`, taskID, p.SessionID, p.LastMessageUUID, p.Checkpoint, p.Turn)
		if err != nil {
			return fmt.Errorf("rewinding task %s: %w", taskID, err)
		}
		return nil
	})
}

package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-run/drover/task"
)

// RecordTaskState records a task's state as its workflow published it at the time at (seq
// orders the records of the same time): status apart, the whole state as JSON. A record older
// than the one stored changes nothing, so that a retried write never goes back in time.
func RecordTaskState(ctx context.Context, db DB, taskID string, status task.Status, state json.RawMessage, at time.Time, seq int64) error {
	if taskID == "" || status == "" || len(state) == 0 {
		return fmt.Errorf("recording the state of task %q: the task id, its status and its state are required", taskID)
	}
	_, err := db.Exec(ctx, `
		INSERT INTO tasks (task_id, status, state, title, recorded_at, recorded_seq, updated_at)
		VALUES ($1, $2, $3, coalesce($3::jsonb->>'title', ''), $4, $5, $4)
		ON CONFLICT (task_id) DO UPDATE SET status = EXCLUDED.status, state = EXCLUDED.state, title = EXCLUDED.title,
			recorded_at = EXCLUDED.recorded_at, recorded_seq = EXCLUDED.recorded_seq,
			updated_at = greatest(tasks.updated_at, EXCLUDED.recorded_at)
		WHERE (tasks.recorded_at, tasks.recorded_seq) <= (EXCLUDED.recorded_at, EXCLUDED.recorded_seq)`,
		taskID, status, state, at, seq)
	if err != nil {
		return fmt.Errorf("recording the state of task %s: %w", taskID, err)
	}
	return nil
}

// TaskRow is what Postgres knows of one task: its recorded state (nil until the workflow
// records one), the totals of its turns and requests kept on its row, and its executor row.
type TaskRow struct {
	TaskID string
	// Title is the recorded title; for a task recorded without one, its first turn's prompt
	// (task.TitleOf makes a title of it).
	Title string
	// Status is the recorded status; without a record, running while a turn runs, else idle.
	Status task.Status
	// State is the task.State the workflow recorded last, as JSON; nil when none was.
	State     json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
	// Workspace and Model are the executor row's: what the last attempt ran with.
	Workspace string
	Model     string
	SessionID string
	ResumeAt  string // the committed resume point: the last message's uuid
	HostID    string
	// Totals sums the task's turns in task_turns, as kept on the task's row.
	Totals      Totals
	FailedTurns int
	RunningTurn int // the running turn's number; 0 when none runs
	// PendingApprovals counts the requests that wait for a decision nobody has recorded yet;
	// WaitingSince is when the oldest of them was asked (zero when none waits).
	PendingApprovals int
	WaitingSince     time.Time
	// ArchivedAt is when the task's archive was written (its rows are about to go); ImportedAt
	// when it was brought back from one. Zero: neither.
	ArchivedAt time.Time
	ImportedAt time.Time
}

// TaskFilter narrows ListTasks. The zero filter lists every task.
type TaskFilter struct {
	Status           task.Status // only tasks with this status
	AwaitingApproval bool        // only tasks with a request waiting for a decision
	// Text keeps the tasks whose id, title, workspace, model or a prompt contains it (any case).
	Text  string
	Limit int // at most this many; 0: all
	// After, when set, starts the list after this task: the next page of a listing in the
	// same order.
	After *TaskCursor
}

// TaskCursor is a task's place in a listing's order: newest first (CreatedAt descending),
// ties by TaskID descending.
type TaskCursor struct {
	CreatedAt time.Time
	TaskID    string
}

// CursorOf is the place of the row in a listing.
func (r TaskRow) CursorOf() TaskCursor { return TaskCursor{CreatedAt: r.CreatedAt, TaskID: r.TaskID} }

// taskColumns are the tasks row's columns a TaskRow reads, and the executor row's (x).
const taskColumns = `t.task_id,
	coalesce(nullif(t.title, ''), (SELECT p.prompt FROM task_turns p WHERE p.task_id = t.task_id ORDER BY p.turn LIMIT 1),
		t.state->'pending'->0->'prompt'->>'text', ''),
	t.status, t.state, t.created_at, t.updated_at, coalesce(x.workspace, ''),
	coalesce(nullif(x.model, ''), (SELECT e.payload->>'context_window_model' FROM task_events e
		WHERE e.task_id = t.task_id AND e.type = 'context_window' ORDER BY e.seq DESC LIMIT 1), ''),
	coalesce(x.session_id, ''), coalesce(x.last_message_uuid, ''),
	coalesce(x.host_id, ''), t.turns, t.failed_turns, t.running_turn, t.cost_usd::float8, t.input_tokens,
	t.output_tokens, t.cache_read_tokens, t.cache_creation_tokens, t.pending_approvals, t.waiting_since,
	t.archived_at, t.imported_at`

// textCondition keeps the tasks whose id, title, workspace, model or a prompt contains the text
// $n. The
// prompts are read task by task (an aggregate, which Postgres cannot turn into one scan of
// every turn), so that a page reads only the turns of the tasks it passes.
const textCondition = `(strpos(lower(t.task_id), lower($%[1]d)) > 0
	OR strpos(lower(t.title), lower($%[1]d)) > 0
	OR strpos(lower(coalesce(x.workspace, '')), lower($%[1]d)) > 0
	OR strpos(lower(coalesce(t.state->>'workspace', '')), lower($%[1]d)) > 0
	OR strpos(lower(coalesce(x.model, '')), lower($%[1]d)) > 0
	OR strpos(lower(coalesce(t.state->>'model', '')), lower($%[1]d)) > 0
	OR (SELECT coalesce(bool_or(strpos(lower(p.prompt), lower($%[1]d)) > 0), false)
		FROM task_turns p WHERE p.task_id = t.task_id))`

// ListTasksQuery is the SQL and arguments ListTasks runs for the filter: only the conditions
// the filter sets, so that Postgres picks the filter's index (tests EXPLAIN it).
func ListTasksQuery(f TaskFilter) (string, []any) {
	var where []string
	var args []any
	arg := func(v any) int { args = append(args, v); return len(args) }
	if f.Status != "" {
		where = append(where, fmt.Sprintf("t.status = $%d", arg(string(f.Status))))
	}
	if f.AwaitingApproval {
		where = append(where, "t.pending_approvals > 0")
	}
	if f.Text != "" {
		where = append(where, fmt.Sprintf(textCondition, arg(f.Text)))
	}
	if f.After != nil {
		where = append(where, fmt.Sprintf("(t.created_at, t.task_id) < ($%d, $%d)", arg(f.After.CreatedAt), arg(f.After.TaskID)))
	}
	q := "SELECT " + taskColumns + "\nFROM tasks t LEFT JOIN executors_running x ON x.task_id = t.task_id"
	if len(where) > 0 {
		q += "\nWHERE " + strings.Join(where, " AND ")
	}
	q += "\nORDER BY t.created_at DESC, t.task_id DESC"
	if f.Limit > 0 {
		q += fmt.Sprintf("\nLIMIT $%d", arg(f.Limit))
	}
	return q, args
}

func scanTaskRow(row pgx.Row) (TaskRow, error) {
	var r TaskRow
	var since, archived, imported *time.Time
	err := row.Scan(&r.TaskID, &r.Title, &r.Status, &r.State, &r.CreatedAt, &r.UpdatedAt, &r.Workspace, &r.Model,
		&r.SessionID, &r.ResumeAt, &r.HostID, &r.Totals.Turns, &r.FailedTurns, &r.RunningTurn,
		&r.Totals.CostUSD, &r.Totals.InputTokens, &r.Totals.OutputTokens, &r.Totals.CacheReadTokens,
		&r.Totals.CacheCreationTokens, &r.PendingApprovals, &since, &archived, &imported)
	for _, t := range []struct {
		src *time.Time
		dst *time.Time
	}{{since, &r.WaitingSince}, {archived, &r.ArchivedAt}, {imported, &r.ImportedAt}} {
		if t.src != nil {
			*t.dst = *t.src
		}
	}
	return r, err
}

// ListTasks returns the tasks the filter keeps, newest first (ties by id, descending), from
// the totals kept on each task's row: a page costs its rows, not the database's size.
func ListTasks(ctx context.Context, db DB, f TaskFilter) ([]TaskRow, error) {
	q, args := ListTasksQuery(f)
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TaskRow, error) { return scanTaskRow(row) })
	if err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	return out, nil
}

// GetTask returns one task's row, or ErrNotFound when Postgres knows nothing of it.
func GetTask(ctx context.Context, db DB, taskID string) (TaskRow, error) {
	if taskID == "" {
		return TaskRow{}, fmt.Errorf("reading a task: no task id: %w", ErrNotFound)
	}
	r, err := scanTaskRow(db.QueryRow(ctx, "SELECT "+taskColumns+`
		FROM tasks t LEFT JOIN executors_running x ON x.task_id = t.task_id WHERE t.task_id = $1`, taskID))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("reading task %s: %w", taskID, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("reading task %s: %w", taskID, err)
	}
	return r, nil
}

// LastEvent returns the task's latest event of the type, or ErrNotFound.
func LastEvent(ctx context.Context, db DB, taskID, eventType string) (Event, error) {
	var e Event
	err := db.QueryRow(ctx, `
		SELECT task_id, seq, turn, attempt, type, payload, created_at FROM task_events
		WHERE task_id = $1 AND type = $2 ORDER BY seq DESC LIMIT 1`, taskID, eventType).
		Scan(&e.TaskID, &e.Seq, &e.Turn, &e.Attempt, &e.Type, &e.Payload, &e.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fmt.Errorf("the last %s event of task %s: %w", eventType, taskID, ErrNotFound)
	}
	if err != nil {
		return e, fmt.Errorf("reading the last %s event of task %s: %w", eventType, taskID, err)
	}
	return e, nil
}

// QueuedPrompts returns how many prompts wait for a turn in the task's recorded state (0 for a
// task not recorded).
func QueuedPrompts(ctx context.Context, db DB, taskID string) (int, error) {
	var n int
	err := db.QueryRow(ctx, `SELECT coalesce(jsonb_array_length(state->'pending'), 0) FROM tasks WHERE task_id = $1`, taskID).Scan(&n)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("reading the queued prompts of task %s: %w", taskID, err)
	}
	return n, nil
}

// TaskTitles returns the title of each task of ids that has one: the recorded title, else its
// first turn's prompt, else the prompt its recorded state queues first (task.TitleOf makes a
// title of a prompt).
func TaskTitles(ctx context.Context, db DB, ids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := db.Query(ctx, `
		SELECT i.id, coalesce(nullif(t.title, ''),
			(SELECT p.prompt FROM task_turns p WHERE p.task_id = i.id ORDER BY p.turn LIMIT 1),
			t.state->'pending'->0->'prompt'->>'text', '')
		FROM unnest($1::text[]) AS i(id) LEFT JOIN tasks t ON t.task_id = i.id`, ids)
	if err != nil {
		return nil, fmt.Errorf("reading the titles of %d tasks: %w", len(ids), err)
	}
	var id, title string
	_, err = pgx.ForEachRow(rows, []any{&id, &title}, func() error {
		if title != "" {
			out[id] = title
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the titles of %d tasks: %w", len(ids), err)
	}
	return out, nil
}

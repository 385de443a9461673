package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
		INSERT INTO tasks (task_id, status, state, title, recorded_at, recorded_seq)
		VALUES ($1, $2, $3, coalesce($3::jsonb->>'title', ''), $4, $5)
		ON CONFLICT (task_id) DO UPDATE SET status = EXCLUDED.status, state = EXCLUDED.state, title = EXCLUDED.title,
			recorded_at = EXCLUDED.recorded_at, recorded_seq = EXCLUDED.recorded_seq
		WHERE (tasks.recorded_at, tasks.recorded_seq) <= (EXCLUDED.recorded_at, EXCLUDED.recorded_seq)`,
		taskID, status, state, at, seq)
	if err != nil {
		return fmt.Errorf("recording the state of task %s: %w", taskID, err)
	}
	return nil
}

// TaskRow is what Postgres knows of one task: its recorded state (nil until the workflow
// records one) and what its turns, requests and executor row add up to.
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
	// Totals sums the task's turns in task_turns.
	Totals      Totals
	FailedTurns int
	RunningTurn int // the running turn's number; 0 when none runs
	// PendingApprovals counts the requests that wait for a decision nobody has recorded yet;
	// WaitingSince is when the oldest of them was asked (zero when none waits).
	PendingApprovals int
	WaitingSince     time.Time
}

// TaskFilter narrows ListTasks. The zero filter lists every task.
type TaskFilter struct {
	Status           task.Status // only tasks with this status
	AwaitingApproval bool        // only tasks with a request waiting for a decision
	// Text keeps the tasks whose id, title, workspace, model or a prompt contains it (any case).
	Text  string
	Limit int // at most this many; 0: all
}

const taskRowsSQL = `
WITH ids AS (
	SELECT task_id FROM tasks
	UNION SELECT task_id FROM task_turns
	UNION SELECT task_id FROM permission_requests
), rows AS (
	SELECT i.task_id,
		coalesce(t.status, CASE WHEN tt.running > 0 THEN 'running' ELSE 'idle' END) AS status,
		t.state,
		least(t.created_at, tt.first_at, pr.first_at, x.created_at) AS created_at,
		greatest(t.recorded_at, tt.last_at, pr.last_at, x.updated_at) AS updated_at,
		coalesce(nullif(t.title, ''), (SELECT p.prompt FROM task_turns p WHERE p.task_id = i.task_id ORDER BY p.turn LIMIT 1),
			t.state->'pending'->0->'prompt'->>'text', '') AS title,
		coalesce(x.workspace, '') AS workspace,
		coalesce(nullif(x.model, ''), (SELECT e.payload->>'context_window_model' FROM task_events e
			WHERE e.task_id = i.task_id AND e.type = 'context_window' ORDER BY e.seq DESC LIMIT 1), '') AS model,
		coalesce(x.session_id, '') AS session_id, coalesce(x.last_message_uuid, '') AS resume_at,
		coalesce(x.host_id, '') AS host_id,
		tt.turns, tt.failed, tt.running_turn, tt.cost, tt.input, tt.output, tt.cache_read, tt.cache_creation,
		pr.pending, pr.since
	FROM ids i
	LEFT JOIN tasks t ON t.task_id = i.task_id
	LEFT JOIN executors_running x ON x.task_id = i.task_id
	CROSS JOIN LATERAL (
		SELECT count(*)::int AS turns, (count(*) FILTER (WHERE status = 'failed'))::int AS failed,
			(count(*) FILTER (WHERE status = 'running'))::int AS running,
			coalesce(max(turn) FILTER (WHERE status = 'running'), 0) AS running_turn,
			coalesce(sum(cost_usd), 0)::float8 AS cost, coalesce(sum(input_tokens), 0) AS input,
			coalesce(sum(output_tokens), 0) AS output, coalesce(sum(cache_read_tokens), 0) AS cache_read,
			coalesce(sum(cache_creation_tokens), 0) AS cache_creation,
			min(started_at) AS first_at, max(coalesce(finished_at, started_at)) AS last_at
		FROM task_turns WHERE task_id = i.task_id) tt
	CROSS JOIN LATERAL (
		SELECT (count(*) FILTER (WHERE status = 'pending' AND requested_at IS NULL))::int AS pending,
			min(created_at) FILTER (WHERE status = 'pending' AND requested_at IS NULL) AS since,
			min(created_at) AS first_at, max(updated_at) AS last_at
		FROM permission_requests WHERE task_id = i.task_id) pr
	WHERE ($1 = '' OR i.task_id = $1)
)
SELECT task_id, title, status, state, created_at, updated_at, workspace, model, session_id, resume_at, host_id,
	turns, failed, running_turn, cost, input, output, cache_read, cache_creation, pending, since
FROM rows
WHERE ($2 = '' OR status = $2) AND (NOT $3 OR pending > 0)
	AND ($4 = '' OR strpos(lower(task_id), lower($4)) > 0 OR strpos(lower(title), lower($4)) > 0
		OR strpos(lower(workspace), lower($4)) > 0
		OR strpos(lower(coalesce(state->>'workspace', '')), lower($4)) > 0
		OR strpos(lower(model), lower($4)) > 0 OR strpos(lower(coalesce(state->>'model', '')), lower($4)) > 0
		OR EXISTS (SELECT 1 FROM task_turns p WHERE p.task_id = rows.task_id AND strpos(lower(p.prompt), lower($4)) > 0))
ORDER BY created_at DESC, task_id
LIMIT $5`

func scanTaskRow(row pgx.Row) (TaskRow, error) {
	var r TaskRow
	var since *time.Time
	err := row.Scan(&r.TaskID, &r.Title, &r.Status, &r.State, &r.CreatedAt, &r.UpdatedAt, &r.Workspace, &r.Model,
		&r.SessionID, &r.ResumeAt, &r.HostID, &r.Totals.Turns, &r.FailedTurns, &r.RunningTurn,
		&r.Totals.CostUSD, &r.Totals.InputTokens, &r.Totals.OutputTokens, &r.Totals.CacheReadTokens,
		&r.Totals.CacheCreationTokens, &r.PendingApprovals, &since)
	if since != nil {
		r.WaitingSince = *since
	}
	return r, err
}

// ListTasks returns the tasks the filter keeps, newest first.
func ListTasks(ctx context.Context, db DB, f TaskFilter) ([]TaskRow, error) {
	var lim *int
	if f.Limit > 0 {
		lim = &f.Limit
	}
	rows, err := db.Query(ctx, taskRowsSQL, "", f.Status, f.AwaitingApproval, f.Text, lim)
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
	r, err := scanTaskRow(db.QueryRow(ctx, taskRowsSQL, taskID, "", false, "", nil))
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

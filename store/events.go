package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// EventsChannel is the Postgres notification channel on which every append is announced, with
// an EventNotice as payload.
const EventsChannel = "drover_events"

// EventNotice is the JSON payload of a notification on EventsChannel: which events of which
// task were committed. It carries ids only, never event payloads.
type EventNotice struct {
	TaskID   string `json:"task_id"`
	FirstSeq int64  `json:"first_seq"`
	LastSeq  int64  `json:"last_seq"`
}

// EventInput is one event to append.
type EventInput struct {
	Turn    int
	Attempt int
	Type    string          // required
	Payload json.RawMessage // valid JSON, or nil for none
}

// Event is one event of a task's log.
type Event struct {
	TaskID    string
	Seq       int64 // 1, 2, 3, … per task
	Turn      int
	Attempt   int
	Type      string
	Payload   json.RawMessage // nil if appended without one
	CreatedAt time.Time
}

// appendEventsSQL appends a batch in one statement, so in one transaction (the caller's, if db is
// a pgx.Tx): it advances the task's counter row by the batch size, inserts the events numbered
// after the counter's previous value, and queues one notification, which Postgres sends when the
// transaction commits. The counter row's lock makes concurrent appenders of a task queue behind
// each other until commit, so sequence numbers have no gaps or duplicates (a rolled-back append
// rolls its numbers back too) and a task's events become visible in sequence order.
//
// A batch of a writer ($7 not empty) is fenced: it first locks the writer's progress row and goes
// on only if the row says $9 events are stored, as the writer believes. Under READ COMMITTED the
// lock waits for a concurrent append of the same writer and then reads what it committed, so a
// batch sent again after its first copy's reply was lost (the first copy may still be running,
// or arrive later) is refused instead of stored twice: the statement then returns no row and
// touches nothing, counter included.
const appendEventsSQL = `
WITH claim AS (
	SELECT emitted FROM task_event_writers
	WHERE task_id = $1::text AND attempt_id = $7::text
	FOR UPDATE
), gate AS (
	SELECT 1 WHERE $7::text = ''
		OR EXISTS (SELECT 1 FROM claim WHERE emitted = $9::bigint)
		OR $9::bigint = 0 AND NOT EXISTS (SELECT 1 FROM claim)
), counter AS (
	INSERT INTO task_event_counters AS c (task_id, last_seq) SELECT $1::text, $2::bigint FROM gate
	ON CONFLICT (task_id) DO UPDATE SET last_seq = c.last_seq + excluded.last_seq
	RETURNING last_seq - $2::bigint AS base
), inserted AS (
	INSERT INTO task_events (task_id, seq, turn, attempt, type, payload)
	SELECT $1::text, counter.base + e.ord, e.turn, e.attempt, e.type, e.payload
	FROM counter,
		unnest($3::integer[], $4::integer[], $5::text[], $6::jsonb[]) WITH ORDINALITY
			AS e(turn, attempt, type, payload, ord)
)
, progress AS (
	INSERT INTO task_event_writers AS w (task_id, attempt_id, emitted, last_seq)
	SELECT $1::text, $7::text, $8::bigint, counter.base + $2::bigint
	FROM counter WHERE $7::text <> ''
	ON CONFLICT (task_id, attempt_id) DO UPDATE SET emitted = excluded.emitted, last_seq = excluded.last_seq
)
SELECT base + 1, base + $2::bigint,
	pg_notify('` + EventsChannel + `', json_build_object(
		'task_id', $1::text, 'first_seq', base + 1, 'last_seq', base + $2::bigint)::text)
FROM counter`

// registerWriterSQL records a writer with nothing stored yet, so that its first batch is fenced
// as the others are (see appendEventsSQL); it leaves a registered writer alone.
const registerWriterSQL = `
INSERT INTO task_event_writers (task_id, attempt_id, emitted, last_seq) VALUES ($1, $2, 0, 0)
ON CONFLICT (task_id, attempt_id) DO NOTHING`

// ErrWriterAhead is returned by AppendWriterEvents when the writer's progress row does not say
// what the batch expects: more of the writer's events are stored than it knows of (an earlier
// copy of the batch landed after all). Nothing was written; the writer reads WriterProgress and
// goes on from there.
var ErrWriterAhead = errors.New("the writer's stored events are not where the batch expects them")

// Writer identifies an attempt's event writer and where a batch falls in the events it emitted,
// counted from the attempt's first: After of them are stored before the batch, Through once it
// is. An append whose reply was lost can then be checked with WriterProgress, and a copy of it
// sent again is refused (ErrWriterAhead) rather than stored twice. The zero Writer records nothing.
type Writer struct {
	AttemptID string
	After     int64
	Through   int64
}

// AppendEvents appends evs to the task's log, numbering them after its last event, and returns
// the first and last sequence numbers given. The batch is one transaction (or part of db's, if
// db is a pgx.Tx) and is announced by one notification on EventsChannel when it commits.
// Concurrent appenders for one task are safe: sequence numbers stay gapless and unique.
func AppendEvents(ctx context.Context, db DB, taskID string, evs []EventInput) (firstSeq, lastSeq int64, err error) {
	return AppendWriterEvents(ctx, db, taskID, Writer{}, evs)
}

// AppendWriterEvents is AppendEvents that also records, in the same statement, that w's events
// are stored through w.Through.
func AppendWriterEvents(ctx context.Context, db DB, taskID string, w Writer, evs []EventInput) (firstSeq, lastSeq int64, err error) {
	if taskID == "" {
		return 0, 0, errors.New("appending events: task id is required")
	}
	if len(evs) == 0 {
		return 0, 0, errors.New("appending events: no events")
	}
	turns := make([]int32, len(evs))
	attempts := make([]int32, len(evs))
	types := make([]string, len(evs))
	payloads := make([]json.RawMessage, len(evs))
	for i, ev := range evs {
		if ev.Type == "" {
			return 0, 0, fmt.Errorf("appending events to task %s: event %d has no type", taskID, i)
		}
		if ev.Payload != nil && !json.Valid(ev.Payload) {
			return 0, 0, fmt.Errorf("appending events to task %s: event %d (%s): payload is not valid JSON", taskID, i, ev.Type)
		}
		turns[i], attempts[i], types[i], payloads[i] = int32(ev.Turn), int32(ev.Attempt), ev.Type, ev.Payload
	}
	if w.AttemptID != "" && (w.After < 0 || w.Through < w.After) {
		return 0, 0, fmt.Errorf("appending events to task %s: writer %s: batch %d..%d is not a range", taskID, w.AttemptID, w.After, w.Through)
	}
	err = db.QueryRow(ctx, appendEventsSQL, taskID, int64(len(evs)), turns, attempts, types, payloads,
		w.AttemptID, w.Through, w.After).
		Scan(&firstSeq, &lastSeq, nil) // the third column is pg_notify's void
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, fmt.Errorf("appending %d events to task %s: writer %s after %d: %w", len(evs), taskID, w.AttemptID, w.After, ErrWriterAhead)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("appending %d events to task %s: %w", len(evs), taskID, err)
	}
	return firstSeq, lastSeq, nil
}

// WriterProgress returns how many of an attempt's events are stored and the sequence number of
// the last, as recorded by AppendWriterEvents; zeros when none are.
func WriterProgress(ctx context.Context, db DB, taskID, attemptID string) (emitted, lastSeq int64, err error) {
	err = db.QueryRow(ctx, `SELECT emitted, last_seq FROM task_event_writers WHERE task_id = $1 AND attempt_id = $2`,
		taskID, attemptID).Scan(&emitted, &lastSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("reading how far attempt %s wrote the events of task %s: %w", attemptID, taskID, err)
	}
	return emitted, lastSeq, nil
}

// ListEvents returns up to limit events of the task with seq > afterSeq, in order. A limit of 0
// or less means no limit.
func ListEvents(ctx context.Context, db DB, taskID string, afterSeq int64, limit int) ([]Event, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := db.Query(ctx, `
		SELECT task_id, seq, turn, attempt, type, payload, created_at
		FROM task_events WHERE task_id = $1 AND seq > $2
		ORDER BY seq LIMIT $3`, taskID, afterSeq, lim)
	if err != nil {
		return nil, fmt.Errorf("listing events of task %s: %w", taskID, err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Event, error) {
		var e Event
		err := row.Scan(&e.TaskID, &e.Seq, &e.Turn, &e.Attempt, &e.Type, &e.Payload, &e.CreatedAt)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing events of task %s: %w", taskID, err)
	}
	return events, nil
}

// ListEventsBefore returns the task's last limit events before beforeSeq (all of them when
// limit is 0), in sequence order: a page of the log read backwards, from its end when beforeSeq
// is past it.
func ListEventsBefore(ctx context.Context, db DB, taskID string, beforeSeq int64, limit int) ([]Event, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := db.Query(ctx, `
		SELECT task_id, seq, turn, attempt, type, payload, created_at FROM (
			SELECT task_id, seq, turn, attempt, type, payload, created_at
			FROM task_events WHERE task_id = $1 AND seq < $2
			ORDER BY seq DESC LIMIT $3) last
		ORDER BY seq`, taskID, beforeSeq, lim)
	if err != nil {
		return nil, fmt.Errorf("listing events of task %s before %d: %w", taskID, beforeSeq, err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Event, error) {
		var e Event
		err := row.Scan(&e.TaskID, &e.Seq, &e.Turn, &e.Attempt, &e.Type, &e.Payload, &e.CreatedAt)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing events of task %s before %d: %w", taskID, beforeSeq, err)
	}
	return events, nil
}

// OpenToolCall is a tool call whose tool_call event has no closing tool_update in the log.
type OpenToolCall struct {
	Turn             int
	Attempt          int
	ToolCallID       string
	ToolName         string
	ParentToolCallID string
}

// OpenToolCalls lists the tool calls that attempts of the task's turns up to turn, before
// attempt (of turn itself; every attempt of earlier turns), opened in the log and never closed
// (no tool_update with status complete or error), in log order. Those attempts are over: their
// worker died before the adapter could close them.
func OpenToolCalls(ctx context.Context, db DB, taskID string, turn, attempt int) ([]OpenToolCall, error) {
	rows, err := db.Query(ctx, `
		SELECT c.turn, c.attempt, c.payload->>'tool_call_id', coalesce(c.payload->>'tool_name', ''),
			coalesce(c.payload->>'parent_tool_call_id', '')
		FROM task_events c
		WHERE c.task_id = $1 AND c.type = 'tool_call'
			AND (c.turn < $2 OR (c.turn = $2 AND c.attempt < $3))
			AND coalesce(c.payload->>'tool_call_id', '') <> ''
			AND NOT EXISTS (
				SELECT 1 FROM task_events u
				WHERE u.task_id = c.task_id AND u.seq > c.seq AND u.type = 'tool_update'
					AND u.payload->>'tool_call_id' = c.payload->>'tool_call_id'
					AND u.payload->>'tool_status' IN ('complete', 'error'))
		ORDER BY c.seq`, taskID, turn, attempt)
	if err != nil {
		return nil, fmt.Errorf("listing open tool calls of task %s: %w", taskID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OpenToolCall, error) {
		var o OpenToolCall
		err := row.Scan(&o.Turn, &o.Attempt, &o.ToolCallID, &o.ToolName, &o.ParentToolCallID)
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing open tool calls of task %s: %w", taskID, err)
	}
	return out, nil
}

package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The kinds of a task's archived rows, in the order ExportTask gives them.
const (
	RowTask     = "task"     // the tasks row: recorded state and totals
	RowExecutor = "executor" // executors_running: the session and its resume point
	RowTurn     = "turn"     // task_turns
	RowCost     = "cost"     // task_attempt_costs
	RowDecision = "decision" // permission_requests: each request and its decision
	RowMirror   = "mirror"   // session_mirrors: a session's manifest
	RowChunk    = "chunk"    // session_chunks: a mirrored chunk's ids and digests, not its bytes
	RowEvent    = "event"    // task_events
)

// exportQueries read each kind of a task's rows as JSON objects (to_jsonb of the row), in a
// stable order. Events are read apart, a batch at a time.
var exportQueries = []struct{ kind, sql string }{
	{RowTask, `SELECT to_jsonb(t) FROM tasks t WHERE task_id = $1`},
	{RowExecutor, `SELECT to_jsonb(t) - 'attempt_token' FROM executors_running t WHERE task_id = $1`},
	{RowTurn, `SELECT to_jsonb(t) FROM task_turns t WHERE task_id = $1 ORDER BY turn`},
	{RowCost, `SELECT to_jsonb(t) FROM task_attempt_costs t WHERE task_id = $1 ORDER BY turn, attempt_id`},
	{RowDecision, `SELECT to_jsonb(t) FROM permission_requests t WHERE task_id = $1 ORDER BY created_at, request_id`},
	{RowMirror, `SELECT to_jsonb(t) FROM session_mirrors t WHERE task_id = $1 ORDER BY session_id`},
	{RowChunk, `SELECT jsonb_build_object('task_id', task_id, 'session_id', session_id, 'path', path, 'seq', seq, 'data_size', data_size,
		'data_sha256', encode(data_sha256, 'hex'), 'file_size', file_size, 'file_sha256', encode(file_sha256, 'hex'),
		'turn', turn, 'created_at', created_at)
		FROM session_chunks WHERE task_id = $1 ORDER BY session_id, path, seq`},
}

// exportEventBatch is how many events one read of an export fetches.
const exportEventBatch = 1000

// ExportTask calls emit with each of the task's rows as a JSON object, kind by kind (RowTask
// first, RowEvent last, events in sequence order), all read from one snapshot, so that the rows
// agree with each other however the task changes meanwhile. A task Postgres knows nothing of is
// ErrNotFound.
func ExportTask(ctx context.Context, pool *pgxpool.Pool, taskID string, emit func(kind string, row json.RawMessage) error) error {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("exporting task %s: %w", taskID, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	for _, q := range exportQueries {
		n, err := emitRows(ctx, tx, q.kind, emit, q.sql, taskID)
		if err != nil {
			return fmt.Errorf("exporting the %s rows of task %s: %w", q.kind, taskID, err)
		}
		if q.kind == RowTask && n == 0 {
			return fmt.Errorf("exporting task %s: %w", taskID, ErrNotFound)
		}
	}
	for after := int64(0); ; {
		var last int64
		n, err := emitRows(ctx, tx, RowEvent, func(kind string, row json.RawMessage) error {
			var e struct{ Seq int64 }
			if err := json.Unmarshal(row, &e); err != nil {
				return err
			}
			last = e.Seq
			return emit(kind, row)
		}, `SELECT to_jsonb(t) FROM task_events t WHERE task_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
			taskID, after, exportEventBatch)
		if err != nil {
			return fmt.Errorf("exporting the events of task %s after %d: %w", taskID, after, err)
		}
		if n < exportEventBatch {
			return nil
		}
		after = last
	}
}

func emitRows(ctx context.Context, tx pgx.Tx, kind string, emit func(string, json.RawMessage) error, sql string, args ...any) (int, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var row json.RawMessage
		if err := rows.Scan(&row); err != nil {
			return n, err
		}
		if err := emit(kind, row); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}

// ErrTaskExists refuses to import a task that Postgres already knows.
var ErrTaskExists = errors.New("the task exists already")

// importTables are the tables an import writes each kind into. The executor row, the mirror's
// manifests and chunks stay in the archive only: an imported task is read, never resumed.
var importTables = map[string]string{
	RowTurn: "task_turns", RowCost: "task_attempt_costs", RowDecision: "permission_requests", RowEvent: "task_events",
}

// importBatch is how many rows of one kind one insert of an import carries.
const importBatch = 500

// ImportTask writes a task's archived rows back (next gives them in ExportTask's order, and
// ok false at their end), in one transaction: the task is then listed, shown and
// watched as before it was archived, marked imported (imported_at), with no executor row, so
// that no worker resumes it. A task Postgres still knows is refused with ErrTaskExists.
func ImportTask(ctx context.Context, pool *pgxpool.Pool, taskID string, next func() (kind string, row json.RawMessage, ok bool, err error)) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// Events of a past week of a task Postgres has no tasks row of are what its deletion left
		// for their partition's drop (see KeptEvents): the archive holds them, and writes them back.
		var exists bool
		if err := tx.QueryRow(ctx, `
			WITH leftover AS (
				DELETE FROM task_events WHERE task_id = $1 AND created_at < $2
					AND NOT EXISTS (SELECT 1 FROM tasks WHERE task_id = $1))
			SELECT EXISTS (SELECT 1 FROM tasks WHERE task_id = $1)
				OR EXISTS (SELECT 1 FROM task_events WHERE task_id = $1 AND created_at >= $2)`,
			taskID, EventWeek(time.Now())).Scan(&exists); err != nil {
			return fmt.Errorf("importing task %s: %w", taskID, err)
		}
		if exists {
			return fmt.Errorf("importing task %s: %w", taskID, ErrTaskExists)
		}
		batch, batchKind := []json.RawMessage{}, ""
		var taskRow json.RawMessage
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			err := insertRows(ctx, tx, importTables[batchKind], batch)
			batch = batch[:0]
			return err
		}
		for {
			kind, row, ok, err := next()
			if err != nil {
				return fmt.Errorf("importing task %s: %w", taskID, err)
			}
			if !ok || kind != batchKind || len(batch) >= importBatch {
				if err := flush(); err != nil {
					return fmt.Errorf("importing the %s rows of task %s: %w", batchKind, taskID, err)
				}
			}
			if !ok {
				break
			}
			if err := checkRowTask(row, taskID); err != nil {
				return fmt.Errorf("importing task %s: a %s row: %w", taskID, kind, err)
			}
			batchKind = kind
			switch {
			case kind == RowTask:
				taskRow = row
				if err := importTaskRow(ctx, tx, row); err != nil {
					return fmt.Errorf("importing task %s: %w", taskID, err)
				}
			case importTables[kind] != "":
				batch = append(batch, row)
			}
		}
		if taskRow == nil {
			return fmt.Errorf("importing task %s: the archive has no task row", taskID)
		}
		// The rows' triggers moved the task's times to theirs; it keeps its own.
		_, err := tx.Exec(ctx, `
			WITH c AS (INSERT INTO task_event_counters (task_id, last_seq)
				SELECT $1, coalesce(max(seq), 0) FROM task_events WHERE task_id = $1)
			UPDATE tasks t SET created_at = r.created_at, updated_at = r.updated_at
			FROM jsonb_populate_record(NULL::tasks, $2::jsonb) r WHERE t.task_id = $1`, taskID, taskRow)
		if err != nil {
			return fmt.Errorf("importing the event counter and times of task %s: %w", taskID, err)
		}
		return nil
	})
}

// checkRowTask refuses a row of another task than the one imported.
func checkRowTask(row json.RawMessage, taskID string) error {
	var r struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal(row, &r); err != nil {
		return err
	}
	if r.TaskID != taskID {
		return fmt.Errorf("belongs to task %q", r.TaskID)
	}
	return nil
}

// importTaskRow writes the tasks row with its recorded state and times, its totals zero: the
// imported turns and requests add them up again, as they did when they were first written.
func importTaskRow(ctx context.Context, tx pgx.Tx, row json.RawMessage) error {
	_, err := tx.Exec(ctx, `INSERT INTO tasks SELECT * FROM jsonb_populate_record(NULL::tasks, $1::jsonb
		|| jsonb_build_object('turns', 0, 'failed_turns', 0, 'running_turns', 0, 'running_turn', 0, 'cost_usd', 0,
			'input_tokens', 0, 'output_tokens', 0, 'cache_read_tokens', 0, 'cache_creation_tokens', 0,
			'pending_approvals', 0, 'waiting_since', NULL, 'archived_at', NULL, 'archive_path', '',
			'imported_at', now()))`, row)
	if err != nil {
		return fmt.Errorf("writing the tasks row: %w", err)
	}
	return nil
}

func insertRows(ctx context.Context, tx pgx.Tx, table string, rows []json.RawMessage) error {
	arr, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	// table is one of importTables' names, never input.
	_, err = tx.Exec(ctx, `INSERT INTO `+table+` SELECT * FROM jsonb_populate_recordset(NULL::`+table+`, $1::jsonb)`, arr)
	return err
}

// Expired is a task whose retention has passed: finished and not archived yet, or imported.
type Expired struct {
	TaskID    string
	UpdatedAt time.Time // its last activity, as read: archival is compare-and-set on it
	Imported  bool      // brought back from an archive: it has one already
}

// ExpiredTasks returns at most limit finished tasks whose last activity is older than their
// retention (the recorded state's "retention", in nanoseconds, else retention), oldest first,
// that are not archived yet. An imported task counts from its import.
func ExpiredTasks(ctx context.Context, db DB, retention time.Duration, limit int) ([]Expired, error) {
	rows, err := db.Query(ctx, `
		SELECT task_id, updated_at, imported_at IS NOT NULL FROM tasks
		WHERE status IN ('completed', 'cancelled', 'failed') AND archived_at IS NULL
			AND greatest(updated_at, imported_at) < now() - coalesce(
				make_interval(secs => (state->>'retention')::float8 / 1e9), $1::interval)
		ORDER BY updated_at, task_id LIMIT $2`, retention, limit)
	if err != nil {
		return nil, fmt.Errorf("finding the tasks whose retention passed: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Expired, error) {
		var e Expired
		err := r.Scan(&e.TaskID, &e.UpdatedAt, &e.Imported)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("finding the tasks whose retention passed: %w", err)
	}
	return out, nil
}

// MarkArchived records that the task's archive is durable at path, if the task is still
// finished, unarchived and unchanged since seen (its last activity); it returns false when not.
// The same transaction tells the task's watchers (a notice on EventsChannel with Archived set),
// so that a watch reads what is left and ends before the rows go.
func MarkArchived(ctx context.Context, db DB, taskID string, seen time.Time, path string) (bool, error) {
	tag, err := db.Exec(ctx, `
		WITH m AS (
			UPDATE tasks SET archived_at = now(), archive_path = $3
			WHERE task_id = $1 AND updated_at = $2 AND archived_at IS NULL
				AND status IN ('completed', 'cancelled', 'failed')
			RETURNING task_id)
		SELECT pg_notify('`+EventsChannel+`', json_build_object('task_id', task_id, 'archived', true)::text) FROM m`,
		taskID, seen, path)
	if err != nil {
		return false, fmt.Errorf("marking task %s archived: %w", taskID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ArchivedTasks returns at most limit tasks marked archived before before: their rows wait for
// deletion.
func ArchivedTasks(ctx context.Context, db DB, before time.Time, limit int) ([]string, error) {
	rows, err := db.Query(ctx, `SELECT task_id FROM tasks WHERE archived_at IS NOT NULL AND archived_at < $1
		ORDER BY archived_at LIMIT $2`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("finding the archived tasks: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("finding the archived tasks: %w", err)
	}
	return ids, nil
}

// deleteEventsSQL deletes at most $2 of an archived task's events, except those its week's
// partition keeps for its drop (created in [$3, $4), outside the default partition).
const deleteEventsSQL = `
DELETE FROM task_events WHERE (task_id, seq, created_at) IN (
	SELECT task_id, seq, created_at FROM task_events WHERE task_id = $1
		AND NOT (created_at >= $3 AND created_at < $4 AND tableoid <> '` + EventDefaultPartition + `'::regclass)
	ORDER BY seq LIMIT $2)`

// batchDeletes delete an archived task's many rows a batch at a time (at most $2 rows a
// statement, each statement its own short transaction); rowDeletes then delete the rest in one
// transaction, the tasks row last: a deletion cut short goes on at the next pass.
var batchDeletes = []string{
	`DELETE FROM session_chunks WHERE (session_id, path, seq) IN (SELECT session_id, path, seq FROM session_chunks WHERE task_id = $1 LIMIT $2)`,
}

var rowDeletes = []string{
	`DELETE FROM task_turns WHERE (task_id, turn) IN (SELECT task_id, turn FROM task_turns WHERE task_id = $1 LIMIT $2)`,
	`DELETE FROM permission_requests WHERE (task_id, request_id) IN (SELECT task_id, request_id FROM permission_requests WHERE task_id = $1 LIMIT $2)`,
	`DELETE FROM task_attempt_costs WHERE (task_id, attempt_id) IN (SELECT task_id, attempt_id FROM task_attempt_costs WHERE task_id = $1 LIMIT $2)`,
	`DELETE FROM task_event_writers WHERE (task_id, attempt_id) IN (SELECT task_id, attempt_id FROM task_event_writers WHERE task_id = $1 LIMIT $2)`,
	`DELETE FROM api_idempotency_keys WHERE key IN (SELECT key FROM api_idempotency_keys WHERE task_id = $1 LIMIT $2)`,
	`DELETE FROM session_mirrors WHERE task_id = $1 AND $2 > 0`,
	`DELETE FROM executors_running WHERE task_id = $1 AND $2 > 0`,
	`DELETE FROM task_event_counters WHERE task_id = $1 AND $2 > 0`,
	`DELETE FROM task_cancels WHERE task_id = $1 AND $2 > 0`,
	`DELETE FROM account_waits WHERE task_id = $1 AND $2 > 0`,
	`DELETE FROM account_slots WHERE task_id = $1 AND $2 > 0`,
	`DELETE FROM account_queue WHERE task_id = $1 AND $2 > 0`,
	`DELETE FROM tasks WHERE task_id = $1 AND archived_at IS NOT NULL AND $2 > 0`,
}

// KeptEvents is the time range whose events DeleteArchivedTask leaves in their week partitions,
// for the archive job to drop the partitions whole once every task in them is archived (see
// DropEventPartition): [From, To), To the start of the current week. The zero KeptEvents
// keeps none.
type KeptEvents struct {
	From, To time.Time
}

// DeleteArchivedTask deletes the rows of a task marked archived, its events and mirror chunks
// at most batch rows per statement, and returns how many it deleted. Its events created in
// keep's range, in their week partitions, stay for the partition's drop; the rest are deleted.
func DeleteArchivedTask(ctx context.Context, db TxDB, taskID string, batch int, keep KeptEvents) (int64, error) {
	total, err := deleteInBatches(ctx, db, batch, deleteEventsSQL, taskID, batch, keep.From, keep.To)
	if err != nil {
		return total, fmt.Errorf("deleting the events of archived task %s: %w", taskID, err)
	}
	for _, step := range batchDeletes {
		n, err := deleteInBatches(ctx, db, batch, step, taskID, batch)
		total += n
		if err != nil {
			return total, fmt.Errorf("deleting the rows of archived task %s: %w", taskID, err)
		}
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		n, err := deleteRows(ctx, tx, taskID, batch)
		total += n
		return err
	})
	if err != nil {
		return total, fmt.Errorf("deleting the rows of archived task %s: %w", taskID, err)
	}
	return total, nil
}

// deleteRows runs rowDeletes in tx, all but the last (the tasks row) sent together in one round
// trip, again while one of them deleted a full batch, then the last.
func deleteRows(ctx context.Context, tx pgx.Tx, taskID string, batch int) (int64, error) {
	var total int64
	for more := true; more; {
		more = false
		b := &pgx.Batch{}
		for _, step := range rowDeletes[:len(rowDeletes)-1] {
			b.Queue(step, taskID, batch)
		}
		res := tx.SendBatch(ctx, b)
		for range len(rowDeletes) - 1 {
			tag, err := res.Exec()
			if err != nil {
				_ = res.Close()
				return total, err
			}
			total += tag.RowsAffected()
			more = more || tag.RowsAffected() >= int64(batch)
		}
		if err := res.Close(); err != nil {
			return total, err
		}
	}
	tag, err := tx.Exec(ctx, rowDeletes[len(rowDeletes)-1], taskID, batch)
	return total + tag.RowsAffected(), err
}

// deleteInBatches runs a statement that deletes at most batch rows until it deletes fewer, and
// returns how many it deleted.
func deleteInBatches(ctx context.Context, db DB, batch int, sql string, args ...any) (int64, error) {
	var total int64
	for {
		tag, err := db.Exec(ctx, sql, args...)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}

// ArchiveState is what Postgres says of a task's archival.
type ArchiveState struct {
	ArchivedAt time.Time // zero: not archived
	Path       string    // where the archive was written
	Imported   bool      // brought back from an archive
	LastSeq    int64     // the task's last event
}

// TaskArchiveState reads the task's archival; a task Postgres knows nothing of is ErrNotFound.
func TaskArchiveState(ctx context.Context, db DB, taskID string) (ArchiveState, error) {
	var s ArchiveState
	var at *time.Time
	err := db.QueryRow(ctx, `SELECT t.archived_at, t.archive_path, t.imported_at IS NOT NULL, coalesce(c.last_seq, 0)
		FROM tasks t LEFT JOIN task_event_counters c ON c.task_id = t.task_id WHERE t.task_id = $1`, taskID).
		Scan(&at, &s.Path, &s.Imported, &s.LastSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, fmt.Errorf("reading the archival of task %s: %w", taskID, ErrNotFound)
	}
	if err != nil {
		return s, fmt.Errorf("reading the archival of task %s: %w", taskID, err)
	}
	if at != nil {
		s.ArchivedAt = *at
	}
	return s, nil
}

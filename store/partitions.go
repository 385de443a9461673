package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// task_events is partitioned by week of created_at (migration 0017): a partition is a week,
// Monday 00:00 UTC to the next, named EventPartitionPrefix and its first day (task_events_w20261130);
// task_events_default takes a row whose week has none.
const (
	EventPartitionPrefix  = "task_events_w"
	EventDefaultPartition = "task_events_default"
	EventPartitionWidth   = 7 * 24 * time.Hour
	// EventPartitionsAhead is how many weeks after the current one EnsureEventPartitions makes.
	EventPartitionsAhead = 2
)

// partitionLockTimeout bounds how long partition maintenance waits for a lock, so that it never
// holds up appends queued behind it for longer; a partition it could not lock is left for the
// next try.
const partitionLockTimeout = "100ms"

// ErrPartitionBusy is returned by EnsureEventPartitions when a partition could not be made in
// partitionLockTimeout, the tables it locks being in use: nothing changed, the next try may.
var ErrPartitionBusy = errors.New("the partition's tables were in use")

func lockTimedOut(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03" // lock_not_available
}

// EventWeek returns the start of the week that holds t: its partition's lower bound.
func EventWeek(t time.Time) time.Time {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return day.AddDate(0, 0, -((int(day.Weekday()) + 6) % 7)) // Monday
}

// EventPartitionName is the name of the partition of the week starting at week.
func EventPartitionName(week time.Time) string {
	return EventPartitionPrefix + week.UTC().Format("20060102")
}

// EventPartition is a week's partition of task_events.
type EventPartition struct {
	Name string
	From time.Time // its first instant
	To   time.Time // the first instant after it
}

// EventPartitions lists the week partitions of task_events, oldest first (not the default one).
func EventPartitions(ctx context.Context, db DB) ([]EventPartition, error) {
	rows, err := db.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'task_events'::regclass AND c.relname LIKE $1 || '%' ORDER BY c.relname`, EventPartitionPrefix)
	if err != nil {
		return nil, fmt.Errorf("listing the partitions of task_events: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("listing the partitions of task_events: %w", err)
	}
	out := make([]EventPartition, 0, len(names))
	for _, n := range names {
		week, err := time.Parse("20060102", strings.TrimPrefix(n, EventPartitionPrefix))
		if err != nil {
			continue // not one of ours
		}
		out = append(out, EventPartition{Name: n, From: week, To: week.Add(EventPartitionWidth)})
	}
	return out, nil
}

// EnsureEventPartitions makes the partitions of the week of now and the ahead weeks after it
// that do not exist yet, and returns the names of those it made. A week's rows that went to
// the default partition meanwhile move into its new partition. Each partition is made in its
// own short transaction that never takes a lock that appends wait for, except on the default
// partition while its rows of that week move: the table is made apart, filled, then attached.
func EnsureEventPartitions(ctx context.Context, db TxDB, now time.Time, ahead int) ([]string, error) {
	have, err := EventPartitions(ctx, db)
	if err != nil {
		return nil, err
	}
	exists := map[string]bool{}
	for _, p := range have {
		exists[p.Name] = true
	}
	var made []string
	for i, week := 0, EventWeek(now); i <= ahead; i, week = i+1, week.Add(EventPartitionWidth) {
		name := EventPartitionName(week)
		if exists[name] {
			continue
		}
		if err := makeEventPartition(ctx, db, name, week, week.Add(EventPartitionWidth)); err != nil {
			return made, err
		}
		made = append(made, name)
	}
	return made, nil
}

func makeEventPartition(ctx context.Context, db TxDB, name string, from, to time.Time) error {
	id := pgx.Identifier{name}.Sanitize()
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		for _, q := range []string{
			`SET LOCAL lock_timeout = '` + partitionLockTimeout + `'`,
			`CREATE TABLE ` + id + ` (LIKE task_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`,
			// The default partition's rows of the week move, and none comes in until the attach
			// has checked that it holds no more: appends of other weeks do not use it.
			`LOCK TABLE ` + EventDefaultPartition + ` IN SHARE ROW EXCLUSIVE MODE`,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `WITH moved AS (DELETE FROM `+EventDefaultPartition+`
			WHERE created_at >= $1 AND created_at < $2 RETURNING *)
			INSERT INTO `+id+` SELECT * FROM moved`, from, to); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, fmt.Sprintf(`ALTER TABLE task_events ATTACH PARTITION %s FOR VALUES FROM ('%s') TO ('%s')`,
			id, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339)))
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P07" {
		return nil // another host made it first
	}
	if lockTimedOut(err) {
		return fmt.Errorf("making the partition %s of task_events: %w", name, ErrPartitionBusy)
	}
	if err != nil {
		return fmt.Errorf("making the partition %s of task_events: %w", name, err)
	}
	return nil
}

// liveInPartitionSQL says whether the partition %s holds an event of a task that is not archived
// (or archived at $1 or later, so that its watchers may still read): it walks the partition's
// task ids by its primary key, one probe a task, and stops at the first live one. The events of
// tasks that were deleted do not count.
const liveInPartitionSQL = `
WITH RECURSIVE ids(task_id) AS (
	(SELECT task_id FROM %[1]s ORDER BY task_id LIMIT 1)
	UNION ALL
	SELECT (SELECT e.task_id FROM %[1]s e WHERE e.task_id > ids.task_id ORDER BY e.task_id LIMIT 1)
	FROM ids WHERE ids.task_id IS NOT NULL
)
SELECT EXISTS (SELECT 1 FROM ids JOIN tasks t ON t.task_id = ids.task_id
	WHERE t.archived_at IS NULL OR t.archived_at >= $1)`

// DropEventPartition drops the week partition p if every task with events in it was archived
// before before, or deleted, and says whether it did. The partition is locked against inserts
// (an import writes a task's events in their weeks) while it is checked, and the drop waits for
// its locks at most partitionLockTimeout: a partition it could not lock is left, not dropped,
// for the next try.
func DropEventPartition(ctx context.Context, db TxDB, p EventPartition, before time.Time) (bool, error) {
	id := pgx.Identifier{p.Name}.Sanitize()
	dropped := false
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+partitionLockTimeout+`'`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE `+id+` IN SHARE MODE`); err != nil {
			return err
		}
		var live bool
		if err := tx.QueryRow(ctx, fmt.Sprintf(liveInPartitionSQL, id), before).Scan(&live); err != nil {
			return err
		}
		if live {
			return nil
		}
		if _, err := tx.Exec(ctx, `DROP TABLE `+id); err != nil {
			return err
		}
		dropped = true
		return nil
	})
	if lockTimedOut(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("dropping the partition %s of task_events: %w", p.Name, err)
	}
	return dropped, nil
}

// GoneInPartition returns at most limit tasks with events in the partition p that are deleted
// or were archived before before: the events a partition kept by a live task still holds of
// them, for DeleteEventsIn.
func GoneInPartition(ctx context.Context, db DB, p EventPartition, before time.Time, limit int) ([]string, error) {
	id := pgx.Identifier{p.Name}.Sanitize()
	rows, err := db.Query(ctx, fmt.Sprintf(`
		WITH RECURSIVE ids(task_id) AS (
			(SELECT task_id FROM %[1]s ORDER BY task_id LIMIT 1)
			UNION ALL
			SELECT (SELECT e.task_id FROM %[1]s e WHERE e.task_id > ids.task_id ORDER BY e.task_id LIMIT 1)
			FROM ids WHERE ids.task_id IS NOT NULL
		)
		SELECT ids.task_id FROM ids LEFT JOIN tasks t ON t.task_id = ids.task_id
		WHERE ids.task_id IS NOT NULL AND (t.task_id IS NULL OR t.archived_at < $1)
		LIMIT $2`, id), before, limit)
	if err != nil {
		return nil, fmt.Errorf("finding the archived tasks in the partition %s: %w", p.Name, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("finding the archived tasks in the partition %s: %w", p.Name, err)
	}
	return ids, nil
}

// DeleteEventsIn deletes the task's events in the partition p, at most batch a statement (each
// its own transaction), and returns how many it deleted.
func DeleteEventsIn(ctx context.Context, db DB, p EventPartition, taskID string, batch int) (int64, error) {
	id := pgx.Identifier{p.Name}.Sanitize()
	n, err := deleteInBatches(ctx, db, batch, `DELETE FROM `+id+` WHERE (task_id, seq) IN
		(SELECT task_id, seq FROM `+id+` WHERE task_id = $1 ORDER BY seq LIMIT $2)`, taskID, batch)
	if err != nil {
		return n, fmt.Errorf("deleting the events of task %s in %s: %w", taskID, p.Name, err)
	}
	return n, nil
}

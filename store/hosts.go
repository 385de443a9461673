package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Host is a worker host's row: when it last said it was alive, and whether it drains.
type Host struct {
	HostID      string
	PID         int
	StartedAt   time.Time
	HeartbeatAt time.Time
	Draining    bool
}

// BeatHost records that a host is alive (and whether it is draining), creating its row on the
// first beat.
func BeatHost(ctx context.Context, db DB, hostID string, pid int, draining bool) error {
	_, err := db.Exec(ctx, `
		INSERT INTO hosts AS h (host_id, pid, draining) VALUES ($1, $2, $3)
		ON CONFLICT (host_id) DO UPDATE SET pid = excluded.pid, draining = excluded.draining, heartbeat_at = now()`,
		hostID, pid, draining)
	if err != nil {
		return fmt.Errorf("recording host %s alive: %w", hostID, err)
	}
	return nil
}

// RestartHost records that a host (re)started: its row is fresh and not draining.
func RestartHost(ctx context.Context, db DB, hostID string, pid int) error {
	_, err := db.Exec(ctx, `
		INSERT INTO hosts AS h (host_id, pid) VALUES ($1, $2)
		ON CONFLICT (host_id) DO UPDATE SET pid = excluded.pid, draining = false, started_at = now(), heartbeat_at = now()`,
		hostID, pid)
	if err != nil {
		return fmt.Errorf("recording host %s started: %w", hostID, err)
	}
	return nil
}

// ListHosts returns every known host, by id.
func ListHosts(ctx context.Context, db DB) ([]Host, error) {
	rows, err := db.Query(ctx, `SELECT host_id, coalesce(pid, 0), started_at, heartbeat_at, draining FROM hosts ORDER BY host_id`)
	if err != nil {
		return nil, fmt.Errorf("listing hosts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Host, error) {
		var h Host
		err := row.Scan(&h.HostID, &h.PID, &h.StartedAt, &h.HeartbeatAt, &h.Draining)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing hosts: %w", err)
	}
	return out, nil
}

// HostTakesWork reports whether host hostID beat within stale (by the database's clock) and is
// not draining: it is alive and takes turns, even if it is too busy to start one at once.
func HostTakesWork(ctx context.Context, db DB, hostID string, stale time.Duration) (bool, error) {
	var ok bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM hosts WHERE host_id = $1 AND NOT draining
		AND heartbeat_at >= now() - make_interval(secs => $2))`, hostID, stale.Seconds()).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("asking whether host %s takes work: %w", hostID, err)
	}
	return ok, nil
}

// LostExecutor is an executor row claimed from a lost host (see ClaimLostExecutors): the row as
// it was, host included.
type LostExecutor = Executor

// ClaimLostExecutors takes, for self to handle, up to limit executor rows of hosts other than
// self whose last beat is older than stale (the database's clock decides, so hosts' clocks need
// not agree): each row's host is cleared, so that no other live host handles it too, and the
// rows are returned as they were. A row self cannot handle goes back with ReturnExecutor.
func ClaimLostExecutors(ctx context.Context, db DB, self string, stale time.Duration, limit int) ([]LostExecutor, error) {
	rows, err := db.Query(ctx, `
		WITH lost AS (
			SELECT x.task_id, x.host_id FROM executors_running x
			JOIN hosts h ON h.host_id = x.host_id
			WHERE x.host_id <> '' AND x.host_id <> $1 AND h.heartbeat_at < now() - make_interval(secs => $2)
			ORDER BY x.task_id
			LIMIT $3
			FOR UPDATE OF x SKIP LOCKED
		), claimed AS (
			UPDATE executors_running x SET host_id = '' FROM lost
			WHERE x.task_id = lost.task_id
			RETURNING x.*, lost.host_id AS lost_host
		)
		SELECT task_id, session_id, last_message_uuid, status, attempt_id, attempt_token,
			turn, lost_host, coalesce(pid, 0), workspace, model, checkpoint, checkpoint_turn, error, created_at, updated_at
		FROM claimed ORDER BY task_id`, self, stale.Seconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("claiming the executors of lost hosts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Executor, error) { return scanExecutor(row) })
	if err != nil {
		return nil, fmt.Errorf("claiming the executors of lost hosts: %w", err)
	}
	return out, nil
}

// ReturnExecutor gives a claimed row back to its lost host, unless an attempt took it since, so
// that a later look handles it again.
func ReturnExecutor(ctx context.Context, db DB, x LostExecutor) error {
	_, err := db.Exec(ctx, `UPDATE executors_running SET host_id = $3
		WHERE task_id = $1 AND attempt_id = $2 AND host_id = ''`, x.TaskID, x.AttemptID, x.HostID)
	if err != nil {
		return fmt.Errorf("returning the executor of task %s to host %s: %w", x.TaskID, x.HostID, err)
	}
	return nil
}

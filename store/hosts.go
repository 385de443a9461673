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

// LostAttempts returns the executor rows of hosts other than self whose last beat is older
// than stale (the database's clock decides, so hosts' clocks need not agree): the attempts those
// hosts were running (starting or running), and those that committed their turn within the last
// committed (idle), whose answer may not have reached Temporal.
func LostAttempts(ctx context.Context, db DB, self string, stale, committed time.Duration) ([]Executor, error) {
	rows, err := db.Query(ctx, `
		SELECT `+executorColumns+` FROM executors_running x
		WHERE x.host_id <> $1
			AND (x.status IN ('starting', 'running')
				OR (x.status = 'idle' AND x.updated_at > now() - make_interval(secs => $3)))
			AND EXISTS (SELECT 1 FROM hosts h WHERE h.host_id = x.host_id
				AND h.heartbeat_at < now() - make_interval(secs => $2))
		ORDER BY x.task_id`, self, stale.Seconds(), committed.Seconds())
	if err != nil {
		return nil, fmt.Errorf("listing attempts of lost hosts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Executor, error) { return scanExecutor(row) })
	if err != nil {
		return nil, fmt.Errorf("listing attempts of lost hosts: %w", err)
	}
	return out, nil
}

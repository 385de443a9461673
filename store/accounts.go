package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-run/drover/task"
)

// InstallationKey returns the installation's key for naming accounts, made on first use.
func InstallationKey(ctx context.Context, db DB) ([]byte, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("making the installation key: %w", err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO installation (account_key) VALUES ($1) ON CONFLICT DO NOTHING`, key); err != nil {
		return nil, fmt.Errorf("storing the installation key: %w", err)
	}
	var out []byte
	if err := db.QueryRow(ctx, `SELECT account_key FROM installation`).Scan(&out); err != nil {
		return nil, fmt.Errorf("reading the installation key: %w", err)
	}
	return out, nil
}

// Account is an account's row, with what runs and waits on it.
type Account struct {
	AccountID string
	// Reason is why the account is limited (usage_limit, rate_limit, spend_cap), empty when it
	// is not.
	Reason    task.WaitReason
	LimitType string
	// BlockedUntil is the announced reset of a usage or rate limit.
	BlockedUntil time.Time
	LimitedAt    time.Time
	// ProbeTask is the task whose turn goes first after the reset, until ProbeUntil.
	ProbeTask  string
	ProbeUntil time.Time
	UpdatedAt  time.Time
	// Running counts the live slots; Queued the turns waiting for one; Waiting the tasks
	// waiting for the account.
	Running, Queued, Waiting int
}

const accountColumns = `a.account_id, coalesce(a.reason, ''), coalesce(a.limit_type, ''),
	coalesce(a.blocked_until, 'epoch'), coalesce(a.limited_at, 'epoch'), coalesce(a.probe_task, ''),
	coalesce(a.probe_until, 'epoch'), a.updated_at,
	(SELECT count(*) FROM account_slots s WHERE s.account_id = a.account_id AND s.lease_until > now()),
	(SELECT count(*) FROM account_queue q WHERE q.account_id = a.account_id),
	(SELECT count(*) FROM account_waits w WHERE w.account_id = a.account_id)`

func scanAccount(row pgx.Row) (Account, error) {
	var a Account
	err := row.Scan(&a.AccountID, &a.Reason, &a.LimitType, &a.BlockedUntil, &a.LimitedAt, &a.ProbeTask,
		&a.ProbeUntil, &a.UpdatedAt, &a.Running, &a.Queued, &a.Waiting)
	for _, t := range []*time.Time{&a.BlockedUntil, &a.LimitedAt, &a.ProbeUntil} {
		if t.Unix() == 0 {
			*t = time.Time{}
		}
	}
	return a, err
}

// ListAccounts returns every known account, by id.
func ListAccounts(ctx context.Context, db DB) ([]Account, error) {
	rows, err := db.Query(ctx, `SELECT `+accountColumns+` FROM accounts a ORDER BY a.account_id`)
	if err != nil {
		return nil, fmt.Errorf("listing accounts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Account, error) { return scanAccount(row) })
	if err != nil {
		return nil, fmt.Errorf("listing accounts: %w", err)
	}
	return out, nil
}

// GetAccount returns account id's row, or ErrNotFound.
func GetAccount(ctx context.Context, db DB, id string) (Account, error) {
	a, err := scanAccount(db.QueryRow(ctx, `SELECT `+accountColumns+` FROM accounts a WHERE a.account_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Account{}, fmt.Errorf("account %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Account{}, fmt.Errorf("reading account %s: %w", id, err)
	}
	return a, nil
}

// AccountGate is what CheckAccount decided about a turn about to run.
type AccountGate struct {
	// Go: the turn may call the API. Probe: it is the first turn after the limit's reset.
	Go, Probe bool
	// Reason, LimitType and ResetsAt describe the limit when the turn may not go. ProbeUntil
	// is when the turn that goes first gives up its turn, when another one does.
	Reason     task.WaitReason
	LimitType  string
	ResetsAt   time.Time
	ProbeUntil time.Time
	// Now is the database's clock.
	Now time.Time
	// Waiting: the task may have a wait for its account recorded (EndWait ends it). False only
	// when the check saw none.
	Waiting bool
}

// CheckAccount decides whether a turn of taskID may call the API of account: not while its
// usage or rate limit holds (until its announced reset) nor while its spend cap does; after
// the reset, exactly one turn goes first (the probe, for probeLease or until it ends) and the
// others wait until it got through (AccountGotThrough) or was limited again (LimitAccount).
// The account's row is made on first use.
func CheckAccount(ctx context.Context, db TxDB, account, taskID string, probeLease time.Duration) (AccountGate, error) {
	// An account that nothing limits, the common case, is read in one statement and no lock:
	// the lock below only orders the turns that decide who goes first after a reset.
	var known, limited bool
	g := AccountGate{Go: true}
	err := db.QueryRow(ctx, `
		SELECT a.account_id IS NOT NULL, a.reason IS NOT NULL, now(),
			EXISTS (SELECT 1 FROM account_waits WHERE task_id = $2)
		FROM (SELECT 1) one LEFT JOIN accounts a ON a.account_id = $1`, account, taskID).
		Scan(&known, &limited, &g.Now, &g.Waiting)
	if err != nil {
		return AccountGate{}, fmt.Errorf("checking account %s: %w", account, err)
	}
	if known && !limited {
		return g, nil
	}
	g = AccountGate{Waiting: true}
	err = inTx(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO accounts (account_id) VALUES ($1) ON CONFLICT DO NOTHING`, account); err != nil {
			return err
		}
		var blocked, probeUntil *time.Time
		var probe string
		err := tx.QueryRow(ctx, `
			SELECT coalesce(reason, ''), coalesce(limit_type, ''), blocked_until, coalesce(probe_task, ''), probe_until, now()
			FROM accounts WHERE account_id = $1 FOR UPDATE`, account).
			Scan(&g.Reason, &g.LimitType, &blocked, &probe, &probeUntil, &g.Now)
		if err != nil {
			return err
		}
		if blocked != nil {
			g.ResetsAt = *blocked
		}
		switch {
		case g.Reason == "":
			g.Go = true
			return nil
		case g.Reason == task.WaitSpendCap:
			return nil
		case g.ResetsAt.After(g.Now):
			return nil
		case probe != "" && probe != taskID && probeUntil != nil && probeUntil.After(g.Now):
			g.ProbeUntil = *probeUntil
			return nil
		}
		g.Go, g.Probe = true, true
		return tx.QueryRow(ctx, `
			UPDATE accounts SET probe_task = $2, probe_until = now() + make_interval(secs => $3), updated_at = now()
			WHERE account_id = $1 RETURNING probe_until`, account, taskID, probeLease.Seconds()).Scan(&g.ProbeUntil)
	})
	if err != nil {
		return AccountGate{}, fmt.Errorf("checking account %s: %w", account, err)
	}
	return g, nil
}

// AccountLimit is a limit a turn met.
type AccountLimit struct {
	Account   string
	Reason    task.WaitReason // usage_limit, rate_limit or spend_cap
	LimitType string
	// ResetsAt is when the limit is to lift; zero for a spend cap.
	ResetsAt time.Time
}

// LimitAccount records that a turn met the account's limit: no turn of the account calls the
// API until ResetsAt (a spend cap: until ResumeAccount). A probe in flight is over. A later
// reset already recorded is kept.
func LimitAccount(ctx context.Context, db DB, l AccountLimit) error {
	var until *time.Time
	if !l.ResetsAt.IsZero() {
		until = &l.ResetsAt
	}
	_, err := db.Exec(ctx, `
		INSERT INTO accounts AS a (account_id, reason, limit_type, blocked_until, limited_at)
		VALUES ($1, $2, nullif($3, ''), $4, now())
		ON CONFLICT (account_id) DO UPDATE SET
			reason = CASE WHEN a.reason = $5 THEN a.reason ELSE excluded.reason END,
			limit_type = CASE WHEN a.reason = $5 THEN a.limit_type ELSE excluded.limit_type END,
			blocked_until = CASE
				WHEN excluded.reason = $5 THEN NULL
				WHEN a.reason IS NOT NULL AND a.blocked_until > excluded.blocked_until THEN a.blocked_until
				ELSE excluded.blocked_until END,
			limited_at = coalesce(a.limited_at, now()),
			probe_task = NULL, probe_until = NULL, updated_at = now()`,
		l.Account, l.Reason, l.LimitType, until, task.WaitSpendCap)
	if err != nil {
		return fmt.Errorf("recording account %s limited: %w", l.Account, err)
	}
	return nil
}

// AccountWait is a task whose turn waits for its account.
type AccountWait struct {
	TaskID    string
	Account   string
	Turn      int
	Reason    task.WaitReason
	LimitType string
	Since     time.Time
	ResetsAt  time.Time
	RetryAt   time.Time
}

// RecordWait records that taskID's turn waits for its account (replacing what the task waited
// for before), and returns the row as stored, how many tasks of the account waited before this
// one (its place among them, from 0), and whether the wait is new (the task was not waiting).
func RecordWait(ctx context.Context, db DB, w AccountWait) (stored AccountWait, before int, isNew bool, err error) {
	var resets, retry *time.Time
	if !w.ResetsAt.IsZero() {
		resets = &w.ResetsAt
	}
	if !w.RetryAt.IsZero() {
		retry = &w.RetryAt
	}
	err = db.QueryRow(ctx, `
		WITH up AS (
			INSERT INTO account_waits AS w (task_id, account_id, turn, reason, limit_type, resets_at, retry_at)
			VALUES ($1, $2, $3, $4, nullif($5, ''), $6, $7)
			ON CONFLICT (task_id) DO UPDATE SET account_id = excluded.account_id, turn = excluded.turn,
				reason = excluded.reason, limit_type = excluded.limit_type, resets_at = excluded.resets_at,
				retry_at = excluded.retry_at,
				since = CASE WHEN w.account_id = excluded.account_id AND w.turn = excluded.turn THEN w.since ELSE now() END
			RETURNING since, xmax = 0 AS inserted)
		SELECT since, inserted, (SELECT count(*) FROM account_waits o WHERE o.account_id = $2 AND o.task_id <> $1
			AND o.since <= (SELECT since FROM up)) FROM up`,
		w.TaskID, w.Account, w.Turn, w.Reason, w.LimitType, resets, retry).Scan(&w.Since, &isNew, &before)
	if err != nil {
		return AccountWait{}, 0, false, fmt.Errorf("recording the wait of task %s: %w", w.TaskID, err)
	}
	return w, before, isNew, nil
}

// EndWait forgets taskID's wait and returns it; ok is false when the task was not waiting.
func EndWait(ctx context.Context, db DB, taskID string) (w AccountWait, ok bool, err error) {
	rows, err := db.Query(ctx, `DELETE FROM account_waits WHERE task_id = $1 RETURNING `+waitColumns, taskID)
	if err != nil {
		return AccountWait{}, false, fmt.Errorf("ending the wait of task %s: %w", taskID, err)
	}
	ws, err := pgx.CollectRows(rows, scanWait)
	if err != nil || len(ws) == 0 {
		return AccountWait{}, false, err
	}
	return ws[0], true, nil
}

// GetWait returns taskID's wait for its account; ok is false when it does not wait.
func GetWait(ctx context.Context, db DB, taskID string) (w AccountWait, ok bool, err error) {
	rows, err := db.Query(ctx, `SELECT `+waitColumns+` FROM account_waits WHERE task_id = $1`, taskID)
	if err != nil {
		return AccountWait{}, false, fmt.Errorf("reading the wait of task %s: %w", taskID, err)
	}
	ws, err := pgx.CollectRows(rows, scanWait)
	if err != nil {
		return AccountWait{}, false, fmt.Errorf("reading the wait of task %s: %w", taskID, err)
	}
	if len(ws) == 0 {
		return AccountWait{}, false, nil
	}
	return ws[0], true, nil
}

const waitColumns = `task_id, account_id, turn, reason, coalesce(limit_type, ''), since,
	coalesce(resets_at, 'epoch'), coalesce(retry_at, 'epoch')`

func scanWait(row pgx.CollectableRow) (AccountWait, error) {
	var w AccountWait
	err := row.Scan(&w.TaskID, &w.Account, &w.Turn, &w.Reason, &w.LimitType, &w.Since, &w.ResetsAt, &w.RetryAt)
	for _, t := range []*time.Time{&w.ResetsAt, &w.RetryAt} {
		if t.Unix() == 0 {
			*t = time.Time{}
		}
	}
	return w, err
}

// AccountWaits returns the tasks waiting for account, longest waiting first.
func AccountWaits(ctx context.Context, db DB, account string) ([]AccountWait, error) {
	rows, err := db.Query(ctx, `SELECT `+waitColumns+` FROM account_waits WHERE account_id = $1 ORDER BY since, task_id`, account)
	if err != nil {
		return nil, fmt.Errorf("listing the tasks waiting for account %s: %w", account, err)
	}
	out, err := pgx.CollectRows(rows, scanWait)
	if err != nil {
		return nil, fmt.Errorf("listing the tasks waiting for account %s: %w", account, err)
	}
	return out, nil
}

// TasksWaiting counts the tasks waiting for their account, by reason (usage_limit, rate_limit,
// spend_cap, concurrency), over every account.
func TasksWaiting(ctx context.Context, db DB) (map[string]int64, error) {
	rows, err := db.Query(ctx, `SELECT reason, count(*) FROM account_waits GROUP BY reason`)
	if err != nil {
		return nil, fmt.Errorf("counting waiting tasks: %w", err)
	}
	out := map[string]int64{}
	defer rows.Close()
	for rows.Next() {
		var reason string
		var n int64
		if err := rows.Scan(&reason, &n); err != nil {
			return nil, fmt.Errorf("counting waiting tasks: %w", err)
		}
		out[reason] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting waiting tasks: %w", err)
	}
	return out, nil
}

// AccountGotThrough records that a turn of account reached the API and was answered: a usage
// or rate limit whose reset has passed is over. It returns the tasks that waited for that limit
// (whose waits stay recorded until their turns run); none when nothing was lifted.
func AccountGotThrough(ctx context.Context, db DB, account string) ([]AccountWait, error) {
	tag, err := db.Exec(ctx, `
		UPDATE accounts SET reason = NULL, limit_type = NULL, blocked_until = NULL, limited_at = NULL,
			probe_task = NULL, probe_until = NULL, updated_at = now()
		WHERE account_id = $1 AND reason = ANY($2) AND blocked_until <= now()`,
		account, []task.WaitReason{task.WaitUsageLimit, task.WaitRateLimit})
	if err != nil {
		return nil, fmt.Errorf("lifting the limit of account %s: %w", account, err)
	}
	if tag.RowsAffected() == 0 {
		return nil, nil
	}
	return AccountWaits(ctx, db, account)
}

// ResumeAccount lifts whatever limits account (an operator raised its spend cap, or knows the
// limit is over) and returns the tasks waiting for it. ErrNotFound when the account is unknown.
func ResumeAccount(ctx context.Context, db DB, account string) ([]AccountWait, error) {
	tag, err := db.Exec(ctx, `
		UPDATE accounts SET reason = NULL, limit_type = NULL, blocked_until = NULL, limited_at = NULL,
			probe_task = NULL, probe_until = NULL, updated_at = now()
		WHERE account_id = $1`, account)
	if err != nil {
		return nil, fmt.Errorf("resuming account %s: %w", account, err)
	}
	if tag.RowsAffected() == 0 {
		return nil, fmt.Errorf("account %s: %w", account, ErrNotFound)
	}
	return AccountWaits(ctx, db, account)
}

// SlotRequest asks for one of an account's Max slots for a turn of TaskID on HostID.
type SlotRequest struct {
	Account, TaskID, HostID string
	Max                     int
	// Lease is how long the slot is held without RenewSlot; QueueStale is how long a queued
	// turn that stopped asking keeps its place.
	Lease, QueueStale time.Duration
}

// AcquireSlot gives the turn a slot of its account when fewer than Max run and no turn queued
// before it waits; otherwise it queues the turn (keeping its place across calls) and returns
// its position (1 is next). Expired leases and stale queue entries are dropped first.
func AcquireSlot(ctx context.Context, db TxDB, r SlotRequest) (granted bool, position int, err error) {
	err = inTx(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('drover account ' || $1, 0))`, r.Account); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM account_slots WHERE account_id = $1 AND lease_until <= now()`, r.Account); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM account_queue WHERE account_id = $1 AND seen_at < now() - make_interval(secs => $2)`,
			r.Account, r.QueueStale.Seconds()); err != nil {
			return err
		}
		var held, mine int
		if err := tx.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE task_id = $2) FROM account_slots WHERE account_id = $1`,
			r.Account, r.TaskID).Scan(&held, &mine); err != nil {
			return err
		}
		if mine > 0 {
			granted = true
			_, err := tx.Exec(ctx, `UPDATE account_slots SET lease_until = now() + make_interval(secs => $3), host_id = $4
				WHERE account_id = $1 AND task_id = $2`, r.Account, r.TaskID, r.Lease.Seconds(), r.HostID)
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO account_queue AS q (account_id, task_id) VALUES ($1, $2)
			ON CONFLICT (account_id, task_id) DO UPDATE SET seen_at = now()`, r.Account, r.TaskID); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM account_queue q, account_queue me
			WHERE me.account_id = $1 AND me.task_id = $2 AND q.account_id = $1
			AND (q.enqueued_at, q.task_id) <= (me.enqueued_at, me.task_id)`, r.Account, r.TaskID).Scan(&position); err != nil {
			return err
		}
		free := r.Max - held
		if position > free {
			position -= max(free, 0)
			return nil
		}
		granted, position = true, 0
		if _, err := tx.Exec(ctx, `DELETE FROM account_queue WHERE account_id = $1 AND task_id = $2`, r.Account, r.TaskID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO account_slots (account_id, task_id, host_id, lease_until)
			VALUES ($1, $2, $3, now() + make_interval(secs => $4))`, r.Account, r.TaskID, r.HostID, r.Lease.Seconds())
		return err
	})
	if err != nil {
		return false, 0, fmt.Errorf("taking a slot of account %s: %w", r.Account, err)
	}
	return granted, position, nil
}

// RenewSlot extends the lease of the turn's slot; ErrNotFound when it has none (its lease
// expired and the slot went to another turn).
func RenewSlot(ctx context.Context, db DB, account, taskID string, lease time.Duration) error {
	tag, err := db.Exec(ctx, `UPDATE account_slots SET lease_until = now() + make_interval(secs => $3)
		WHERE account_id = $1 AND task_id = $2`, account, taskID, lease.Seconds())
	if err != nil {
		return fmt.Errorf("renewing the slot of task %s: %w", taskID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("slot of task %s on account %s: %w", taskID, account, ErrNotFound)
	}
	return nil
}

// ReleaseSlot gives up the turn's slot and returns the queued turns that may now take one
// (at most the slots free), first in line first.
func ReleaseSlot(ctx context.Context, db DB, account, taskID string, maxSlots int) ([]string, error) {
	rows, err := db.Query(ctx, `
		WITH gone AS (DELETE FROM account_slots WHERE account_id = $1 AND task_id = $2 RETURNING 1)
		SELECT task_id FROM account_queue WHERE account_id = $1
		ORDER BY enqueued_at, task_id
		LIMIT greatest($3 - (SELECT count(*) FROM account_slots WHERE account_id = $1 AND lease_until > now())
			+ (SELECT count(*) FROM gone), 0)`, account, taskID, maxSlots)
	if err != nil {
		return nil, fmt.Errorf("releasing the slot of task %s: %w", taskID, err)
	}
	next, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("releasing the slot of task %s: %w", taskID, err)
	}
	return next, nil
}

// LeaveQueue takes the turn of taskID out of its account's queue.
func LeaveQueue(ctx context.Context, db DB, account, taskID string) error {
	if _, err := db.Exec(ctx, `DELETE FROM account_queue WHERE account_id = $1 AND task_id = $2`, account, taskID); err != nil {
		return fmt.Errorf("leaving the queue of account %s: %w", account, err)
	}
	return nil
}

// ForgetTaskWait forgets everything taskID waits for on any account: its wait and its places in
// the accounts' queues (the task ended).
func ForgetTaskWait(ctx context.Context, db DB, taskID string) error {
	if _, err := db.Exec(ctx, `
		WITH q AS (DELETE FROM account_queue WHERE task_id = $1)
		DELETE FROM account_waits WHERE task_id = $1`, taskID); err != nil {
		return fmt.Errorf("forgetting the waits of task %s: %w", taskID, err)
	}
	return nil
}

// inTx runs fn in a transaction of db (a savepoint when db is a transaction).
func inTx(ctx context.Context, db TxDB, fn func(pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

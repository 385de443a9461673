package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/migrations"
)

// migrationLockKey is the pg_advisory_lock key that serializes migration runs, whoever runs them.
// It is fixed forever: changing it would let an old and a new binary migrate at the same time.
const migrationLockKey int64 = 0x6472_6f76_6572_6d31 // "droverm1"

// migrationName is <version>_<name>.sql.
var migrationName = regexp.MustCompile(`^([0-9]+)_([A-Za-z0-9_]+)\.sql$`)

// migration is one schema change read from a migrations file system.
type migration struct {
	version int
	name    string
	file    string
	sql     string
}

// Migrate applies drover's pending schema migrations (package migrations) to the database and
// returns the versions it applied, in order; none when the schema is current. See MigrateFS.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) ([]int, error) {
	return MigrateFS(ctx, pool, migrations.FS, logger)
}

// MigrateFS applies the pending migrations found at the root of fsys, in version order, and
// returns the versions it applied.
//
// Every file ending in .sql must be named <version>_<name>.sql, and the versions must count
// 1, 2, 3, … with no gap and no duplicate; otherwise MigrateFS refuses before touching the
// database. Each migration runs in its own transaction together with its row in
// schema_migrations, so a failing one leaves the versions before it applied and nothing of
// itself. The whole run holds a session-level advisory lock, so concurrent callers (several
// workers starting at once) apply each migration exactly once. Running it again applies nothing.
// A database that already has versions this binary does not know (a newer deployment) is left
// alone; a pending version lower than an applied one is refused. logger (nil = silent) gets one
// line per applied version.
func MigrateFS(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS, logger *slog.Logger) ([]int, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	all, err := loadMigrations(fsys)
	if err != nil {
		return nil, fmt.Errorf("loading migrations: %w", err)
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrating: acquiring connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
		return nil, fmt.Errorf("migrating: taking advisory lock: %w", err)
	}
	defer func() {
		// Unlock even when ctx is done; a connection that cannot unlock is closed, which
		// releases the lock with the session, rather than going back to the pool holding it.
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(unlockCtx, "SELECT pg_advisory_unlock($1)", migrationLockKey); err != nil {
			logger.WarnContext(ctx, "releasing migration lock failed; closing the connection", "error", err)
			_ = conn.Conn().Close(unlockCtx)
		}
	}()

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return nil, fmt.Errorf("migrating: creating schema_migrations: %w", err)
	}
	applied, err := appliedVersions(ctx, conn.Conn())
	if err != nil {
		return nil, err
	}
	pending, err := pendingMigrations(all, applied)
	if err != nil {
		return nil, err
	}
	if newest := all[len(all)-1].version; len(applied) > 0 && applied[len(applied)-1] > newest {
		logger.WarnContext(ctx, "database schema is newer than this binary",
			"database_version", applied[len(applied)-1], "binary_version", newest)
	}

	var done []int
	for _, m := range pending {
		start := time.Now()
		if err := applyMigration(ctx, conn.Conn(), m); err != nil {
			return done, err
		}
		done = append(done, m.version)
		logger.InfoContext(ctx, "applied migration",
			"version", m.version, "name", m.name, "duration", time.Since(start))
	}
	return done, nil
}

// loadMigrations reads and checks the migrations at the root of fsys, sorted by version.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var all []migration
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		parts := migrationName.FindStringSubmatch(e.Name())
		if parts == nil {
			return nil, fmt.Errorf("migration file %q: name is not <version>_<name>.sql", e.Name())
		}
		version, err := strconv.Atoi(parts[1])
		if err != nil || version < 1 {
			return nil, fmt.Errorf("migration file %q: version must be a number from 1", e.Name())
		}
		body, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("migration file %q: %w", e.Name(), err)
		}
		if strings.TrimSpace(string(body)) == "" {
			return nil, fmt.Errorf("migration file %q is empty", e.Name())
		}
		all = append(all, migration{version: version, name: parts[2], file: e.Name(), sql: string(body)})
	}
	if len(all) == 0 {
		return nil, errors.New("no migration files (*.sql) found")
	}
	slices.SortFunc(all, func(a, b migration) int { return a.version - b.version })
	for i, m := range all {
		if i > 0 && m.version == all[i-1].version {
			return nil, fmt.Errorf("duplicate migration version %d: %q and %q", m.version, all[i-1].file, m.file)
		}
		if m.version != i+1 {
			return nil, fmt.Errorf("migration versions have a gap: %q has version %d, expected %d", m.file, m.version, i+1)
		}
	}
	return all, nil
}

// appliedVersions returns the versions recorded in schema_migrations, ascending.
func appliedVersions(ctx context.Context, conn *pgx.Conn) ([]int, error) {
	rows, err := conn.Query(ctx, "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		return nil, fmt.Errorf("migrating: reading schema_migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("migrating: reading schema_migrations: %w", err)
	}
	return versions, nil
}

// pendingMigrations returns the migrations not yet applied, refusing to apply one below the
// newest applied version (which would run changes out of order).
func pendingMigrations(all []migration, applied []int) ([]migration, error) {
	var pending []migration
	for _, m := range all {
		if _, found := slices.BinarySearch(applied, m.version); !found {
			pending = append(pending, m)
		}
	}
	if len(pending) > 0 && len(applied) > 0 && pending[0].version < applied[len(applied)-1] {
		return nil, fmt.Errorf("migration %d (%s) is pending but version %d is already applied",
			pending[0].version, pending[0].file, applied[len(applied)-1])
	}
	return pending, nil
}

// applyMigration runs one migration and records it, in one transaction.
func applyMigration(ctx context.Context, conn *pgx.Conn, m migration) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// No arguments: the simple protocol, so a file may hold several statements.
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name)
		return err
	})
	if err != nil {
		return fmt.Errorf("applying migration %d (%s): %w", m.version, m.file, err)
	}
	return nil
}

// Package pgtest gives each test its own throwaway Postgres database on the real server, so
// tests of the database layer run in parallel against real Postgres and never see each other's
// rows.
//
// The server is reached through the admin DSN in DROVER_TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable). A test that cannot reach it
// fails, saying how to start it; it never skips.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/store"
)

// EnvAdminURL names the environment variable holding the admin DSN.
const EnvAdminURL = "DROVER_TEST_DATABASE_URL"

// DefaultAdminURL is the admin DSN used when EnvAdminURL is unset.
const DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// setupTimeout bounds creating and dropping a database, so a hung server fails the test
// instead of hanging it.
const setupTimeout = 30 * time.Second

// AdminURL returns the admin DSN: EnvAdminURL, or DefaultAdminURL.
func AdminURL() string {
	if u := os.Getenv(EnvAdminURL); u != "" {
		return u
	}
	return DefaultAdminURL
}

// NewDatabase creates an empty database drover_test_<random> and returns its DSN. The database
// is dropped WITH (FORCE) when the test ends, after cleanups registered later (such as closing
// a pool on it) have run.
func NewDatabase(t testing.TB) (dsn string) {
	t.Helper()
	return newDatabase(t, AdminURL())
}

func newDatabase(t testing.TB, admin string) (dsn string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		t.Fatalf("pgtest: %s is not a valid DSN: %v", EnvAdminURL, err)
	}
	name := "drover_test_" + randomHex(8)

	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: cannot reach Postgres at %s:%d as %s: %v\n"+
			"Start it with `pg_ctlcluster 15 main start`, or point %s at an admin DSN.",
			cfg.Host, cfg.Port, cfg.User, err, EnvAdminURL)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() { dropDatabase(t, cfg, name) })

	dsn, err = withDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// withDatabase returns dsn (a URL or key=value list) naming database name instead.
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parsing %s: %w", EnvAdminURL, err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	return dsn + " dbname=" + name, nil // a later key wins
}

// NewPool creates a fresh database with drover's schema migrated in and returns a pool on it,
// closed when the test ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dsn := NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: opening pool: %v", err)
	}
	t.Cleanup(pool.Close)
	if _, err := store.Migrate(ctx, pool, nil); err != nil {
		t.Fatalf("pgtest: migrating: %v", err)
	}
	return pool
}

func dropDatabase(t testing.TB, cfg *pgx.ConnConfig, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Errorf("pgtest: dropping database %s: %v", name, err)
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		t.Errorf("pgtest: dropping database %s: %v", name, err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Connect opens a pool to databaseURL and checks that the server answers.
func Connect(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		// pgx's parse errors may quote the URL, password included.
		return nil, errors.New("connecting to postgres: the database URL does not parse")
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to postgres at %s:%d/%s: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, err)
	}
	return pool, nil
}

// EnsureDatabase creates the database databaseURL names when it does not exist
// yet, connecting to the server's "postgres" database to do so. A user without
// the right to create databases gets the server's error. The URL may carry the
// pool's settings (pool_max_conns and the others Connect reads).
func EnsureDatabase(ctx context.Context, databaseURL string) error {
	pcfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return errors.New("ensuring the database: the database URL does not parse")
	}
	cfg := pcfg.ConnConfig
	name := cfg.Database
	if name == "" || name == "postgres" {
		return nil
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		return conn.Close(ctx)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		return fmt.Errorf("connecting to postgres at %s:%d/%s: %w", cfg.Host, cfg.Port, name, err)
	}
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err = pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return fmt.Errorf("connecting to postgres at %s:%d to create %s: %w", cfg.Host, cfg.Port, name, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if err != nil {
		if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: created meanwhile
			return nil
		}
		return fmt.Errorf("creating database %s: %w", name, err)
	}
	return nil
}

// ConnectionLost reports whether err says that the connection to Postgres failed (refused, reset,
// closed, timed out) rather than that Postgres refused the statement: what failed so may succeed
// when tried again on another connection.
func ConnectionLost(err error) bool {
	var pgErr *pgconn.PgError
	if err == nil || errors.As(err, &pgErr) {
		return false
	}
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	return errors.As(err, &netErr) || errors.As(err, &connectErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

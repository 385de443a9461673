package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what most store functions need: *pgxpool.Pool, *pgx.Conn and pgx.Tx all satisfy it.
// Given a pgx.Tx, a function's writes become part of that transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TxDB is a DB that can begin a transaction, for functions that must write atomically.
// Given a pgx.Tx, the function's transaction is a savepoint inside it.
type TxDB interface {
	DB
	Begin(ctx context.Context) (pgx.Tx, error)
}

var (
	// ErrNotFound reports that the task, turn or row asked for does not exist.
	ErrNotFound = errors.New("not found")

	// ErrStaleAttempt reports a write on behalf of an attempt that no longer owns the task's
	// executor row: another attempt has claimed it since. Nothing was changed.
	ErrStaleAttempt = errors.New("stale attempt")

	// ErrPromptMismatch reports an attempt of a turn whose record was begun with another prompt:
	// the caller and the record disagree on what the turn is.
	ErrPromptMismatch = errors.New("the turn was begun with another prompt")
)

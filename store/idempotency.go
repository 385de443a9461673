package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// IdempotencyKey is one key of the HTTP API's task creations (api_idempotency_keys).
type IdempotencyKey struct {
	Key string
	// RequestSHA256 is the digest of the request the key first came with.
	RequestSHA256 []byte
	// TaskID is the task the key creates.
	TaskID string
	// Response is the answer recorded once the task was created; nil before.
	Response  json.RawMessage
	CreatedAt time.Time
}

// ClaimIdempotencyKey records key for a request with digest sum that creates taskID, unless the
// key is known: then it returns the key as first recorded and fresh is false. The caller
// compares the digests; a claimed key whose Response is nil was claimed by a request that may
// not have created its task yet (it may have failed, or still run).
func ClaimIdempotencyKey(ctx context.Context, db DB, key string, sum []byte, taskID string) (k IdempotencyKey, fresh bool, err error) {
	row := db.QueryRow(ctx, `
		INSERT INTO api_idempotency_keys (key, request_sha256, task_id) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO NOTHING
		RETURNING key, request_sha256, task_id, response, created_at`, key, sum, taskID)
	k, err = scanIdempotencyKey(row)
	if err == nil {
		return k, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return k, false, fmt.Errorf("claiming idempotency key: %w", err)
	}
	k, err = scanIdempotencyKey(db.QueryRow(ctx, `
		SELECT key, request_sha256, task_id, response, created_at
		FROM api_idempotency_keys WHERE key = $1`, key))
	if err != nil {
		return k, false, fmt.Errorf("reading idempotency key: %w", err)
	}
	return k, false, nil
}

// CompleteIdempotencyKey records the answer of the request that claimed key. The first answer
// stays: a later call changes nothing.
func CompleteIdempotencyKey(ctx context.Context, db DB, key string, response json.RawMessage) error {
	_, err := db.Exec(ctx, `
		UPDATE api_idempotency_keys SET response = $2, completed_at = now()
		WHERE key = $1 AND response IS NULL`, key, response)
	if err != nil {
		return fmt.Errorf("completing idempotency key: %w", err)
	}
	return nil
}

func scanIdempotencyKey(row pgx.Row) (IdempotencyKey, error) {
	var k IdempotencyKey
	var resp []byte
	err := row.Scan(&k.Key, &k.RequestSHA256, &k.TaskID, &resp, &k.CreatedAt)
	if resp != nil {
		k.Response = resp
	}
	return k, err
}

package store_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
)

// A key is claimed once: a second claim gets the first one's digest and task, whatever it
// brings, and the first answer recorded stays.
func TestIdempotencyKeys(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	k, fresh, err := store.ClaimIdempotencyKey(ctx, db, "k1", []byte{1, 2}, "task-a")
	must(t, err)
	if !fresh || k.TaskID != "task-a" || k.Response != nil {
		t.Fatalf("first claim: %+v fresh=%v", k, fresh)
	}
	k, fresh, err = store.ClaimIdempotencyKey(ctx, db, "k1", []byte{3}, "task-b")
	must(t, err)
	if fresh || k.TaskID != "task-a" || !bytes.Equal(k.RequestSHA256, []byte{1, 2}) {
		t.Fatalf("second claim: %+v fresh=%v", k, fresh)
	}
	must(t, store.CompleteIdempotencyKey(ctx, db, "k1", json.RawMessage(`{"turn":1}`)))
	must(t, store.CompleteIdempotencyKey(ctx, db, "k1", json.RawMessage(`{"turn":2}`)))
	k, _, err = store.ClaimIdempotencyKey(ctx, db, "k1", []byte{1, 2}, "task-c")
	must(t, err)
	var got struct{ Turn int }
	must(t, json.Unmarshal(k.Response, &got))
	if got.Turn != 1 {
		t.Fatalf("the recorded answer is %s, want the first", k.Response)
	}
	if k2, fresh, err := store.ClaimIdempotencyKey(ctx, db, "k2", []byte{1, 2}, "task-d"); err != nil || !fresh || k2.TaskID != "task-d" {
		t.Fatalf("another key: %+v fresh=%v, %v", k2, fresh, err)
	}
}

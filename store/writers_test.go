package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
)

// writerBatch is n events of one attempt's writer.
func writerBatch(n int) []store.EventInput {
	evs := make([]store.EventInput, n)
	for i := range evs {
		evs[i] = ev("message_chunk", `{"text": "x"}`)
	}
	return evs
}

func countEvents(t *testing.T, db store.DB, taskID string) int {
	t.Helper()
	evs, err := store.ListEvents(t.Context(), db, taskID, 0, 0)
	must(t, err)
	return len(evs)
}

func TestWriterBatchSentAgainIsRefused(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	begin(t, db, attempt("t", "a1", 1))

	w := store.Writer{AttemptID: "a1", After: 0, Through: 2}
	if _, _, err := store.AppendWriterEvents(ctx, db, "t", w, writerBatch(2)); err != nil {
		t.Fatal(err)
	}
	// The reply was lost, say, and the writer sends the batch again.
	if _, _, err := store.AppendWriterEvents(ctx, db, "t", w, writerBatch(2)); !errors.Is(err, store.ErrWriterAhead) {
		t.Fatalf("the same batch again: err = %v, want ErrWriterAhead", err)
	}
	if n := countEvents(t, db, "t"); n != 2 {
		t.Fatalf("%d events stored, want 2", n)
	}
	emitted, last, err := store.WriterProgress(ctx, db, "t", "a1")
	must(t, err)
	if emitted != 2 || last != 2 {
		t.Fatalf("progress = %d through seq %d, want 2 through 2", emitted, last)
	}
	// The refused copy took no sequence numbers: the next batch follows on.
	first, _, err := store.AppendWriterEvents(ctx, db, "t", store.Writer{AttemptID: "a1", After: 2, Through: 3}, writerBatch(1))
	must(t, err)
	if first != 3 {
		t.Fatalf("next batch starts at seq %d, want 3", first)
	}
	if _, _, err := store.AppendWriterEvents(ctx, db, "t", store.Writer{AttemptID: "a1", After: 3, Through: 2}, writerBatch(1)); err == nil {
		t.Fatal("a batch ending before it starts was accepted")
	}
}

// A batch whose first copy is still in flight when the writer sends it again (its reply was
// lost, and the writer asked for its progress before Postgres committed the first copy) waits for
// that copy and is refused, for the first batch of a registered writer as for any later one.
func TestWriterBatchRacingItsFirstCopyIsStoredOnce(t *testing.T) {
	t.Parallel()
	for _, after := range []int64{0, 2} {
		db := pgtest.NewPool(t)
		ctx := t.Context()
		begin(t, db, attempt("t", "a1", 1))
		if after > 0 {
			_, _, err := store.AppendWriterEvents(ctx, db, "t", store.Writer{AttemptID: "a1", Through: after}, writerBatch(int(after)))
			must(t, err)
		}
		w := store.Writer{AttemptID: "a1", After: after, Through: after + 3}

		// The first copy: appended, not yet committed.
		tx, err := db.Begin(ctx)
		must(t, err)
		defer tx.Rollback(context.Background())
		if _, _, err := store.AppendWriterEvents(ctx, tx, "t", w, writerBatch(3)); err != nil {
			t.Fatal(err)
		}
		// The writer, unsure, reads its progress: the first copy is not visible yet.
		if emitted, _, err := store.WriterProgress(ctx, db, "t", "a1"); err != nil || emitted != after {
			t.Fatalf("progress while the first copy is in flight = %d, %v; want %d", emitted, err, after)
		}
		// So it sends the batch again.
		done := make(chan error, 1)
		go func() {
			_, _, err := store.AppendWriterEvents(ctx, db, "t", w, writerBatch(3))
			done <- err
		}()
		waitForLockWait(t, db)
		must(t, tx.Commit(ctx))
		if err := <-done; !errors.Is(err, store.ErrWriterAhead) {
			t.Fatalf("after %d: the second copy: err = %v, want ErrWriterAhead", after, err)
		}
		if n := countEvents(t, db, "t"); n != int(after)+3 {
			t.Fatalf("after %d: %d events stored, want %d", after, n, after+3)
		}
	}
}

// waitForLockWait waits until a session of the test's database waits for a row lock.
func waitForLockWait(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		must(t, db.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no session waits for a lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

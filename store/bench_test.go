package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
)

// benchBatch returns n events with a payload the size of a typical streamed text chunk.
func benchBatch(n int) []store.EventInput {
	payload := json.RawMessage(`{"kind":"message_chunk","message_id":"msg_01AbCdEfGhIjKlMnOpQrStUv","text":"` +
		"The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog." + `"}`)
	evs := make([]store.EventInput, n)
	for i := range evs {
		evs[i] = store.EventInput{Turn: 1, Attempt: 1, Type: "message_chunk", Payload: payload}
	}
	return evs
}

// BenchmarkAppendEvents measures AppendEvents (one statement per batch: counter, multi-row
// insert from arrays, notify) in events per second for batches of 1, 16 and 64.
func BenchmarkAppendEvents(b *testing.B) {
	db := pgtest.NewPool(b)
	for _, size := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			ctx, evs, task := b.Context(), benchBatch(size), fmt.Sprint("bench-", size)
			for b.Loop() {
				if _, _, err := store.AppendEvents(ctx, db, task, evs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkAppendEventsCopyFrom measures the alternative AppendEvents did not take: a
// transaction with the counter update, CopyFrom and pg_notify as separate round trips.
func BenchmarkAppendEventsCopyFrom(b *testing.B) {
	db := pgtest.NewPool(b)
	for _, size := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			ctx, evs, task := b.Context(), benchBatch(size), fmt.Sprint("bench-", size)
			for b.Loop() {
				if err := appendWithCopy(ctx, db, task, evs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

func appendWithCopy(ctx context.Context, db store.TxDB, taskID string, evs []store.EventInput) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var base int64
		err := tx.QueryRow(ctx, `
			INSERT INTO task_event_counters AS c (task_id, last_seq) VALUES ($1, $2)
			ON CONFLICT (task_id) DO UPDATE SET last_seq = c.last_seq + excluded.last_seq
			RETURNING last_seq - $2`, taskID, int64(len(evs))).Scan(&base)
		if err != nil {
			return err
		}
		rows := make([][]any, len(evs))
		for i, e := range evs {
			rows[i] = []any{taskID, base + int64(i) + 1, int32(e.Turn), int32(e.Attempt), e.Type, e.Payload}
		}
		_, err = tx.CopyFrom(ctx, pgx.Identifier{"task_events"},
			[]string{"task_id", "seq", "turn", "attempt", "type", "payload"}, pgx.CopyFromRows(rows))
		if err != nil {
			return err
		}
		notice, _ := json.Marshal(store.EventNotice{TaskID: taskID, FirstSeq: base + 1, LastSeq: base + int64(len(evs))})
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", store.EventsChannel, string(notice))
		return err
	})
}

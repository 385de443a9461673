package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
)

func appendEvents(t *testing.T, db store.DB, taskID string, evs ...store.EventInput) (int64, int64) {
	t.Helper()
	first, last, err := store.AppendEvents(t.Context(), db, taskID, evs)
	must(t, err)
	return first, last
}

func ev(typ, payload string) store.EventInput {
	e := store.EventInput{Turn: 1, Attempt: 1, Type: typ}
	if payload != "" {
		e.Payload = json.RawMessage(payload)
	}
	return e
}

func TestAppendAndListEvents(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	first, last := appendEvents(t, db, "t",
		store.EventInput{Turn: 1, Attempt: 1, Type: "message_chunk", Payload: json.RawMessage(`{"text": "hi"}`)},
		store.EventInput{Turn: 1, Attempt: 2, Type: "turn_retry"},
		store.EventInput{Turn: 2, Attempt: 1, Type: "tool_call", Payload: json.RawMessage(`[1, "two", null]`)})
	if first != 1 || last != 3 {
		t.Fatalf("first batch got seqs %d..%d, want 1..3", first, last)
	}
	if first, last = appendEvents(t, db, "t", ev("a", "1"), ev("b", `"s"`)); first != 4 || last != 5 {
		t.Fatalf("second batch got seqs %d..%d, want 4..5", first, last)
	}
	if first, last = appendEvents(t, db, "other", ev("x", "")); first != 1 || last != 1 {
		t.Fatalf("another task's first event got seqs %d..%d, want 1..1", first, last)
	}

	events, err := store.ListEvents(ctx, db, "t", 0, 0)
	must(t, err)
	want := []struct {
		seq           int64
		turn, attempt int
		typ, payload  string
	}{
		{1, 1, 1, "message_chunk", `{"text": "hi"}`},
		{2, 1, 2, "turn_retry", ""},
		{3, 2, 1, "tool_call", `[1, "two", null]`},
		{4, 1, 1, "a", "1"},
		{5, 1, 1, "b", `"s"`},
	}
	if len(events) != len(want) {
		t.Fatalf("ListEvents returned %d events, want %d: %+v", len(events), len(want), events)
	}
	for i, w := range want {
		e := events[i]
		if e.TaskID != "t" || e.Seq != w.seq || e.Turn != w.turn || e.Attempt != w.attempt || e.Type != w.typ ||
			string(e.Payload) != w.payload || e.CreatedAt.IsZero() {
			t.Errorf("event %d = %+v (payload %s), want %+v", i, e, e.Payload, w)
		}
	}

	page, err := store.ListEvents(ctx, db, "t", 2, 2)
	must(t, err)
	if len(page) != 2 || page[0].Seq != 3 || page[1].Seq != 4 {
		t.Fatalf("ListEvents(after 2, limit 2) = %+v, want seqs 3, 4", page)
	}
	none, err := store.ListEvents(ctx, db, "t", 5, 10)
	must(t, err)
	if len(none) != 0 {
		t.Fatalf("ListEvents past the end = %+v", none)
	}
}

func TestAppendEventsRejectsBadBatchWholly(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	for name, evs := range map[string][]store.EventInput{
		"no events":    nil,
		"no type":      {ev("ok", ""), {Payload: json.RawMessage(`{}`)}},
		"invalid json": {ev("ok", ""), ev("bad", `{"a":`)},
	} {
		if _, _, err := store.AppendEvents(ctx, db, "t", evs); err == nil {
			t.Errorf("%s: AppendEvents accepted it", name)
		}
	}
	if first, _ := appendEvents(t, db, "t", ev("ok", "")); first != 1 {
		t.Fatalf("after rejected batches the first event got seq %d, want 1", first)
	}
}

func TestRolledBackAppendLeavesNoGap(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	appendEvents(t, db, "t", ev("a", ""))

	tx, err := db.Begin(ctx)
	must(t, err)
	if first, last := appendEvents(t, tx, "t", ev("b", ""), ev("c", "")); first != 2 || last != 3 {
		t.Fatalf("in the transaction got %d..%d, want 2..3", first, last)
	}
	must(t, tx.Rollback(ctx))

	if first, last := appendEvents(t, db, "t", ev("d", "")); first != 2 || last != 2 {
		t.Fatalf("after the rollback got %d..%d, want 2..2", first, last)
	}
	events, err := store.ListEvents(ctx, db, "t", 0, 0)
	must(t, err)
	if len(events) != 2 || events[1].Type != "d" {
		t.Fatalf("events = %+v, want a and d", events)
	}
}

// listen returns a connection of its own that listens on store.EventsChannel.
func listen(t *testing.T, db *pgxpool.Pool) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(t.Context(), db.Config().ConnConfig)
	must(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	_, err = conn.Exec(t.Context(), "LISTEN "+store.EventsChannel)
	must(t, err)
	return conn
}

func nextNotice(t *testing.T, conn *pgx.Conn) (store.EventNotice, string) {
	t.Helper()
	n, err := conn.WaitForNotification(t.Context())
	must(t, err)
	var notice store.EventNotice
	must(t, json.Unmarshal([]byte(n.Payload), &notice))
	return notice, n.Payload
}

func TestAppendEventsNotifiesOncePerBatchWithIDsOnly(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	conn := listen(t, db)

	appendEvents(t, db, "t", ev("a", `{"secret":"sk-ant-payload"}`), ev("b", ""), ev("c", ""))
	// Two batches inside one transaction: two notices, sent at commit.
	must(t, pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		appendEvents(t, tx, "t", ev("d", ""))
		appendEvents(t, tx, "t", ev("e", ""), ev("f", ""))
		return nil
	}))
	appendEvents(t, db, "u", ev("x", ""))

	// Notices from one session arrive in commit order, so the batch of three sent exactly
	// one if the next notice is the transaction's first batch.
	want := []store.EventNotice{{TaskID: "t", FirstSeq: 1, LastSeq: 3}, {TaskID: "t", FirstSeq: 4, LastSeq: 4}, {TaskID: "t", FirstSeq: 5, LastSeq: 6}, {TaskID: "u", FirstSeq: 1, LastSeq: 1}}
	for i, w := range want {
		got, raw := nextNotice(t, conn)
		if got != w {
			t.Fatalf("notice %d = %+v (%s), want %+v", i, got, raw, w)
		}
		if strings.Contains(raw, "sk-ant") || strings.Contains(raw, "secret") {
			t.Fatalf("notice %d carries payload data: %s", i, raw)
		}
	}
}

func TestConcurrentAppendersGetGaplessUniqueSeqs(t *testing.T) {
	t.Parallel()
	const writers, batches = 8, 20
	cfg, err := pgxpool.ParseConfig(pgtest.NewPool(t).Config().ConnString())
	must(t, err)
	cfg.MaxConns = writers
	db, err := pgxpool.NewWithConfig(t.Context(), cfg)
	must(t, err)
	t.Cleanup(db.Close)
	ctx := t.Context()

	var wg sync.WaitGroup
	errs := make([]error, writers)
	total := 0
	for w := range writers {
		for b := range batches {
			total += 1 + (w+b)%4
		}
		wg.Go(func() {
			for b := range batches {
				evs := make([]store.EventInput, 1+(w+b)%4)
				for i := range evs {
					evs[i] = store.EventInput{Turn: w, Attempt: b, Type: "e",
						Payload: json.RawMessage(fmt.Sprintf(`{"w":%d,"b":%d,"i":%d}`, w, b, i))}
				}
				first, last, err := store.AppendEvents(ctx, db, "t", evs)
				if err == nil && last-first+1 != int64(len(evs)) {
					err = fmt.Errorf("batch of %d got seqs %d..%d", len(evs), first, last)
				}
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	must(t, errors.Join(errs...))

	events, err := store.ListEvents(ctx, db, "t", 0, 0)
	must(t, err)
	if len(events) != total {
		t.Fatalf("%d events stored, want %d", len(events), total)
	}
	type key struct{ w, b, i int }
	seen := map[key]bool{}
	lastOfWriter := map[int]int64{}
	for i, e := range events {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: gap or duplicate", i, e.Seq)
		}
		var k key
		must(t, json.Unmarshal(e.Payload, &struct{ W, B, I *int }{&k.w, &k.b, &k.i}))
		if seen[k] {
			t.Fatalf("event %+v stored twice", k)
		}
		seen[k] = true
		if e.Seq <= lastOfWriter[k.w] {
			t.Fatalf("writer %d's events out of order at seq %d", k.w, e.Seq)
		}
		lastOfWriter[k.w] = e.Seq
	}
}

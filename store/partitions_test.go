package store_test

import (
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/migrations"
	"github.com/drover-run/drover/store"
)

// eventHomes returns, for each of the task's events in order, the table that holds it.
func eventHomes(t *testing.T, pool *pgxpool.Pool, taskID string) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT tableoid::regclass::text FROM task_events WHERE task_id = $1 ORDER BY seq`, taskID)
	must(t, err)
	homes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	must(t, err)
	return homes
}

// isPartition says whether name is a partition of task_events, by the catalog.
func isPartition(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var ok bool
	must(t, pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'task_events'::regclass AND c.relname = $1)`, name).Scan(&ok))
	return ok
}

func appendN(t *testing.T, pool *pgxpool.Pool, taskID string, n int) {
	t.Helper()
	evs := make([]store.EventInput, n)
	for i := range evs {
		evs[i] = store.EventInput{Turn: 1, Attempt: 1, Type: "assistant_text", Payload: []byte(`{"n":` + strconv.Itoa(i) + `}`)}
	}
	_, _, err := store.AppendEvents(t.Context(), pool, taskID, evs)
	must(t, err)
}

// TestAppendsLandInTheirWeeksPartition: a new database has this week's partition of task_events
// and the next two, made by its migration, and an append goes to this week's.
func TestAppendsLandInTheirWeeksPartition(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	var now time.Time
	must(t, pool.QueryRow(t.Context(), `SELECT now()`).Scan(&now))
	week := store.EventWeek(now)
	parts, err := store.EventPartitions(t.Context(), pool)
	must(t, err)
	var names []string
	for _, p := range parts {
		names = append(names, p.Name)
	}
	want := []string{store.EventPartitionName(week), store.EventPartitionName(week.AddDate(0, 0, 7)),
		store.EventPartitionName(week.AddDate(0, 0, 14))}
	if !slices.Equal(names, want) {
		t.Fatalf("partitions %v, want %v", names, want)
	}
	appendN(t, pool, "t-week", 3)
	if homes := eventHomes(t, pool, "t-week"); !slices.Equal(homes, []string{want[0], want[0], want[0]}) {
		t.Fatalf("the events are in %v, want all in %s", homes, want[0])
	}
	// Reads by (task_id, seq) can stay on the primary key's index, in every partition, in order
	// (the tables are too small here for the planner to prefer it unless told; the list plan
	// test checks the choice at a hundred thousand tasks).
	tx, err := pool.Begin(t.Context())
	must(t, err)
	defer func() { _ = tx.Rollback(t.Context()) }()
	_, err = tx.Exec(t.Context(), `SET LOCAL enable_seqscan = off`)
	must(t, err)
	rows, err := tx.Query(t.Context(), `EXPLAIN (COSTS OFF) SELECT * FROM task_events WHERE task_id = 't-week' AND seq > 1 ORDER BY seq LIMIT 10`)
	must(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	must(t, err)
	for _, l := range lines {
		if node := strings.TrimLeft(l, " ->"); strings.HasPrefix(node, "Seq Scan") || node == "Sort" {
			t.Fatalf("reading a task's events: %s, want index scans:\n%v", l, lines)
		}
	}
}

// TestAnAppendWithoutItsWeekGoesToDefaultAndMovesIn: with no partition for this week, an append
// lands in the default partition and is read as any other; when the week's partition is made,
// the row moves into it and the task's log goes on gapless.
func TestAnAppendWithoutItsWeekGoesToDefaultAndMovesIn(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	var now time.Time
	must(t, pool.QueryRow(t.Context(), `SELECT now()`).Scan(&now))
	name := store.EventPartitionName(store.EventWeek(now))
	_, err := pool.Exec(t.Context(), `DROP TABLE `+name)
	must(t, err)

	appendN(t, pool, "t-default", 2)
	if homes := eventHomes(t, pool, "t-default"); !slices.Equal(homes, []string{store.EventDefaultPartition, store.EventDefaultPartition}) {
		t.Fatalf("the events are in %v, want the default partition", homes)
	}
	evs, err := store.ListEvents(t.Context(), pool, "t-default", 0, 0)
	must(t, err)
	if len(evs) != 2 || evs[1].Seq != 2 {
		t.Fatalf("read %d events from the default partition, want 2", len(evs))
	}

	made, err := store.EnsureEventPartitions(t.Context(), pool, now, store.EventPartitionsAhead)
	must(t, err)
	if !slices.Equal(made, []string{name}) || !isPartition(t, pool, name) {
		t.Fatalf("made %v, want [%s] attached", made, name)
	}
	appendN(t, pool, "t-default", 1)
	if homes := eventHomes(t, pool, "t-default"); !slices.Equal(homes, []string{name, name, name}) {
		t.Fatalf("the events are in %v, want all in %s", homes, name)
	}
	evs, err = store.ListEvents(t.Context(), pool, "t-default", 0, 0)
	must(t, err)
	if len(evs) != 3 || evs[0].Seq != 1 || evs[2].Seq != 3 {
		t.Fatalf("read %v after the move, want seq 1, 2, 3", evs)
	}
	made, err = store.EnsureEventPartitions(t.Context(), pool, now, store.EventPartitionsAhead)
	if err != nil || len(made) != 0 {
		t.Fatalf("made %v again (%v), want none", made, err)
	}
}

// TestMigrationMovesEventsIntoWeeks: a database at the version before task_events was
// partitioned, holding events of several weeks, keeps every event after the migration, each in
// its week's partition, and its tasks' logs go on from where they were.
func TestMigrationMovesEventsIntoWeeks(t *testing.T) {
	t.Parallel()
	pool := emptyPool(t, 4)
	before := fstest.MapFS{}
	files, err := fs.Glob(migrations.FS, "*.sql")
	must(t, err)
	for _, f := range files {
		if v, _ := strconv.Atoi(f[:4]); v < 17 {
			data, err := fs.ReadFile(migrations.FS, f)
			must(t, err)
			before[f] = &fstest.MapFile{Data: data}
		}
	}
	_, err = store.MigrateFS(t.Context(), pool, before, nil)
	must(t, err)
	// Task old: 3 events 40 days ago, 2 today; task new: 1 event today.
	_, err = pool.Exec(t.Context(), `
		INSERT INTO task_events (task_id, seq, type, payload, created_at)
		SELECT 'old', s, 'assistant_text', jsonb_build_object('n', s),
			CASE WHEN s <= 3 THEN now() - interval '40 days' ELSE now() END FROM generate_series(1, 5) s;
		INSERT INTO task_events (task_id, seq, type, created_at) VALUES ('new', 1, 'session_status', now());
		INSERT INTO task_event_counters (task_id, last_seq) VALUES ('old', 5), ('new', 1)`)
	must(t, err)
	var old, now time.Time
	must(t, pool.QueryRow(t.Context(), `SELECT min(created_at), max(created_at) FROM task_events`).Scan(&old, &now))

	applied, err := store.Migrate(t.Context(), pool, nil)
	must(t, err)
	if !slices.Contains(applied, 17) {
		t.Fatalf("applied %v, want 17", applied)
	}
	oldWeek, thisWeek := store.EventPartitionName(store.EventWeek(old)), store.EventPartitionName(store.EventWeek(now))
	if homes := eventHomes(t, pool, "old"); !slices.Equal(homes, []string{oldWeek, oldWeek, oldWeek, thisWeek, thisWeek}) {
		t.Fatalf("task old's events are in %v, want 3 in %s and 2 in %s", homes, oldWeek, thisWeek)
	}
	if homes := eventHomes(t, pool, "new"); !slices.Equal(homes, []string{thisWeek}) {
		t.Fatalf("task new's event is in %v, want %s", homes, thisWeek)
	}
	parts, err := store.EventPartitions(t.Context(), pool)
	must(t, err)
	if len(parts) != 9 && len(parts) != 8 { // 40 days back to two weeks ahead: 8 or 9 weeks
		t.Fatalf("%d partitions %v, want one a week from %s", len(parts), parts, oldWeek)
	}
	for i := 1; i < len(parts); i++ {
		if !parts[i].From.Equal(parts[i-1].To) {
			t.Fatalf("partitions %v leave a gap", parts)
		}
	}
	first, last, err := store.AppendEvents(t.Context(), pool, "old", []store.EventInput{{Type: "assistant_text"}})
	if err != nil || first != 6 || last != 6 {
		t.Fatalf("appending after the migration gave %d..%d, %v; want 6", first, last, err)
	}
	evs, err := store.ListEvents(t.Context(), pool, "old", 0, 0)
	must(t, err)
	if len(evs) != 6 || string(evs[0].Payload) != `{"n": 1}` {
		t.Fatalf("task old reads %d events (first %s), want 6 from {\"n\": 1}", len(evs), evs[0].Payload)
	}
}

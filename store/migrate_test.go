package store_test

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
)

// emptyPool returns a pool on a fresh database without any schema.
func emptyPool(t *testing.T, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(t))
	must(t, err)
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	must(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func appliedVersions(t *testing.T, pool *pgxpool.Pool) []int {
	t.Helper()
	rows, err := pool.Query(t.Context(), "SELECT version FROM schema_migrations ORDER BY version")
	must(t, err)
	defer rows.Close()
	var versions []int
	for rows.Next() {
		var v int
		must(t, rows.Scan(&v))
		versions = append(versions, v)
	}
	must(t, rows.Err())
	return versions
}

func tableExists(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var exists bool
	must(t, pool.QueryRow(t.Context(), "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists))
	return exists
}

func TestMigrateIsIdempotentAndLogs(t *testing.T) {
	t.Parallel()
	pool := emptyPool(t, 4)
	var logs syncBuffer

	applied, err := store.Migrate(t.Context(), pool, testLogger(t, &logs))
	must(t, err)
	if len(applied) == 0 || applied[0] != 1 {
		t.Fatalf("first run applied %v, want versions from 1", applied)
	}
	for _, v := range applied {
		if !strings.Contains(logs.String(), "msg=\"applied migration\" version="+strconv.Itoa(v)+" ") {
			t.Errorf("no log line for version %d in:\n%s", v, logs.String())
		}
	}
	for _, table := range []string{"executors_running", "task_events", "task_event_counters", "task_turns"} {
		if !tableExists(t, pool, table) {
			t.Errorf("table %s missing after migrating", table)
		}
	}

	again, err := store.Migrate(t.Context(), pool, nil)
	must(t, err)
	if len(again) != 0 {
		t.Fatalf("second run applied %v, want nothing", again)
	}
	if got := appliedVersions(t, pool); !slices.Equal(got, applied) {
		t.Fatalf("schema_migrations = %v, want %v", got, applied)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	const workers = 6
	pool := emptyPool(t, workers)
	fsys := fstest.MapFS{
		"0001_a.sql": {Data: []byte("CREATE TABLE a (x int); SELECT pg_sleep(0.05);")},
		"0002_b.sql": {Data: []byte("CREATE TABLE b (x int);")},
		"0003_c.sql": {Data: []byte("INSERT INTO a VALUES (1);")},
	}

	var wg sync.WaitGroup
	results := make([][]int, workers)
	errs := make([]error, workers)
	for i := range workers {
		wg.Go(func() { results[i], errs[i] = store.MigrateFS(t.Context(), pool, fsys, nil) })
	}
	wg.Wait()

	var all []int
	for i := range workers {
		if errs[i] != nil {
			t.Errorf("worker %d: %v", i, errs[i])
		}
		all = append(all, results[i]...)
	}
	slices.Sort(all)
	if !slices.Equal(all, []int{1, 2, 3}) {
		t.Fatalf("versions applied across workers = %v, want each of 1, 2, 3 exactly once", all)
	}
	var rows int
	must(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM a").Scan(&rows))
	if rows != 1 {
		t.Fatalf("table a has %d rows, want 1 (migration 3 ran more than once?)", rows)
	}
	// The advisory lock was released: a session can take it without waiting.
	var free bool
	const migrationLockKey int64 = 0x6472_6f76_6572_6d31 // as in migrate.go
	must(t, pool.QueryRow(t.Context(), "SELECT pg_try_advisory_lock($1)", migrationLockKey).Scan(&free))
	if !free {
		t.Fatal("migration advisory lock still held after Migrate returned")
	}
}

func TestMigrateRefusesBadSetBeforeTouchingTheDatabase(t *testing.T) {
	t.Parallel()
	pool := emptyPool(t, 2)
	fsys := fstest.MapFS{
		"0001_a.sql": {Data: []byte("CREATE TABLE a (x int);")},
		"0003_c.sql": {Data: []byte("CREATE TABLE c (x int);")},
	}
	applied, err := store.MigrateFS(t.Context(), pool, fsys, nil)
	if err == nil || !strings.Contains(err.Error(), "gap") {
		t.Fatalf("MigrateFS with a gap = %v, %v; want a gap error", applied, err)
	}
	if tableExists(t, pool, "a") || tableExists(t, pool, "schema_migrations") {
		t.Fatal("a refused migration set changed the database")
	}
}

func TestMigrateStopsAtFailingMigration(t *testing.T) {
	t.Parallel()
	pool := emptyPool(t, 2)
	fsys := fstest.MapFS{
		"0001_a.sql": {Data: []byte("CREATE TABLE a (x int);")},
		"0002_b.sql": {Data: []byte("CREATE TABLE b (x int); INSERT INTO no_such_table VALUES (1);")},
	}
	applied, err := store.MigrateFS(t.Context(), pool, fsys, nil)
	if err == nil || !strings.Contains(err.Error(), "applying migration 2 (0002_b.sql)") {
		t.Fatalf("err = %v, want migration 2 to fail", err)
	}
	if !slices.Equal(applied, []int{1}) {
		t.Fatalf("applied = %v, want [1]", applied)
	}
	if !tableExists(t, pool, "a") || tableExists(t, pool, "b") {
		t.Fatal("want table a (migration 1) and no table b (migration 2 rolled back)")
	}
	if got := appliedVersions(t, pool); !slices.Equal(got, []int{1}) {
		t.Fatalf("schema_migrations = %v, want [1]", got)
	}

	fsys["0002_b.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE b (x int);")}
	applied, err = store.MigrateFS(t.Context(), pool, fsys, nil)
	must(t, err)
	if !slices.Equal(applied, []int{2}) || !tableExists(t, pool, "b") {
		t.Fatalf("after the fix applied = %v, want [2] and table b", applied)
	}
}

func TestMigrateLeavesNewerDatabaseAlone(t *testing.T) {
	t.Parallel()
	pool := emptyPool(t, 2)
	newer := fstest.MapFS{
		"0001_a.sql": {Data: []byte("CREATE TABLE a (x int);")},
		"0002_b.sql": {Data: []byte("CREATE TABLE b (x int);")},
	}
	_, err := store.MigrateFS(t.Context(), pool, newer, nil)
	must(t, err)

	var logs syncBuffer
	older := fstest.MapFS{"0001_a.sql": newer["0001_a.sql"]}
	applied, err := store.MigrateFS(t.Context(), pool, older, testLogger(t, &logs))
	if err != nil || len(applied) != 0 {
		t.Fatalf("older binary: applied %v, %v; want nothing and no error", applied, err)
	}
	if !strings.Contains(logs.String(), "database schema is newer than this binary") {
		t.Fatalf("no warning about the newer schema in:\n%s", logs.String())
	}
}

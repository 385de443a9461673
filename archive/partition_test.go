package archive_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/archive"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// pastWeek makes the partition of task_events of the week weeks before this one and moves the
// events of the tasks ids into it (a day into the week), as if they had run then; it returns
// the partition.
func pastWeek(t *testing.T, pool *pgxpool.Pool, weeks int, ids ...string) store.EventPartition {
	t.Helper()
	ctx := t.Context()
	var now time.Time
	must(t, pool.QueryRow(ctx, `SELECT now()`).Scan(&now))
	week := store.EventWeek(now).AddDate(0, 0, -7*weeks)
	_, err := store.EnsureEventPartitions(ctx, pool, week, 0)
	must(t, err)
	for _, id := range ids {
		_, err := pool.Exec(ctx, `UPDATE task_events SET created_at = $2 WHERE task_id = $1`, id, week.Add(24*time.Hour))
		must(t, err)
	}
	return store.EventPartition{Name: store.EventPartitionName(week), From: week, To: week.AddDate(0, 0, 7)}
}

// eventsIn counts the task's events in the partition.
func eventsIn(t *testing.T, pool *pgxpool.Pool, p store.EventPartition, id string) int {
	t.Helper()
	var n int
	must(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM task_events WHERE task_id = $1 AND tableoid = to_regclass($2)`,
		id, p.Name).Scan(&n))
	return n
}

// partitionExists says whether the partition is a table, and one of task_events's, by the catalog.
func partitionExists(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var inCatalog, attached bool
	must(t, pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_class WHERE relname = $1),
		EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = 'task_events'::regclass AND c.relname = $1)`, name).Scan(&inCatalog, &attached))
	if inCatalog != attached {
		t.Fatalf("partition %s: a table %v, attached %v", name, inCatalog, attached)
	}
	return attached
}

// TestJobDropsAWeekOnceItsTasksAreArchived: of two tasks whose events lie in a past week, the
// one archived first loses its rows but its events stay for the week's drop; once the second is
// archived too, the job drops the week's partition whole, and both archives hold every event.
func TestJobDropsAWeekOnceItsTasksAreArchived(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewPool(t)
	first := finishedTask(t, pool, "first", task.StatusCompleted, 6)
	second := finishedTask(t, pool, "second", task.StatusFailed, 8)
	week := pastWeek(t, pool, 2, "first", "second")
	if eventsIn(t, pool, week, "first") != 6 || eventsIn(t, pool, week, "second") != 8 {
		t.Fatalf("the events are not in %s", week.Name)
	}
	age(t, pool, "first", 2*time.Hour)
	dir := t.TempDir()
	job, err := archive.NewJob(pool, archive.JobConfig{Dir: dir, Retention: time.Hour, DeleteAfter: -1, Rest: -1,
		PartitionGrace: 60 * 24 * time.Hour})
	must(t, err)

	res, err := job.Pass(ctx)
	must(t, err)
	if fmt.Sprint(res.Archived) != "[first]" {
		t.Fatalf("the first pass archived %v, want first", res.Archived)
	}
	res, err = job.Pass(ctx)
	must(t, err)
	if fmt.Sprint(res.Deleted) != "[first]" || len(res.Dropped) != 0 {
		t.Fatalf("the second pass deleted %v and dropped %v, want first deleted and no partition dropped", res.Deleted, res.Dropped)
	}
	if left := rowsOf(t, pool, "first"); left["tasks"]+left["task_turns"] != 0 || left["task_events"] != 6 {
		t.Fatalf("first left %v, want only its 6 events, kept for the week's drop", left)
	}

	age(t, pool, "second", 2*time.Hour)
	res, err = job.Pass(ctx)
	must(t, err)
	if fmt.Sprint(res.Archived) != "[second]" || len(res.Dropped) != 0 {
		t.Fatalf("the third pass archived %v and dropped %v, want second archived, nothing dropped", res.Archived, res.Dropped)
	}
	res, err = job.Pass(ctx)
	must(t, err)
	if !slices.Equal(res.Dropped, []string{week.Name}) || fmt.Sprint(res.Deleted) != "[second]" {
		t.Fatalf("the fourth pass dropped %v and deleted %v, want %s dropped and second deleted", res.Dropped, res.Deleted, week.Name)
	}
	if partitionExists(t, pool, week.Name) {
		t.Fatalf("%s is still a partition of task_events", week.Name)
	}
	for id, want := range map[string][]string{"first": first, "second": second} {
		if left := rowsOf(t, pool, id); len(left) != 0 {
			t.Errorf("%s left %v", id, left)
		}
		_, payloads := readArchive(t, filepath.Join(dir, archive.FileName(id)))
		if fmt.Sprint(compact(t, payloads)) != fmt.Sprint(compact(t, want)) {
			t.Errorf("the archive of %s holds the events\n%v\nwant\n%v", id, payloads, want)
		}
	}
	// This week's partition and the next ones stay: appends go there.
	parts, err := store.EventPartitions(ctx, pool)
	must(t, err)
	if len(parts) != 1+store.EventPartitionsAhead {
		t.Fatalf("partitions left: %v", parts)
	}
}

// TestJobDeletesByRowWhatAWeekKeptPastItsGrace: a past week that a task still running keeps
// is not dropped; once past its grace, the events the archived tasks left in it are deleted by
// row, and the running task's stay.
func TestJobDeletesByRowWhatAWeekKeptPastItsGrace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewPool(t)
	finishedTask(t, pool, "done", task.StatusCompleted, 6)
	finishedTask(t, pool, "running", task.StatusIdle, 4)
	week := pastWeek(t, pool, 3, "done", "running")
	age(t, pool, "done", 2*time.Hour)
	dir := t.TempDir()
	cfg := archive.JobConfig{Dir: dir, Retention: time.Hour, DeleteAfter: -1, Rest: -1, PartitionGrace: 60 * 24 * time.Hour}
	job, err := archive.NewJob(pool, cfg)
	must(t, err)
	for range 2 {
		_, err := job.Pass(ctx)
		must(t, err)
	}
	if eventsIn(t, pool, week, "done") != 6 || rowsOf(t, pool, "done")["tasks"] != 0 {
		t.Fatalf("done left %v, want its events only, within the week's grace", rowsOf(t, pool, "done"))
	}

	cfg.PartitionGrace = 24 * time.Hour
	job, err = archive.NewJob(pool, cfg)
	must(t, err)
	res, err := job.Pass(ctx)
	must(t, err)
	if len(res.Dropped) != 0 || !partitionExists(t, pool, week.Name) {
		t.Fatalf("dropped %v, a week with a running task's events", res.Dropped)
	}
	if n := eventsIn(t, pool, week, "done"); n != 0 || res.RowsDeleted != 6 {
		t.Fatalf("done has %d events left in %s (the pass deleted %d rows), want 0 past the grace", n, week.Name, res.RowsDeleted)
	}
	if n := eventsIn(t, pool, week, "running"); n != 4 {
		t.Fatalf("running has %d events, want its 4", n)
	}
}

// TestImportAfterDeletionWhileItsWeekKeepsEvents: a task deleted while a past week keeps its
// events for the week's drop imports back whole, its events once each, in order.
func TestImportAfterDeletionWhileItsWeekKeepsEvents(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewPool(t)
	want := finishedTask(t, pool, "back", task.StatusCompleted, 6)
	finishedTask(t, pool, "running", task.StatusIdle, 2)
	week := pastWeek(t, pool, 2, "back", "running")
	age(t, pool, "back", 2*time.Hour)
	dir := t.TempDir()
	job, err := archive.NewJob(pool, archive.JobConfig{Dir: dir, Retention: time.Hour, DeleteAfter: -1, Rest: -1,
		PartitionGrace: 60 * 24 * time.Hour})
	must(t, err)
	for range 2 {
		_, err := job.Pass(ctx)
		must(t, err)
	}
	if left := rowsOf(t, pool, "back"); left["tasks"] != 0 || eventsIn(t, pool, week, "back") != 6 {
		t.Fatalf("back left %v, want its events only", left)
	}
	f, err := os.Open(filepath.Join(dir, archive.FileName("back")))
	must(t, err)
	defer f.Close()
	_, err = archive.Import(ctx, pool, f)
	must(t, err)
	evs, err := store.ListEvents(ctx, pool, "back", 0, 0)
	must(t, err)
	var got []string
	for _, e := range evs {
		got = append(got, string(e.Payload))
	}
	if fmt.Sprint(compact(t, got)) != fmt.Sprint(compact(t, want)) || evs[len(evs)-1].Seq != 6 {
		t.Fatalf("the imported task's events: %v, want %v", got, want)
	}
}

package archive_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/drover-run/drover/archive"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskview"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// finishedTask writes a task as a worker leaves one: two turns with their events, an attempt's
// cost, a decided request and one waiting, and its final state recorded (status). It returns
// the events' payloads in order.
func finishedTask(t *testing.T, pool *pgxpool.Pool, id string, status task.Status, events int) []string {
	t.Helper()
	ctx := t.Context()
	now := time.Now()
	var payloads []string
	for turn := 1; turn <= 2; turn++ {
		_, err := pool.Exec(ctx, `INSERT INTO task_turns (task_id, turn, prompt, status, cost_usd, input_tokens, output_tokens,
			started_at, finished_at) VALUES ($1, $2, $3, 'completed', 0.125, 100, 20, $4, $4)`, id, turn, fmt.Sprintf("step %d", turn), now)
		must(t, err)
		var evs []store.EventInput
		for i := range events / 2 {
			p := fmt.Sprintf(`{"type":"assistant_text","text":"turn %d says %d"}`, turn, i)
			payloads = append(payloads, p)
			evs = append(evs, store.EventInput{Turn: turn, Attempt: 1, Type: "assistant_text", Payload: json.RawMessage(p)})
		}
		_, _, err = store.AppendEvents(ctx, pool, id, evs)
		must(t, err)
		must(t, store.RecordAttemptCost(ctx, pool, store.AttemptCost{TaskID: id, AttemptID: uuid.NewString(), Turn: turn, CostUSD: 0.125}))
	}
	for _, cmd := range []string{"ls", "make"} {
		_, _, err := store.AskPermission(ctx, pool, store.Ask{TaskID: id, RequestID: "req-" + cmd, Turn: 2, Attempt: 1,
			CLIRequestID: uuid.NewString(), Kind: "tool", ToolName: "Bash", Input: json.RawMessage(`{"command":"` + cmd + `"}`),
			InputHash: cmd, Summary: cmd, Deadline: now.Add(time.Hour)})
		must(t, err)
	}
	must(t, store.DecidePermission(ctx, pool, id, "req-ls", store.Decision{Status: task.OutcomeAllowed,
		Answer: json.RawMessage(`{"behavior":"allow"}`), DecidedBy: "carol"}))
	st, err := json.Marshal(task.State{Status: status, Workspace: "/srv/" + id, Model: "claude-sonnet-4-5", Turn: 2})
	must(t, err)
	must(t, store.RecordTaskState(ctx, pool, id, status, st, now, 9))
	return payloads
}

// age moves a task's last activity back by d, as if that much time had passed.
func age(t *testing.T, pool *pgxpool.Pool, id string, d time.Duration) {
	t.Helper()
	_, err := pool.Exec(t.Context(), `UPDATE tasks SET updated_at = updated_at - $2::interval WHERE task_id = $1`, id, d)
	must(t, err)
}

// readArchive reads an archive file with nothing but gzip and JSON: its records' kinds, and
// the events' payloads in order.
func readArchive(t *testing.T, path string) (kinds map[string]int, payloads []string) {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	must(t, err)
	kinds = map[string]int{}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			Kind string `json:"kind"`
			Row  struct {
				Payload json.RawMessage `json:"payload"`
			} `json:"row"`
		}
		must(t, json.Unmarshal(sc.Bytes(), &rec))
		kinds[rec.Kind]++
		if rec.Kind == store.RowEvent {
			payloads = append(payloads, string(rec.Row.Payload))
		}
	}
	must(t, sc.Err())
	return kinds, payloads
}

// compact writes each JSON value in one form (keys sorted, no spaces), as Postgres's jsonb
// does not keep the keys' order.
func compact(t *testing.T, ps []string) []string {
	t.Helper()
	out := make([]string, len(ps))
	for i, p := range ps {
		var v any
		must(t, json.Unmarshal([]byte(p), &v))
		b, err := json.Marshal(v)
		must(t, err)
		out[i] = string(b)
	}
	return out
}

// rowsOf counts what Postgres holds of a task, table by table.
func rowsOf(t *testing.T, pool *pgxpool.Pool, id string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"tasks", "task_events", "task_turns", "task_attempt_costs", "permission_requests",
		"task_event_counters", "executors_running"} {
		var n int
		must(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM "+table+" WHERE task_id = $1", id).Scan(&n))
		if n > 0 {
			out[table] = n
		}
	}
	return out
}

// TestRetentionArchivesAndImportBringsBack: the job archives a finished task past its retention
// into one file that plain gzip and JSON read (every event, in order), deletes every row of it,
// leaves the recent, the active and the long-kept tasks alone, and the file imported brings the
// task back as it was shown, marked imported.
func TestRetentionArchivesAndImportBringsBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewPool(t)
	v := taskview.New(pool)
	old := finishedTask(t, pool, "old", task.StatusCompleted, 40)
	finishedTask(t, pool, "recent", task.StatusFailed, 4)
	finishedTask(t, pool, "active", task.StatusIdle, 4)
	finishedTask(t, pool, "kept", task.StatusCancelled, 4)
	_, err := pool.Exec(ctx, `UPDATE tasks SET state = state || '{"retention": 3600000000000000}' WHERE task_id = 'kept'`) // 1000h
	must(t, err)
	for _, id := range []string{"old", "active", "kept"} {
		age(t, pool, id, 31*24*time.Hour)
	}
	age(t, pool, "recent", 29*24*time.Hour)
	before, err := v.Show(ctx, "old")
	must(t, err)
	dir := t.TempDir()
	job, err := archive.NewJob(pool, archive.JobConfig{Dir: dir, DeleteAfter: -1})
	must(t, err)
	res, err := job.Pass(ctx)
	must(t, err)
	if fmt.Sprint(res.Archived) != "[old]" || len(res.Deleted) != 0 {
		t.Fatalf("the first pass archived %v and deleted %v, want old archived, nothing deleted yet", res.Archived, res.Deleted)
	}
	path := filepath.Join(dir, archive.FileName("old"))
	kinds, payloads := readArchive(t, path)
	if fmt.Sprint(compact(t, payloads)) != fmt.Sprint(compact(t, old)) {
		t.Errorf("the archive's events:\n%v\nwant\n%v", payloads, old)
	}
	if kinds["task"] != 1 || kinds["turn"] != 2 || kinds["cost"] != 2 || kinds["decision"] != 2 || kinds["end"] != 1 || kinds["archive"] != 1 {
		t.Errorf("the archive holds %v", kinds)
	}
	res, err = job.Pass(ctx)
	must(t, err)
	if fmt.Sprint(res.Deleted) != "[old]" {
		t.Fatalf("the second pass deleted %v, want old", res.Deleted)
	}
	if left := rowsOf(t, pool, "old"); len(left) != 0 {
		t.Errorf("the archived task left rows: %v", left)
	}
	for _, id := range []string{"recent", "active", "kept"} {
		if n := rowsOf(t, pool, id)["task_events"]; n != 4 {
			t.Errorf("task %s has %d events left, want its 4", id, n)
		}
	}
	if _, err := v.Show(ctx, "old"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an archived task is still shown: %v", err)
	}

	f, err := os.Open(path)
	must(t, err)
	sum, err := archive.Import(ctx, pool, f)
	f.Close()
	must(t, err)
	if sum.TaskID != "old" || sum.Rows["event"] != 40 {
		t.Errorf("the import says %+v", sum)
	}
	after, err := v.Show(ctx, "old")
	must(t, err)
	if after.ImportedAt == nil {
		t.Error("the imported task does not say it was imported")
	}
	after.ImportedAt = nil
	b1, _ := json.Marshal(before)
	b2, _ := json.Marshal(after)
	if !bytes.Equal(b1, b2) {
		t.Errorf("the imported task shows\n%s\nwant what it showed before\n%s", b2, b1)
	}
	evs, err := v.Events(ctx, "old", 0, 0)
	must(t, err)
	var got []string
	for _, e := range evs {
		got = append(got, string(e.Event))
	}
	if fmt.Sprint(compact(t, got)) != fmt.Sprint(compact(t, old)) || evs[len(evs)-1].Seq != 40 {
		t.Errorf("the imported task's events: %v", got)
	}
	st, err := store.TaskArchiveState(ctx, pool, "old")
	must(t, err)
	if !st.Imported || rowsOf(t, pool, "old")["executors_running"] != 0 {
		t.Errorf("an imported task is %+v with an executor row: it could be resumed", st)
	}
	f, err = os.Open(path)
	must(t, err)
	defer f.Close()
	if _, err := archive.Import(ctx, pool, f); !errors.Is(err, store.ErrTaskExists) {
		t.Errorf("importing a task twice: %v, want ErrTaskExists", err)
	}
}

// TestImportRefusesAPartFile: an archive cut short, or whose rows do not add up, imports
// nothing.
func TestImportRefusesAPartFile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewPool(t)
	finishedTask(t, pool, "whole", task.StatusCompleted, 10)
	var buf bytes.Buffer
	_, err := archive.Export(ctx, pool, "whole", &buf)
	must(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(buf.Bytes()))
	must(t, err)
	var plain bytes.Buffer
	_, err = plain.ReadFrom(zr)
	must(t, err)
	lines := bytes.SplitAfter(plain.Bytes(), []byte("\n"))
	other := pgtest.NewPool(t)
	for name, cut := range map[string][]byte{
		"no trailer":    bytes.Join(lines[:len(lines)-2], nil),
		"a row missing": bytes.Join(append(append([][]byte{}, lines[:3]...), lines[4:]...), nil),
	} {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, _ = zw.Write(cut)
		must(t, zw.Close())
		var fe *archive.FormatError
		if _, err := archive.Import(ctx, other, &z); !errors.As(err, &fe) {
			t.Errorf("%s: %v, want a FormatError", name, err)
		}
		if n := rowsOf(t, other, "whole"); len(n) != 0 {
			t.Errorf("%s: the refused import wrote %v", name, n)
		}
	}
	if _, err := archive.Import(ctx, other, bytes.NewReader(buf.Bytes())); err != nil {
		t.Errorf("the whole file: %v", err)
	}
}

// TestWatchEndsWhenArchived: a watch of a task that is archived meanwhile delivers every event
// and then ends with an *store.ArchivedError that names the archive and says nothing was lost.
func TestWatchEndsWhenArchived(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	pool := pgtest.NewPool(t)
	payloads := finishedTask(t, pool, "watched", task.StatusCompleted, 20)
	var got []string
	seen := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- store.WatchEvents(ctx, pool, "watched", 0, func(e store.Event) error {
			got = append(got, string(e.Payload))
			if e.Seq == 20 {
				close(seen)
			}
			return nil
		})
	}()
	select {
	case <-seen:
	case err := <-done:
		t.Fatalf("the watch ended before the archival: %v", err)
	}
	age(t, pool, "watched", 31*24*time.Hour)
	dir := t.TempDir()
	job, err := archive.NewJob(pool, archive.JobConfig{Dir: dir})
	must(t, err)
	_, err = job.Pass(ctx)
	must(t, err)
	err = <-done
	var ae *store.ArchivedError
	if !errors.As(err, &ae) || ae.Delivered != 20 || ae.LastSeq != 20 || ae.Path != filepath.Join(dir, archive.FileName("watched")) {
		t.Fatalf("the watch ended with %v, want an ArchivedError naming the archive, all 20 delivered", err)
	}
	if fmt.Sprint(compact(t, got)) != fmt.Sprint(compact(t, payloads)) {
		t.Errorf("the watch delivered %v", got)
	}
	// A watch that starts on a task archived but not yet deleted ends at once, after its events.
	err = store.WatchEvents(ctx, pool, "watched", 15, func(store.Event) error { return nil })
	if !errors.As(err, &ae) || ae.Delivered != 20 {
		t.Fatalf("a late watch: %v", err)
	}
}

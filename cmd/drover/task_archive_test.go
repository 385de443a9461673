package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/archive"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// TestListExportImport: task list pages by --after with the cursor it names; task export
// writes a gzip archive of the task; once the archive job has deleted the task, task import
// brings it back for show and watch, marked imported, and refuses a second import.
func TestListExportImport(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	t.Setenv("DROVER_DATABASE_URL", dsn)
	t.Setenv("DROVER_LOG_LEVEL", "error")
	ctx := context.Background()
	cli := func(args ...string) (string, string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, args, nil, &out, &errb)
		return out.String(), errb.String(), err
	}
	if _, _, err := cli("migrate"); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	pool, err := store.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for i, id := range []string{"t1", "t2"} {
		if _, err := pool.Exec(ctx, `INSERT INTO task_turns (task_id, turn, prompt, status, started_at, finished_at)
			VALUES ($1, 1, 'hello', 'completed', $2, $2)`, id, time.Now().Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := store.AppendEvents(ctx, pool, id, []store.EventInput{{Turn: 1, Attempt: 1, Type: "assistant_text",
			Payload: json.RawMessage(`{"type":"assistant_text","text":"` + id + ` done"}`)}}); err != nil {
			t.Fatal(err)
		}
		st, _ := json.Marshal(task.State{Status: task.StatusCompleted, Workspace: "/w"})
		if err := store.RecordTaskState(ctx, pool, id, task.StatusCompleted, st, time.Now(), 1); err != nil {
			t.Fatal(err)
		}
	}
	out, errs, err := cli("task", "list", "--limit", "1", "-o", "json")
	if err != nil || !strings.Contains(out, `"t2"`) || !strings.Contains(errs, "more: drover task list --after ") {
		t.Fatalf("the first page: %v\n%s\n%s", err, out, errs)
	}
	cursor := strings.TrimSpace(errs[strings.LastIndex(errs, " ")+1:])
	out, errs, err = cli("task", "list", "--limit", "1", "--after", cursor, "-o", "json")
	if err != nil || !strings.Contains(out, `"t1"`) || strings.Contains(out, `"t2"`) || errs != "" {
		t.Fatalf("the page after %s: %v\n%s\n%s", cursor, err, out, errs)
	}
	if _, errs, err = cli("task", "list", "--after", "garbage"); err == nil || !strings.Contains(err.Error()+errs, "--after") {
		t.Errorf("a wrong cursor: %v %s", err, errs)
	}

	file := filepath.Join(t.TempDir(), "t1.jsonl.gz")
	if out, errs, err = cli("task", "export", "t1", "--file", file); err != nil || !strings.Contains(out, file) {
		t.Fatalf("export: %v\n%s\n%s", err, out, errs)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	_, _ = plain.ReadFrom(zr)
	f.Close()
	if !strings.Contains(plain.String(), `"text": "t1 done"`) && !strings.Contains(plain.String(), `"text":"t1 done"`) {
		t.Fatalf("the archive lacks the task's event:\n%s", plain.String())
	}
	if _, err := pool.Exec(ctx, `UPDATE tasks SET updated_at = now() - interval '40 days' WHERE task_id = 't1'`); err != nil {
		t.Fatal(err)
	}
	job, err := archive.NewJob(pool, archive.JobConfig{Dir: t.TempDir(), DeleteAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := job.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := cli("task", "show", "t1"); err == nil {
		t.Fatal("the archived task is still shown")
	}
	if out, errs, err = cli("task", "import", file); err != nil || !strings.Contains(out, "task t1 imported: 1 events") {
		t.Fatalf("import: %v\n%s\n%s", err, out, errs)
	}
	out, _, err = cli("task", "show", "t1", "-o", "json")
	if err != nil || !strings.Contains(out, `"imported_at"`) || !strings.Contains(out, `"status": "completed"`) {
		t.Fatalf("show after import: %v\n%s", err, out)
	}
	out, _, err = cli("task", "watch", "t1", "--follow=false", "-o", "json")
	if err != nil || !strings.Contains(out, "t1 done") {
		t.Fatalf("watch after import: %v\n%s", err, out)
	}
	if _, _, err = cli("task", "import", file); err == nil || !strings.Contains(err.Error(), "in Postgres already") {
		t.Errorf("a second import: %v", err)
	}
}

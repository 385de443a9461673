package api_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskview"
)

// openList opens a list's stream (Accept: text/event-stream) at path.
func openList(t *testing.T, base, path string) *stream {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &stream{resp: resp, r: bufio.NewReader(resp.Body)}
	t.Cleanup(s.close)
	return s
}

// snapshot reads the stream's next event named name.
func (s *stream) snapshot(t *testing.T, name string) []byte {
	t.Helper()
	for {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("reading the %s stream: %v", name, err)
		}
		if ev.event == name {
			return []byte(ev.data)
		}
	}
}

// The task list and the approvals, asked for as a stream, come now and again each time a task's
// row changes in Postgres (its recorded state, a request asked or decided), with nothing read on
// a timer by the client.
func TestListsStreamTheirChanges(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ts, _ := newServer(t, api.Config{DB: pool, Reader: taskview.New(pool), KeepAlive: time.Hour})
	ctx := t.Context()
	at := time.Now()
	rec := func(id string, st task.Status, seq int64) {
		b, _ := json.Marshal(task.State{Status: st, Title: "Title of " + id, Workspace: "/w"})
		if err := store.RecordTaskState(ctx, pool, id, st, b, at, seq); err != nil {
			t.Fatal(err)
		}
	}
	rec("t1", task.StatusRunning, 1)
	tasks := openList(t, ts.URL, "/api/v1/tasks?status=running")
	approvals := openList(t, ts.URL, "/api/v1/approvals")
	var list struct{ Tasks []api.Task }
	if err := json.Unmarshal(tasks.snapshot(t, "tasks"), &list); err != nil || len(list.Tasks) != 1 || list.Tasks[0].Title != "Title of t1" {
		t.Fatalf("first snapshot: %+v %v", list, err)
	}
	var asked struct{ Approvals []taskview.PendingRequest }
	if err := json.Unmarshal(approvals.snapshot(t, "approvals"), &asked); err != nil || len(asked.Approvals) != 0 {
		t.Fatalf("first approvals: %+v %v", asked, err)
	}

	rec("t2", task.StatusRunning, 1)
	if err := json.Unmarshal(tasks.snapshot(t, "tasks"), &list); err != nil || len(list.Tasks) != 2 {
		t.Fatalf("after t2 started: %+v %v", list, err)
	}
	rec("t1", task.StatusIdle, 2)
	if err := json.Unmarshal(tasks.snapshot(t, "tasks"), &list); err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != "t2" {
		t.Fatalf("after t1 went idle: %+v %v", list, err)
	}
	if _, _, err := store.AskPermission(ctx, pool, store.Ask{TaskID: "t2", RequestID: uuid.NewString(), Turn: 1, Attempt: 1,
		CLIRequestID: uuid.NewString(), Kind: "tool", ToolName: "Bash", Input: json.RawMessage(`{"command":"ls"}`),
		InputHash: uuid.NewString(), Summary: "ls", Deadline: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(approvals.snapshot(t, "approvals"), &asked); err != nil || len(asked.Approvals) != 1 ||
		asked.Approvals[0].TaskTitle != "Title of t2" {
		t.Fatalf("after a request: %+v %v", asked, err)
	}
}

// A page of the log read backwards: ?before=SEQ gives the last ?limit events before it, in
// order; a seq past the end gives the log's last page; with after it is refused.
func TestEventsBefore(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ts, _ := newServer(t, api.Config{DB: pool, Reader: taskview.New(pool)})
	appendEvents(t, pool, "long", 1, 30)
	for _, c := range []struct {
		query     string
		first, n  int64
		wantError bool
	}{
		{"?before=9007199254740991&limit=10", 21, 10, false},
		{"?before=21&limit=10", 11, 10, false},
		{"?before=5&limit=10", 1, 4, false},
		{"?before=1&limit=10", 0, 0, false},
		{"?before=0", 0, 0, true},
		{"?before=5&after=2", 0, 0, true},
	} {
		a := do(t, ts, "GET", "/api/v1/tasks/long/events"+c.query, "", "Accept", "application/json")
		if c.wantError {
			if a.status != 400 {
				t.Errorf("%s: %d, want 400", c.query, a.status)
			}
			continue
		}
		var page api.EventPage
		if err := json.Unmarshal(a.body, &page); err != nil || a.status != 200 {
			t.Fatalf("%s: %d %s", c.query, a.status, a.body)
		}
		if int64(len(page.Events)) != c.n || (c.n > 0 && (page.Events[0].Seq != c.first || page.Events[c.n-1].Seq != c.first+c.n-1)) {
			t.Errorf("%s: %d events from %v, want %d from %d", c.query, len(page.Events), page.Events, c.n, c.first)
		}
	}
}

// One task, asked for as a stream, comes now and again when its row changes; a task nobody
// knows is answered 404, with no stream.
func TestTaskStreamsItsChanges(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ts, _ := newServer(t, api.Config{DB: pool, Reader: taskview.New(pool), KeepAlive: time.Hour})
	rec := func(id string, st task.Status, seq int64) {
		b, _ := json.Marshal(task.State{Status: st, Workspace: "/w"})
		if err := store.RecordTaskState(t.Context(), pool, id, st, b, time.Now(), seq); err != nil {
			t.Fatal(err)
		}
	}
	rec("t1", task.StatusRunning, 1)
	if a := do(t, ts, "GET", "/api/v1/tasks/nobody", "", "Accept", "text/event-stream"); a.status != 404 {
		t.Errorf("an unknown task's stream: %d %s", a.status, a.header.Get("Content-Type"))
	}
	s := openList(t, ts.URL, "/api/v1/tasks/t1")
	var d api.TaskDetail
	if err := json.Unmarshal(s.snapshot(t, "task"), &d); err != nil || d.Status != task.StatusRunning {
		t.Fatalf("first: %+v %v", d.Summary, err)
	}
	rec("t2", task.StatusRunning, 1) // another task's change wakes nothing here
	rec("t1", task.StatusWaitingForLimit, 2)
	if err := json.Unmarshal(s.snapshot(t, "task"), &d); err != nil || d.Status != task.StatusWaitingForLimit {
		t.Fatalf("after its change: %+v %v", d.Summary, err)
	}
}

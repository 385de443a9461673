package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/taskview"
)

// TestListsPageByCursor: GET /api/v1/tasks and GET /api/v1/approvals answer a page at a time;
// following next reads every task and request once, in order; a wrong limit or cursor is a 400.
func TestListsPageByCursor(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	base := time.Now().Add(-time.Hour)
	for i := range 7 {
		id := fmt.Sprintf("api-page-%d", i)
		at := base.Add(time.Duration(i) * time.Minute)
		_, err := pool.Exec(t.Context(), `INSERT INTO task_turns (task_id, turn, prompt, started_at) VALUES ($1, 1, 'p', $2)`, id, at)
		if err != nil {
			t.Fatal(err)
		}
		_, err = pool.Exec(t.Context(), `INSERT INTO permission_requests (task_id, request_id, turn, attempt, cli_request_id, kind,
			tool_name, input, input_hash, deadline, created_at) VALUES ($1, 'r', 1, 1, 'c', 'tool', 'Bash', '{}', 'h', $2, $3)`,
			id, at.Add(2*time.Hour), at)
		if err != nil {
			t.Fatal(err)
		}
	}
	ts, _ := newServer(t, api.Config{DB: pool, Reader: taskview.New(pool)})
	var tasks, reqs []string
	for after, pages := "", 0; ; pages++ {
		a := do(t, ts, http.MethodGet, "/api/v1/tasks?limit=3&after="+url.QueryEscape(after), "")
		var p api.TaskPage
		if a.status != http.StatusOK || json.Unmarshal(a.body, &p) != nil || len(p.Tasks) > 3 || pages > 5 {
			t.Fatalf("page %d: %d %s", pages, a.status, a.body)
		}
		for _, s := range p.Tasks {
			tasks = append(tasks, s.ID)
		}
		if after = p.Next; after == "" {
			break
		}
	}
	for after, pages := "", 0; ; pages++ {
		a := do(t, ts, http.MethodGet, "/api/v1/approvals?limit=2&after="+url.QueryEscape(after), "")
		var p taskview.PendingPage
		if a.status != http.StatusOK || json.Unmarshal(a.body, &p) != nil || len(p.Requests) > 2 || pages > 5 {
			t.Fatalf("page %d of approvals: %d %s", pages, a.status, a.body)
		}
		for _, r := range p.Requests {
			reqs = append(reqs, r.TaskID)
		}
		if after = p.Next; after == "" {
			break
		}
	}
	if want := "[api-page-6 api-page-5 api-page-4 api-page-3 api-page-2 api-page-1 api-page-0]"; fmt.Sprint(tasks) != want {
		t.Errorf("tasks by pages of 3: %v, want %s", tasks, want)
	}
	if want := "[api-page-0 api-page-1 api-page-2 api-page-3 api-page-4 api-page-5 api-page-6]"; fmt.Sprint(reqs) != want {
		t.Errorf("approvals by pages of 2: %v, want %s", reqs, want)
	}
	for _, path := range []string{"/api/v1/tasks?limit=0", "/api/v1/tasks?limit=501", "/api/v1/tasks?after=nope",
		"/api/v1/approvals?limit=x", "/api/v1/approvals?after=nope"} {
		if a := do(t, ts, http.MethodGet, path, ""); a.status != http.StatusBadRequest || a.err.Code != "invalid_input" {
			t.Errorf("%s: %d %s, want 400 invalid_input", path, a.status, a.body)
		}
	}
}

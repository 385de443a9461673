package console_test

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/fakeapi"
)

// afterCalls lists the cursors the page sent to path, in order, from the fake API's ledger.
func afterCalls(api *fakeapi.Server, path string) []string {
	var out []string
	for _, c := range api.Calls() {
		if c.Method != "GET" || c.Path != path {
			continue
		}
		if q, err := url.ParseQuery(c.Query); err == nil && q.Get("after") != "" {
			out = append(out, q.Get("after"))
		}
	}
	return out
}

// TestListScrollsByCursor: with more tasks than a page holds, the list shows the first page and
// reads the next ones by their cursors as the person scrolls, until every task is shown once.
func TestListScrollsByCursor(t *testing.T) {
	t.Parallel()
	api, base := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	const n = 120
	for i := range n {
		at := now.Add(time.Duration(i-n) * time.Minute)
		api.PutTask(fakeapi.Task{ID: fmt.Sprintf("task-%03d", i), Status: "completed", CreatedAt: at, UpdatedAt: at})
	}
	p := page(t)
	navigate(t, p, base+"/#/")
	waitFor(t, p, `document.querySelectorAll("tr[data-task-id]").length == 50`)
	if got := eval[string](t, p, `document.querySelector("tr[data-task-id]").dataset.taskId`); got != "task-119" {
		t.Errorf("the list starts with %s, want the newest, task-119", got)
	}
	if eval[bool](t, p, `document.querySelector("button.more-pages").hidden`) {
		t.Fatal("a list with more tasks than a page offers no more")
	}
	for _, shown := range []int{100, n} {
		eval[bool](t, p, `(() => { document.querySelector("button.more-pages").scrollIntoView(); return true; })()`)
		waitFor(t, p, fmt.Sprintf(`document.querySelectorAll("tr[data-task-id]").length == %d`, shown))
	}
	waitFor(t, p, `document.querySelector("button.more-pages").hidden`)
	ids := eval[[]string](t, p, `[...document.querySelectorAll("tr[data-task-id]")].map(e => e.dataset.taskId)`)
	seen := map[string]bool{}
	for i, id := range ids {
		if want := fmt.Sprintf("task-%03d", n-1-i); id != want || seen[id] {
			t.Fatalf("row %d is %s, want %s once", i, id, want)
		}
		seen[id] = true
	}
	if got := afterCalls(api, "/api/v1/tasks"); len(got) == 0 || got[0] != "t:task-070" {
		t.Errorf("the page's cursors %v, want the first page's next (t:task-070) first", got)
	}
	screenshot(t, p, "list-scrolled")
}

// TestInboxScrollsByCursor: the inbox reads the requests past its first page by cursor.
func TestInboxScrollsByCursor(t *testing.T) {
	t.Parallel()
	api, base := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	const n = 60
	for i := range n {
		id := fmt.Sprintf("asks-%02d", i)
		api.PutTask(fakeapi.Task{ID: id, Status: "running", Mode: "supervised", CreatedAt: now, UpdatedAt: now, PendingApprovals: 1,
			WaitingSince: &now, Pending: []fakeapi.PendingRequest{{TaskID: id, RequestID: "r1", Kind: "tool", Tool: "Bash",
				Summary: "ls " + id, Since: now, Deadline: now.Add(time.Hour)}}})
	}
	p := page(t)
	navigate(t, p, base+"/#/inbox")
	waitFor(t, p, `document.querySelectorAll(".inbox-item").length == 50`)
	eval[bool](t, p, `(() => { document.querySelector("button.more-pages").scrollIntoView(); return true; })()`)
	waitFor(t, p, fmt.Sprintf(`document.querySelectorAll(".inbox-item").length == %d`, n))
	waitFor(t, p, `document.querySelector("button.more-pages").hidden`)
	if got := afterCalls(api, "/api/v1/approvals"); len(got) == 0 || got[0] != "r:asks-49/r1" {
		t.Errorf("the inbox's cursors %v, want the first page's next (r:asks-49/r1)", got)
	}
}

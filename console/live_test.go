package console_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/drover-run/drover/internal/browser"
	"github.com/drover-run/drover/internal/fakeapi"
)

// sentTo counts the requests the browser itself reports it sent to path (any query), from
// DevTools' network events: the witness that the page reads nothing on a timer.
func sentTo(p *browser.Page, path string) int {
	n := 0
	for _, r := range p.Requests() {
		_, url, _ := strings.Cut(r, " ")
		if i := strings.Index(url, "/api/"); i >= 0 {
			u, _, _ := strings.Cut(url[i:], "?")
			if u == path {
				n++
			}
		}
	}
	return n
}

// TestListsArePushed: the list, the board and the inbox show a task's changes as the API pushes
// them (a status, a new task, a request that comes and goes), with no reload, and the browser
// sends one request for each list however many changes come: no poll.
func TestListsArePushed(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	api.PutTask(fakeapi.Task{ID: "a", Title: "Build the release", Status: "running", CreatedAt: now, UpdatedAt: now})
	api.PutTask(fakeapi.Task{ID: "b", Status: "idle", CreatedAt: now, UpdatedAt: now})
	p := page(t)
	navigate(t, p, url+"/#/")
	waitFor(t, p, `document.querySelector('tr[data-task-id="a"][data-status="running"]')`)
	eval[bool](t, p, `(window.__sameDocument = true)`)
	for _, st := range []string{"idle", "running", "completed"} {
		api.UpdateTask("a", func(tk *fakeapi.Task) { tk.Status = st })
		waitFor(t, p, `document.querySelector('tr[data-task-id="a"][data-status="`+st+`"]')`)
	}
	api.PutTask(fakeapi.Task{ID: "c", Title: "A new one", Status: "running", CreatedAt: now, UpdatedAt: now})
	waitFor(t, p, `document.querySelector('tr[data-task-id="c"]')`)
	if !eval[bool](t, p, `window.__sameDocument === true`) {
		t.Fatal("the page was reloaded")
	}
	if n := sentTo(p, "/api/v1/tasks"); n != 1 {
		t.Errorf("the list sent %d requests for 4 changes, want 1 (the stream): %q", n, p.Requests())
	}

	navigate(t, p, url+"/#/board")
	waitFor(t, p, `document.querySelector('.board [data-column="done"] li[data-task-id="a"]')`)
	api.UpdateTask("a", func(tk *fakeapi.Task) { tk.Status = "failed" })
	waitFor(t, p, `document.querySelector('.board [data-column="broken"] li[data-task-id="a"]')`)

	navigate(t, p, url+"/#/inbox")
	waitFor(t, p, `document.getElementById("inbox-list")`)
	before := sentTo(p, "/api/v1/approvals")
	api.UpdateTask("b", func(tk *fakeapi.Task) {
		tk.Pending = []fakeapi.PendingRequest{{TaskID: "b", RequestID: "r1", Kind: "tool", Tool: "Bash", Summary: "make deploy",
			Since: now, Deadline: now.Add(time.Hour)}}
		tk.PendingApprovals = 1
	})
	waitFor(t, p, `document.querySelector('.inbox-item[data-request-id="r1"]')`)
	waitFor(t, p, `document.getElementById("inbox-count").textContent == "1"`)
	waitFor(t, p, `document.querySelector('#attention-list li[data-task-id="a"]')`)
	api.UpdateTask("b", func(tk *fakeapi.Task) { tk.Pending, tk.PendingApprovals = nil, 0 })
	waitFor(t, p, `!document.querySelector('.inbox-item[data-request-id="r1"]')`)
	waitFor(t, p, `document.getElementById("inbox-count").hidden`)
	if n := sentTo(p, "/api/v1/approvals") - before; n != 0 {
		t.Errorf("the inbox sent %d more requests for its changes, want none (one stream serves the page)", n)
	}
	if n := reads(api, "GET", "/api/v1/approvals"); n != 1 {
		t.Errorf("the API was asked for the approvals %d times, want 1 (one stream serves every view)", n)
	}

	// A task's page: its header follows the task's pushed row, a change with no event included.
	navigate(t, p, url+"/#/tasks/c")
	waitFor(t, p, `document.querySelector('.task-head .status[data-status="running"]') && document.body.dataset.timelineReady`)
	// The page reads the task once more when its stored events are in (the stream and that read):
	// the browser's report of both comes before the count is taken.
	for deadline := time.Now().Add(30 * time.Second); sentTo(p, "/api/v1/tasks/c") < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the task's page did not read the task: %q", p.Requests())
		}
	}
	before = sentTo(p, "/api/v1/tasks/c")
	for _, st := range []string{"waiting_for_limit", "idle"} {
		api.UpdateTask("c", func(tk *fakeapi.Task) { tk.Status = st })
		waitFor(t, p, `document.querySelector('.task-head .status[data-status="`+st+`"]')`)
	}
	if n := sentTo(p, "/api/v1/tasks/c") - before; n != 0 {
		t.Errorf("the task's page sent %d more requests for the task as it changed, want none (its stream brings them): %q", n, p.Requests())
	}
}

// TestTitles: a task is named by its title in the list, the board, its page and the inbox (its
// id beside it); the search finds it by its title; the form sends the title typed.
func TestTitles(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	api.PutTask(fakeapi.Task{ID: "t-1", Title: "Migrate the billing tables", Status: "running", CreatedAt: now, UpdatedAt: now,
		PendingApprovals: 1, Pending: []fakeapi.PendingRequest{{TaskID: "t-1", RequestID: "r1", Kind: "tool", Tool: "Bash",
			Summary: "psql", Since: now, Deadline: now.Add(time.Hour)}}})
	api.PutTask(fakeapi.Task{ID: "t-2", Title: "Write the <b>docs</b>", Status: "idle", CreatedAt: now, UpdatedAt: now})
	p := page(t)
	navigate(t, p, url+"/#/")
	waitFor(t, p, `document.querySelector('tr[data-task-id="t-2"] a.task-link')`)
	if got := eval[string](t, p, `document.querySelector('tr[data-task-id="t-2"] a.task-link').textContent`); got != "Write the <b>docs</b>" {
		t.Errorf("the list names t-2 %q", got)
	}
	if got := eval[string](t, p, `document.querySelector('tr[data-task-id="t-2"] .task-id').textContent`); got != "t-2" {
		t.Errorf("the list shows t-2's id as %q", got)
	}
	key(t, p, "/")
	if err := p.Do(chromedp.SendKeys(chromedp.CSS("input.search"), "billing")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `!document.querySelector('tr[data-task-id="t-2"]') && document.querySelector('tr[data-task-id="t-1"]')`)

	navigate(t, p, url+"/#/board")
	waitFor(t, p, `document.querySelector('.board li[data-task-id="t-1"] a.task-link')`)
	if got := eval[string](t, p, `document.querySelector('.board li[data-task-id="t-1"] a.task-link').textContent`); got != "Migrate the billing tables" {
		t.Errorf("the board names t-1 %q", got)
	}
	navigate(t, p, url+"/#/inbox")
	waitFor(t, p, `document.querySelector('.inbox-item[data-request-id="r1"] a.task-link')`)
	if got := eval[string](t, p, `document.querySelector('.inbox-item[data-request-id="r1"] a.task-link').textContent`); got != "Migrate the billing tables" {
		t.Errorf("the inbox names t-1 %q", got)
	}
	navigate(t, p, url+"/#/tasks/t-1")
	waitFor(t, p, `document.querySelector("h1").textContent == "Migrate the billing tables"`)
	if got := eval[string](t, p, `document.title`); !strings.Contains(got, "Migrate the billing tables") {
		t.Errorf("the tab's title is %q", got)
	}

	navigate(t, p, url+"/#/new")
	waitFor(t, p, `document.querySelector("form.new-task input[name=title]")`)
	if err := p.Do(
		chromedp.SendKeys(chromedp.CSS(`form.new-task textarea[name=prompt]`), "do it all\nand more"),
		chromedp.SendKeys(chromedp.CSS(`form.new-task input[name=title]`), "Quarterly report"),
		chromedp.SendKeys(chromedp.CSS(`form.new-task input[name=workspace]`), "/srv/q"),
		chromedp.Click(chromedp.CSS(`form.new-task button[type=submit]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.querySelector("h1") && document.querySelector("h1").textContent == "Quarterly report"`)
	var body struct {
		Title string `json:"title"`
	}
	for _, c := range api.Calls() {
		if c.Method == "POST" && c.Path == "/api/v1/tasks" {
			if err := json.Unmarshal(c.Body, &body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if body.Title != "Quarterly report" {
		t.Errorf("the form sent the title %q", body.Title)
	}
}

// TestTaskPageKeepsAPushedRowOverAnOlderRead: a read of the task that the API answered before a
// change, and that reaches the page after the stream pushed that change, does not take the
// page's header back: the pushed row stays.
func TestTaskPageKeepsAPushedRowOverAnOlderRead(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	api.PutTask(fakeapi.Task{ID: "c", Status: "running", CreatedAt: now, UpdatedAt: now})
	p := page(t)
	navigate(t, p, url+"/#/tasks/c")
	// The page reads the task once its stored events are in: that read is over.
	waitFor(t, p, `document.querySelector('.task-head .status[data-status="running"]') && document.body.dataset.timelineReady && document.body.dataset.taskReads`)

	// An event makes the page read the task; the API answers "running" and holds the answer.
	release := api.HoldReads()
	if _, err := api.Append("c", 1, 1, json.RawMessage(`{"type":"message_chunk","text":"working"}`)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); api.HeldReads() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			release()
			t.Fatalf("the page did not read the task after its event: %q", p.Requests())
		}
	}
	api.UpdateTask("c", func(tk *fakeapi.Task) { tk.Status = "waiting_for_limit" })
	waitFor(t, p, `document.querySelector('.task-head .status[data-status="waiting_for_limit"]')`)
	done := eval[string](t, p, `document.body.dataset.taskReads || "0"`)
	release()
	waitFor(t, p, `(document.body.dataset.taskReads || "0") !== "`+done+`"`)
	if got := eval[string](t, p, `document.querySelector('.task-head .status').dataset.status`); got != "waiting_for_limit" {
		t.Errorf("after the older read reached the page, its header shows %q, want the pushed waiting_for_limit", got)
	}
}

package console_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/drover-run/drover/internal/browser"
	"github.com/drover-run/drover/internal/fakeapi"
	"github.com/drover-run/drover/task"
)

// boardColumn is the board's column of each status, for a task with no request waiting.
var boardColumn = map[task.Status]string{
	"idle": "resting", "running": "working", "closing": "working",
	"queued_for_account": "limit", "waiting_for_limit": "limit", "waiting_for_spend_cap": "limit", "budget_exhausted": "limit",
	"needs_attention": "you", "completed": "done", "cancelled": "done", "failed": "broken",
}

// key presses each key of k in the page as one keyboard does: a keyDown that carries its text
// (so that a handler's preventDefault keeps the character out of the page), then a keyUp.
func key(t *testing.T, p *browser.Page, k string) {
	t.Helper()
	for _, r := range k {
		var down, up *input.DispatchKeyEventParams
		for _, ev := range kb.Encode(r) {
			switch ev.Type {
			case kb.KeyDown:
				down = ev
			case kb.KeyChar:
				down.Text, down.UnmodifiedText = ev.Text, ev.UnmodifiedText
			case kb.KeyUp:
				up = ev
			}
		}
		for _, ev := range []*input.DispatchKeyEventParams{down, up} {
			if _, err := chromedp.Call(p.Context(), input.DispatchKeyEvent, *ev); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestBoardGroupsTasks: every status of package task has its column on the board, a task with a
// request waiting is in "waiting for you", and j/k with Enter open a card's task.
func TestBoardGroupsTasks(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	for _, st := range task.Statuses() {
		if _, ok := boardColumn[st]; !ok {
			t.Fatalf("status %s has no column on the board", st)
		}
		api.PutTask(fakeapi.Task{ID: "s-" + string(st), Status: string(st), CreatedAt: now, UpdatedAt: now})
	}
	api.PutTask(fakeapi.Task{ID: "asks", Status: "running", CreatedAt: now, UpdatedAt: now, PendingApprovals: 1, WaitingSince: &now})
	p := page(t)
	navigate(t, p, url+"/#/board")
	waitFor(t, p, fmt.Sprintf(`document.querySelectorAll(".board li[data-task-id]").length == %d`, len(task.Statuses())+1))
	got := eval[map[string]string](t, p, `Object.fromEntries([...document.querySelectorAll(".board li[data-task-id]")].map(e => [e.dataset.taskId, e.closest("[data-column]").dataset.column]))`)
	for st, col := range boardColumn {
		if got["s-"+string(st)] != col {
			t.Errorf("a %s task is in column %q, want %q", st, got["s-"+string(st)], col)
		}
	}
	if got["asks"] != "you" {
		t.Errorf("a task with a request waiting is in column %q", got["asks"])
	}
	screenshot(t, p, "board")

	key(t, p, "j")
	key(t, p, "j")
	key(t, p, "k")
	key(t, p, "j")
	second := eval[string](t, p, `document.querySelectorAll(".board li[data-task-id]")[1].dataset.taskId`)
	if got := eval[string](t, p, `document.activeElement.closest("li").dataset.taskId`); got != second {
		t.Fatalf("after j j k j the focus is on %q, want the second card %q", got, second)
	}
	key(t, p, kb.Enter)
	waitFor(t, p, fmt.Sprintf(`location.hash == "#/tasks/%s"`, second))
}

// TestKeyboard: on the list, / goes to the search and j and Enter open a row; in the inbox, j
// chooses a request, a approves it, d asks for a reason and then denies with it. The fake API's
// ledger is the witness.
func TestKeyboard(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	for _, id := range []string{"alpha", "beta"} {
		api.PutTask(fakeapi.Task{ID: id, Status: "running", Mode: "supervised", CreatedAt: now, UpdatedAt: now, PendingApprovals: 1,
			Pending: []fakeapi.PendingRequest{{TaskID: id, RequestID: "r-" + id, Kind: "tool", Tool: "Bash", Summary: "make " + id,
				Since: now, Deadline: now.Add(time.Hour)}}})
	}
	p := page(t)
	navigate(t, p, url+"/#/")
	waitFor(t, p, `document.querySelectorAll("tr[data-task-id]").length == 2`)
	key(t, p, "/")
	if got := eval[string](t, p, `document.activeElement.className`); got != "search" {
		t.Fatalf("/ put the focus on %q", got)
	}
	key(t, p, "alp")
	waitFor(t, p, `document.querySelectorAll("tr[data-task-id]").length == 1`)
	key(t, p, kb.Escape)
	key(t, p, "j")
	key(t, p, kb.Enter)
	waitFor(t, p, `location.hash == "#/tasks/alpha"`)

	navigate(t, p, url+"/#/inbox")
	waitFor(t, p, `document.querySelectorAll(".inbox-item").length == 2`)
	first := eval[string](t, p, `document.querySelector(".inbox-item").dataset.taskId`)
	key(t, p, "j")
	key(t, p, "a")
	waitFor(t, p, `document.querySelectorAll(".inbox-item").length == 1`)
	other := eval[string](t, p, `document.querySelector(".inbox-item").dataset.taskId`)
	key(t, p, "j")
	key(t, p, "d")
	waitFor(t, p, `document.activeElement.classList.contains("reason")`)
	key(t, p, "not today")
	key(t, p, kb.Escape)
	key(t, p, "d")
	waitFor(t, p, `document.querySelectorAll(".inbox-item").length == 0`)
	sent := map[string]string{}
	for _, c := range api.Calls() {
		if c.Method == "POST" && strings.Contains(c.Path, "/approvals/") {
			sent[c.Path] += string(c.Body)
		}
	}
	want := map[string]string{
		"/api/v1/tasks/" + first + "/approvals/r-" + first: `{"decision":"allow"}`,
		"/api/v1/tasks/" + other + "/approvals/r-" + other: `{"decision":"deny","message":"not today"}`,
	}
	for path, body := range want {
		if sent[path] != body {
			t.Errorf("POST %s: sent %q, want %q (all: %v)", path, sent[path], body, sent)
		}
	}
}

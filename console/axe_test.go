package console_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/browser"
	"github.com/drover-run/drover/internal/fakeapi"
	"github.com/drover-run/drover/internal/testkit/testtools"
)

var (
	axeOnce sync.Once
	axeSrc  string
	axeErr  error
)

// axeViolation is one rule axe-core found broken, with the elements that break it.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target  []any  `json:"target"`
		Summary string `json:"failureSummary"`
	} `json:"nodes"`
}

// checkAccessible runs axe-core inside the page (through the DevTools protocol, which the page's
// Content-Security-Policy does not govern) and fails on every serious or critical violation.
func checkAccessible(t *testing.T, p *browser.Page, what string) {
	t.Helper()
	axeOnce.Do(func() {
		path, err := testtools.AxeJS()
		if err != nil {
			axeErr = err
			return
		}
		b, err := os.ReadFile(path)
		axeSrc, axeErr = string(b), err
	})
	if axeErr != nil {
		t.Fatalf("axe-core: %v", axeErr)
	}
	if !eval[bool](t, p, `typeof window.axe === "object"`) {
		eval[any](t, p, axeSrc+"\n;null")
	}
	// Open every fold first, so that what is folded is checked too.
	eval[bool](t, p, `(document.querySelectorAll("main details").forEach(d => d.open = true), true)`)
	vs := eval[[]axeViolation](t, p, `new Promise(r => setTimeout(r, 50)).then(() => axe.run(document, { resultTypes: ["violations"] })).then(res => res.violations)`)
	var bad []string
	for _, v := range vs {
		if v.Impact != "serious" && v.Impact != "critical" {
			continue
		}
		var where []string
		for _, n := range v.Nodes {
			where = append(where, fmt.Sprint(n.Target))
		}
		bad = append(bad, fmt.Sprintf("%s (%s): %s at %s", v.ID, v.Impact, v.Help, strings.Join(where, ", ")))
	}
	if len(bad) > 0 {
		t.Errorf("%s: axe-core finds %d serious or critical violations:\n%s", what, len(bad), strings.Join(bad, "\n"))
	}
}

// TestAccessible: the list, the board, a task's page, the inbox and the new task's form have no
// serious or critical axe-core violation.
func TestAccessible(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	n := recordedTask(t, api, "a11y")
	now := time.Now().UTC()
	api.PutTask(fakeapi.Task{ID: "broken", Status: "failed", Mode: "autonomous", LastError: "the CLI exited 1", CreatedAt: now, UpdatedAt: now})
	api.PutTask(fakeapi.Task{ID: "asks", Status: "running", Mode: "supervised", CreatedAt: now, UpdatedAt: now, PendingApprovals: 1,
		Pending: []fakeapi.PendingRequest{{TaskID: "asks", RequestID: "r1", Kind: "tool", Tool: "Bash", Summary: "make", Since: now,
			Deadline: now.Add(time.Hour)}}})
	p := page(t)
	for _, c := range []struct{ view, ready string }{
		{"#/", `document.querySelector("tr[data-task-id]")`},
		{"#/board", `document.querySelector(".board li[data-task-id]")`},
		{"#/tasks/a11y", fmt.Sprintf(`document.body.dataset.lastSeq == "%d" && document.querySelector(".request button.always")`, n)},
		{"#/inbox", `document.querySelector(".inbox-item")`},
		{"#/new", `document.querySelector("form.new-task")`},
	} {
		navigate(t, p, url+"/"+c.view)
		waitFor(t, p, c.ready)
		checkAccessible(t, p, c.view)
	}

	// Tab alone reaches the inbox's Approve.
	navigate(t, p, url+"/#/inbox")
	waitFor(t, p, `document.querySelector(".inbox-item button.approve")`)
	for i := 0; !eval[bool](t, p, `document.activeElement.matches(".inbox-item button.approve")`); i++ {
		if i == 40 {
			t.Fatal("40 presses of Tab do not reach the inbox's Approve")
		}
		key(t, p, "\t")
	}
}

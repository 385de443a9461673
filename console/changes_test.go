package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/console"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/fakeapi"
	"github.com/drover-run/drover/internal/testkit/gittest"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskview"
	"github.com/drover-run/drover/workspace"
)

// gitOut runs git as a person would: the witness of what the page must show.
func gitOut(t *testing.T, dir string, args ...string) string {
	return gittest.Run(t, dir, append([]string{"-c", "core.quotepath=false"}, args...)...)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// managedTask runs the workspace side of a managed task of two turns, as a worker host does,
// and returns the remote it pushed its checkpoints to. Turn 1 adds a long file, a binary one and
// a file whose text is markup; turn 2 edits two files.
func managedTask(t *testing.T, id string) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "origin")
	gitOut(t, t.TempDir(), "init", "-q", "-b", "main", repo)
	writeFile(t, filepath.Join(repo, "README.md"), "# app\n\nhello\n")
	writeFile(t, filepath.Join(repo, "src", "main.go"), "package main\n\nfunc main() {}\n")
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "base")
	remote := filepath.Join(t.TempDir(), "remote.git")
	gitOut(t, t.TempDir(), "init", "-q", "--bare", remote)
	base := t.TempDir()
	ctx := context.Background()
	m, err := workspace.New(ctx, workspace.Config{Root: filepath.Join(base, "work"), StateDir: filepath.Join(base, "state"), Remote: remote})
	if err != nil {
		t.Fatal(err)
	}
	wt := workspace.Task{ID: id, Repo: repo}
	if _, err := m.Prepare(ctx, wt, ""); err != nil {
		t.Fatal(err)
	}
	dir := m.Dir(id)
	var long strings.Builder
	for i := range 6000 {
		fmt.Fprintf(&long, "line %d of a long generated file\n", i)
	}
	writeFile(t, filepath.Join(dir, "gen", "long.txt"), long.String())
	writeFile(t, filepath.Join(dir, "logo.png"), "\x89PNG\r\n\x1a\n\x00\x00")
	writeFile(t, filepath.Join(dir, "evil.html"), "<img src=x onerror=\"document.body.dataset.pwned=1\">\n")
	if _, err := m.Checkpoint(ctx, wt, 1, "turn 1"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "README.md"), "# app\n\nhello, world\n")
	writeFile(t, filepath.Join(dir, "src", "main.go"), "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hi\") }\n")
	if _, err := m.Checkpoint(ctx, wt, 2, "turn 2"); err != nil {
		t.Fatal(err)
	}
	return remote
}

// oneTask is the read side of the test's API: one managed task.
type oneTask struct{ id string }

func (o oneTask) ListPage(context.Context, taskview.Filter) (taskview.Page, error) {
	return taskview.Page{Tasks: []taskview.Summary{{ID: o.id, Status: task.StatusIdle}}}, nil
}

func (o oneTask) PendingPage(context.Context, string, int) (taskview.PendingPage, error) {
	return taskview.PendingPage{Requests: []taskview.PendingRequest{}}, nil
}

func (o oneTask) Show(_ context.Context, id string) (taskview.Detail, error) {
	if id != o.id {
		return taskview.Detail{}, &taskview.NotFoundError{TaskID: id}
	}
	return taskview.Detail{Summary: taskview.Summary{ID: id, Status: task.StatusIdle}}, nil
}

func (o oneTask) Pending(context.Context, string, int) ([]taskview.PendingRequest, error) {
	return nil, nil
}

// noWrites is the write side of the test's API: the Changes page sends nothing.
type noWrites struct{ api.Tasks }

func (noWrites) Decide(context.Context, string, task.Decision, time.Duration) (task.DecisionRecord, bool, error) {
	return task.DecisionRecord{}, false, fmt.Errorf("not in this test")
}

// realAPI serves the real HTTP API, reading checkpoints from remote, with the console at "/".
func realAPI(t *testing.T, id, remote string) string {
	t.Helper()
	base := t.TempDir()
	m, err := workspace.New(context.Background(), workspace.Config{Root: filepath.Join(base, "work"), StateDir: filepath.Join(base, "state"), Remote: remote})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Config{Tasks: noWrites{}, Reader: oneTask{id}, Decider: noWrites{}, DB: pgtest.NewPool(t),
		Workspaces: m, Console: console.Handler()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// patchText is the text of the page's patch, line by line as git prints it.
const patchText = `[...document.querySelectorAll(".patch .dl")].map(e => e.textContent).join("")`

// fileRows are the page's files as git diff --numstat prints them.
const fileRows = `[...document.querySelectorAll(".diff-files tr[data-path]")].map(r => r.dataset.binary === "true" ?
  "-\t-\t" + r.dataset.path : r.querySelector(".added").textContent.slice(1) + "\t" + r.querySelector(".deleted").textContent.slice(1) + "\t" + r.dataset.path).join("\n") + "\n"`

// The Changes view in Chromium shows a turn's files and coloured patch exactly as git diff
// prints them between the turn's checkpoints, the whole task's in pages that add up to git's
// patch, binary files named, the agent's markup as text; and axe-core finds nothing serious.
func TestChangesViewShowsWhatGitShows(t *testing.T) {
	t.Parallel()
	const id = "managed"
	remote := managedTask(t, id)
	url := realAPI(t, id, remote)
	ref := func(n string) string { return "refs/drover/tasks/" + id + "/" + n }
	p := page(t)

	// Turn 2 alone.
	navigate(t, p, url+"/#/tasks/"+id+"/changes/2")
	waitFor(t, p, `document.querySelector(".diff-files tr[data-path]") && document.querySelector(".patch .dl")`)
	if got, want := eval[string](t, p, patchText), gitOut(t, remote, "diff", ref("turns/1"), ref("turns/2")); got != want {
		t.Errorf("turn 2's patch in the page:\n%s\ngit diff:\n%s", got, want)
	}
	if got, want := eval[string](t, p, fileRows), gitOut(t, remote, "diff", "--numstat", ref("turns/1"), ref("turns/2")); got != want {
		t.Errorf("turn 2's files in the page:\n%s\ngit diff --numstat:\n%s", got, want)
	}
	if n := eval[int](t, p, `document.querySelectorAll(".patch .dl.add").length`); n != 4 {
		t.Errorf("%d added lines coloured, want 4", n)
	}
	if got := eval[string](t, p, `document.querySelector(".turn-link.active").dataset.turn`); got != "2" {
		t.Errorf("the turn picked is %q", got)
	}
	checkAccessible(t, p, "changes of turn 2")

	// The whole task, by the turn picker: a patch over one page comes in pages.
	if err := p.Do(chromedp.Click(chromedp.CSS(`.turn-link[data-turn="0"]`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.querySelector('.diff-files tr[data-path="logo.png"]') && !document.querySelector(".turn-link.active[data-turn='2']")`)
	if got, want := eval[string](t, p, fileRows), gitOut(t, remote, "diff", "--numstat", ref("base"), ref("turns/2")); got != want {
		t.Errorf("the task's files in the page:\n%s\ngit diff --numstat:\n%s", got, want)
	}
	want := gitOut(t, remote, "diff", ref("base"), ref("turns/2"))
	if first := eval[string](t, p, patchText); len(first) >= len(want) || !strings.HasPrefix(want, first) {
		t.Fatalf("the first page holds %d of the patch's %d bytes", len(first), len(want))
	}
	for pages := 1; eval[bool](t, p, `!document.querySelector("button.more").hidden`); pages++ {
		if pages > 10 {
			t.Fatal("more than 10 pages")
		}
		before := eval[int](t, p, `document.querySelectorAll(".patch .dl").length`)
		if err := p.Do(chromedp.Click(chromedp.CSS("button.more"))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, p, `document.querySelectorAll(".patch .dl").length > `+strconv.Itoa(before))
	}
	if got := eval[string](t, p, patchText); got != want {
		t.Errorf("the pages add up to %d bytes, git's patch is %d", len(got), len(want))
	}
	if !strings.Contains(eval[string](t, p, patchText), "Binary files /dev/null and b/logo.png differ") ||
		eval[string](t, p, `document.querySelector('tr[data-path="logo.png"] .binary').textContent`) != "binary" {
		t.Error("the binary file is not named")
	}
	if eval[bool](t, p, `!!document.querySelector(".patch img") || document.body.dataset.pwned === "1"`) {
		t.Error("the agent's markup became an element")
	}

	// One file alone.
	if err := p.Do(chromedp.Click(chromedp.CSS(`tr[data-path="README.md"] button.file-pick`))); err != nil {
		t.Fatal(err)
	}
	want = gitOut(t, remote, "diff", ref("base"), ref("turns/2"), "--", "README.md")
	waitFor(t, p, patchText+" === "+strconv.Quote(want))
	checkAccessible(t, p, "changes of the whole task")
	screenshot(t, p, "changes")
}

// A task with no managed workspace says so on its Changes page.
func TestChangesViewOfAnUnmanagedTask(t *testing.T) {
	t.Parallel()
	remote := filepath.Join(t.TempDir(), "remote.git")
	gitOut(t, t.TempDir(), "init", "-q", "--bare", remote)
	url := realAPI(t, "plain", remote)
	p := page(t)
	navigate(t, p, url+"/#/tasks/plain/changes")
	waitFor(t, p, `document.querySelector(".alert")`)
	if got := eval[string](t, p, `document.querySelector(".alert").textContent`); !strings.Contains(got, "no managed workspace") {
		t.Errorf("the page says %q", got)
	}
}

// A managed task's finished turns each offer their changes, "Rewind to here" and "Fork from
// here": the rewind, once confirmed, sends the rewind of its turn (the fake API's ledger) and says
// the answer; the fork sends the fork of its turn with the id typed and opens the new task; an
// unmanaged task's turns offer none of them.
func TestTurnsOfferRewind(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	prompt := func(s string) json.RawMessage {
		return mustJSON(t, events.AgentEvent{Type: events.TypeUserMessage, Text: s})
	}
	done := mustJSON(t, events.AgentEvent{Type: events.TypeComplete})
	var last int64
	for _, id := range []string{"managed", "plain"} {
		task := fakeapi.Task{ID: id, Status: "idle", CreatedAt: now, UpdatedAt: now, Turns: 3}
		if id == "managed" {
			task.Repo = "/srv/repos/app"
		} else {
			task.Workspace = "/srv/work"
		}
		api.PutTask(task)
		for turn := 1; turn <= 3; turn++ {
			n, err := api.Append(id, turn, 1, prompt(fmt.Sprintf("prompt %d", turn)), done)
			if err != nil {
				t.Fatal(err)
			}
			last = n
		}
	}
	p := page(t)
	navigate(t, p, url+"/#/tasks/plain")
	waitFor(t, p, fmt.Sprintf(`document.body.dataset.lastSeq == "%d" && document.querySelector("[data-status]")`, last))
	if n := eval[int](t, p, `[...document.querySelectorAll(".turn-actions")].filter(e => e.offsetParent !== null).length`); n != 0 {
		t.Errorf("an unmanaged task's page shows %d turn actions", n)
	}
	navigate(t, p, url+"/#/tasks/managed")
	waitFor(t, p, `document.querySelectorAll(".turn-actions").length === 3 && document.querySelector("#timeline.managed") && document.querySelector(".changes-link:not([hidden])")`)
	if got := eval[string](t, p, `document.querySelector('[data-turn-actions="2"] a.changes-of-turn').getAttribute("href")`); got != "#/tasks/managed/changes/2" {
		t.Errorf("turn 2's changes link to %q", got)
	}
	eval[any](t, p, `(() => { window.confirm = () => true; for (const d of document.querySelectorAll("#timeline details")) d.open = true; return null; })()`)
	checkAccessible(t, p, "a managed task's turns")
	if err := p.Do(chromedp.Click(chromedp.CSS(`[data-turn-actions="1"] button.rewind`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.querySelector('[data-turn-actions="1"] .turn-said').textContent.includes("Back at the end of turn 1; turns 2, 3 kept aside")`)
	eval[any](t, p, `(() => { window.prompt = () => "managed-b"; return null; })()`)
	if err := p.Do(chromedp.Click(chromedp.CSS(`[data-turn-actions="2"] button.fork`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `location.hash === "#/tasks/managed-b" && document.querySelector("h1").textContent === "managed-b"`)
	var sent []string
	for _, c := range api.Calls() {
		if c.Method == "POST" {
			sent = append(sent, c.Path+" "+string(c.Body))
		}
	}
	want := []string{`/api/v1/tasks/managed/rewind {"turn":1}`, `/api/v1/tasks/managed/fork {"turn":2,"id":"managed-b"}`}
	if strings.Join(sent, "|") != strings.Join(want, "|") {
		t.Errorf("the page sent %q, want %q", sent, want)
	}
}

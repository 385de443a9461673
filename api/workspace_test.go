package api_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/internal/testkit/gittest"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/workspace"
)

// git runs git as a person would and returns its output: the witness of these tests.
func git(t *testing.T, dir string, args ...string) string { return gittest.Run(t, dir, args...) }

// readerOf is a workspace manager of its own folders reading remote (empty: its own default).
func readerOf(t *testing.T, remote string) *workspace.Manager {
	t.Helper()
	base := t.TempDir()
	m, err := workspace.New(context.Background(), workspace.Config{Root: filepath.Join(base, "work"),
		StateDir: filepath.Join(base, "state"), Remote: remote})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ranTask makes a managed task "known" of two checkpointed turns on a host of its own and
// returns the remote it pushed to. Turn 1 adds a binary file and a long file; turn 2 edits
// a line that holds markup.
func ranTask(t *testing.T) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "origin")
	git(t, t.TempDir(), "init", "-q", "-b", "main", repo)
	writeFile(t, filepath.Join(repo, "a.txt"), "one\n")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-q", "-m", "base")
	remote := filepath.Join(t.TempDir(), "remote.git")
	git(t, t.TempDir(), "init", "-q", "--bare", remote)
	host := readerOf(t, remote)
	ctx := context.Background()
	task := workspace.Task{ID: "known", Repo: repo}
	if _, err := host.Prepare(ctx, task, ""); err != nil {
		t.Fatal(err)
	}
	dir := host.Dir(task.ID)
	writeFile(t, filepath.Join(dir, "logo.png"), "\x89PNG\x00\x01")
	var long strings.Builder
	for i := range 4000 {
		long.WriteString(strings.Repeat("line ", 5) + string(rune('a'+i%26)) + "\n")
	}
	writeFile(t, filepath.Join(dir, "long.txt"), long.String())
	if _, err := host.Checkpoint(ctx, task, 1, "turn 1"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "a.txt"), "one\n<script>alert(1)</script>\n")
	if _, err := host.Checkpoint(ctx, task, 2, "turn 2"); err != nil {
		t.Fatal(err)
	}
	return remote
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func diffOf(t *testing.T, a answer) api.TaskDiff {
	t.Helper()
	if a.status != 200 {
		t.Fatalf("diff: %d %s %s", a.status, a.err.Code, a.err.Message)
	}
	var d api.TaskDiff
	if err := json.Unmarshal(a.body, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// The diff route shows what git shows between the task's checkpoints on the remote: the whole
// task, one turn, one file, and a large patch in pages that add up to it.
func TestDiffRouteShowsWhatGitShows(t *testing.T) {
	t.Parallel()
	remote := ranTask(t)
	ts, _ := newServer(t, api.Config{Workspaces: readerOf(t, remote)})
	ref := func(n string) string { return "refs/drover/tasks/known/" + n }

	whole := diffOf(t, do(t, ts, "GET", "/api/v1/tasks/known/diff?limit=4194304", ""))
	if want := git(t, remote, "diff", ref("base"), ref("last")); whole.Patch != want || whole.NextOffset != 0 {
		t.Errorf("whole task's patch differs from git diff (next %d)", whole.NextOffset)
	}
	wantFiles := []api.FileChange{{Path: "a.txt", Added: 1}, {Path: "logo.png", Binary: true}, {Path: "long.txt", Added: 4000}}
	if !equalFiles(whole.Files, wantFiles) || whole.FromTurn != 0 || whole.ToTurn != 2 || len(whole.Turns) != 2 {
		t.Errorf("whole task: files %+v, turns %d..%d of %v", whole.Files, whole.FromTurn, whole.ToTurn, whole.Turns)
	}
	if !strings.Contains(whole.Patch, "Binary files /dev/null and b/logo.png differ") {
		t.Error("the binary file is not named")
	}

	two := diffOf(t, do(t, ts, "GET", "/api/v1/tasks/known/diff?turn=2", ""))
	if want := git(t, remote, "diff", ref("turns/1"), ref("turns/2")); two.Patch != want || two.FromTurn != 1 {
		t.Errorf("turn 2's patch:\n%s\nwant:\n%s", two.Patch, want)
	}
	if !equalFiles(two.Files, []api.FileChange{{Path: "a.txt", Added: 1}}) {
		t.Errorf("turn 2's files: %+v", two.Files)
	}
	stat := diffOf(t, do(t, ts, "GET", "/api/v1/tasks/known/diff?turn=1&stat=1", ""))
	if stat.Patch != "" || len(stat.Files) != 2 {
		t.Errorf("stat: %d files, patch %q", len(stat.Files), stat.Patch)
	}

	// Pages of 10 kB add up to git's patch of turn 1, each ending at a line's end.
	want := git(t, remote, "diff", ref("base"), ref("turns/1"))
	var got strings.Builder
	pages, offset := 0, 0
	for {
		p := diffOf(t, do(t, ts, "GET", "/api/v1/tasks/known/diff?turn=1&limit=10000&offset="+itoa(offset), ""))
		if len(p.Patch) > 10000 || (p.NextOffset != 0 && !strings.HasSuffix(p.Patch, "\n")) || p.PatchBytes != len(want) {
			t.Fatalf("page at %d: %d bytes, next %d, of %d", offset, len(p.Patch), p.NextOffset, p.PatchBytes)
		}
		got.WriteString(p.Patch)
		pages++
		if p.NextOffset == 0 {
			break
		}
		offset = p.NextOffset
	}
	if got.String() != want || pages < 3 {
		t.Errorf("%d pages add up to %d bytes, git's patch is %d", pages, got.Len(), len(want))
	}
	one := diffOf(t, do(t, ts, "GET", "/api/v1/tasks/known/diff?file="+url.QueryEscape("a.txt"), ""))
	if want := git(t, remote, "diff", ref("base"), ref("last"), "--", "a.txt"); one.Patch != want || one.File != "a.txt" {
		t.Errorf("a.txt's patch:\n%s\nwant:\n%s", one.Patch, want)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func equalFiles(a, b []api.FileChange) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A task with no managed workspace, an unknown task, a turn with no checkpoint and bad input
// are each a clear error.
func TestDiffRouteErrors(t *testing.T) {
	t.Parallel()
	remote := ranTask(t)
	ts, _ := newServer(t, api.Config{Workspaces: readerOf(t, remote)})
	unmanaged, _ := newServer(t, api.Config{})
	for _, c := range []struct {
		ts         *httptest.Server
		path, code string
		status     int
	}{
		{unmanaged, "/api/v1/tasks/known/diff", "not_managed", 409},
		{ts, "/api/v1/tasks/nobody/diff", "not_found", 404},
		{ts, "/api/v1/tasks/known/diff?turn=3", "no_checkpoint", 404},
		{ts, "/api/v1/tasks/known/diff?turn=0", "invalid_input", 400},
		{ts, "/api/v1/tasks/known/diff?stat=maybe", "invalid_input", 400},
		{ts, "/api/v1/tasks/known/diff?offset=-1", "invalid_input", 400},
	} {
		a := do(t, c.ts, "GET", c.path, "")
		if a.status != c.status || a.err.Code != c.code {
			t.Errorf("%s: %d %s (%s), want %d %s", c.path, a.status, a.err.Code, a.err.Message, c.status, c.code)
		}
	}
}

// Publish pushes the newest checkpoint to a branch of the user's, and refuses to replace
// commits of a branch it did not write unless forced.
func TestPublishRoute(t *testing.T) {
	t.Parallel()
	remote := ranTask(t)
	ts, _ := newServer(t, api.Config{Workspaces: readerOf(t, remote)})
	user := filepath.Join(t.TempDir(), "user.git")
	git(t, t.TempDir(), "init", "-q", "--bare", user)
	body := `{"remote":"` + user + `","branch":"review/known"}`
	a := do(t, ts, "POST", "/api/v1/tasks/known/publish", body, "Content-Type", "application/json")
	var p api.Published
	if err := json.Unmarshal(a.body, &p); a.status != 200 || err != nil {
		t.Fatalf("publish: %d %s %s", a.status, a.err.Code, a.err.Message)
	}
	last := strings.TrimSpace(git(t, remote, "rev-parse", "refs/drover/tasks/known/last"))
	if got := strings.TrimSpace(git(t, user, "rev-parse", "review/known")); got != last || p.Commit != last || p.Turn != 2 {
		t.Errorf("review/known at %s (answered %+v), want the newest checkpoint %s", got, p, last)
	}
	// Someone else's branch: refused and left alone.
	other := strings.TrimSpace(git(t, user, "commit-tree", "-m", "theirs", strings.TrimSpace(git(t, user, "rev-parse", "review/known^{tree}"))))
	git(t, user, "update-ref", "refs/heads/theirs", other)
	a = do(t, ts, "POST", "/api/v1/tasks/known/publish", `{"remote":"`+user+`","branch":"theirs"}`, "Content-Type", "application/json")
	if a.status != 409 || a.err.Code != "branch_not_ours" {
		t.Errorf("publish over their branch: %d %s", a.status, a.err.Code)
	}
	if got := strings.TrimSpace(git(t, user, "rev-parse", "theirs")); got != other {
		t.Errorf("their branch moved to %s", got)
	}
	a = do(t, ts, "POST", "/api/v1/tasks/known/publish", `{"remote":"`+user+`","branch":"theirs","force":true}`, "Content-Type", "application/json")
	if a.status != 200 || strings.TrimSpace(git(t, user, "rev-parse", "theirs")) != last {
		t.Errorf("forced publish: %d %s", a.status, a.err.Code)
	}
}

// Rewind and fork take a turn (and for a fork, an id and a prompt), check them, and send them
// to the task; a missing turn is refused with nothing sent.
func TestRewindAndForkRoutes(t *testing.T) {
	t.Parallel()
	ts, rec := newServer(t, api.Config{})
	json := []string{"Content-Type", "application/json"}
	if a := do(t, ts, "POST", "/api/v1/tasks/known/rewind", `{}`, json...); a.status != 400 || a.err.Code != "invalid_input" {
		t.Errorf("rewind with no turn: %d %s", a.status, a.err.Code)
	}
	if a := do(t, ts, "POST", "/api/v1/tasks/known/fork", `{"turn":-1}`, json...); a.status != 400 {
		t.Errorf("fork at turn -1: %d %s", a.status, a.err.Code)
	}
	if a := do(t, ts, "POST", "/api/v1/tasks/known/rewind", `{"turn":0}`, json...); a.status != 200 {
		t.Errorf("rewind to 0: %d %s %s", a.status, a.err.Code, a.err.Message)
	}
	a := do(t, ts, "POST", "/api/v1/tasks/known/fork", `{"turn":1,"id":"other","prompt":"go on"}`, json...)
	if a.status != 201 || !strings.Contains(string(a.body), `"task_id":"other"`) || !strings.Contains(string(a.body), `"forked_from":"known"`) {
		t.Errorf("fork: %d %s", a.status, a.body)
	}
	if got := strings.Join(rec.sent(), "|"); got != `rewind known 0|fork known other 1 "go on"` {
		t.Errorf("sent: %s", got)
	}
}

// A checkpoint pushed by an attempt that died before Postgres committed its turn is not shown:
// the diff ends at the newest committed one.
func TestDiffShowsCommittedCheckpointsOnly(t *testing.T) {
	t.Parallel()
	remote := ranTask(t)
	db := pgtest.NewPool(t)
	ctx := context.Background()
	_, err := store.BeginAttempt(ctx, db, store.AttemptStart{TaskID: "known", AttemptID: "a1", Turn: 1, Prompt: "p",
		PromptUUID: "00000000-0000-4000-8000-000000000001", LostTurnError: "lost"})
	if err != nil {
		t.Fatal(err)
	}
	c1 := strings.TrimSpace(git(t, remote, "rev-parse", "refs/drover/tasks/known/turns/1"))
	if _, err := store.CommitTurn(ctx, db, store.TurnCommit{TaskID: "known", Turn: 1, AttemptID: "a1", SessionID: "s",
		LastMessageUUID: "u1", Status: task.TurnCompleted, Checkpoint: c1}); err != nil {
		t.Fatal(err)
	}
	ts, _ := newServer(t, api.Config{Workspaces: readerOf(t, remote), DB: db})
	d := diffOf(t, do(t, ts, "GET", "/api/v1/tasks/known/diff?stat=1", ""))
	if len(d.Turns) != 1 || d.ToTurn != 1 || d.To != c1 {
		t.Errorf("turns %v, to turn %d (%s); want turn 1 alone (%s)", d.Turns, d.ToTurn, d.To, c1)
	}
	if a := do(t, ts, "GET", "/api/v1/tasks/known/diff?turn=2", ""); a.status != 404 || a.err.Code != "no_checkpoint" {
		t.Errorf("turn 2, not committed: %d %s", a.status, a.err.Code)
	}
}

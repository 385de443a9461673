package workspace

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/testkit/gittest"
)

// witness runs git outside the package, as a person would, and returns its output.
func witness(t *testing.T, dir string, args ...string) string { return gittest.Run(t, dir, args...) }

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// origin makes a repository with a main branch of a few files and a .gitignore that leaves .env
// and build/ out.
func origin(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "origin")
	witness(t, t.TempDir(), "init", "-q", "-b", "main", dir)
	write(t, filepath.Join(dir, "README.md"), "hello\n")
	write(t, filepath.Join(dir, "src", "main.go"), "package main\n")
	write(t, filepath.Join(dir, "shared.txt"), "base\n")
	write(t, filepath.Join(dir, ".gitignore"), ".env\nbuild/\n")
	witness(t, dir, "add", "-A")
	witness(t, dir, "commit", "-q", "-m", "base")
	return dir
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// host makes a Manager with its own root and state folder, pushing to remote (empty: the
// default remote under its state folder).
func host(t *testing.T, remote string, edit ...func(*Config)) *Manager {
	t.Helper()
	base := t.TempDir()
	cfg := Config{
		Root:     filepath.Join(base, "work"),
		StateDir: filepath.Join(base, "state"),
		Remote:   remote,
		Logger:   slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, e := range edit {
		e(&cfg)
	}
	m, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func bareRemote(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "remote.git")
	witness(t, t.TempDir(), "init", "-q", "--bare", dir)
	return dir
}

// treeFiles lists the files of a ref in a repository.
func treeFiles(t *testing.T, repo, ref string) []string {
	t.Helper()
	out := witness(t, repo, "-c", "core.quotepath=false", "ls-tree", "-r", "--name-only", ref)
	return strings.Split(strings.TrimSpace(out), "\n")
}

func prepare(t *testing.T, m *Manager, task Task, base string) string {
	t.Helper()
	commit, err := m.Prepare(context.Background(), task, base)
	if err != nil {
		t.Fatal(err)
	}
	return commit
}

// oneTask prepares task t1 of a fresh origin on a fresh host without a remote, from main, and
// returns its worktree and the commit it started from.
func oneTask(t *testing.T) (m *Manager, task Task, dir, base string) {
	t.Helper()
	m = host(t, "")
	task = Task{ID: "t1", Repo: origin(t)}
	base = prepare(t, m, task, "main")
	return m, task, m.Dir(task.ID), base
}

func checkpoint(t *testing.T, m *Manager, task Task, turn int) string {
	t.Helper()
	c, err := m.Checkpoint(context.Background(), task, turn, "turn")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPrepareMakesWorktreeOnItsOwnBranch(t *testing.T) {
	m, task, dir, base := oneTask(t)
	repo := task.Repo
	if got := strings.TrimSpace(witness(t, dir, "rev-parse", "--abbrev-ref", "HEAD")); got != "drover/t1" {
		t.Errorf("branch = %q, want drover/t1", got)
	}
	if want := strings.TrimSpace(witness(t, repo, "rev-parse", "main")); base != want {
		t.Errorf("base = %s, want origin's main %s", base, want)
	}
	if got := read(t, filepath.Join(dir, "shared.txt")); got != "base\n" {
		t.Errorf("shared.txt = %q", got)
	}
	if got := strings.TrimSpace(witness(t, m.cfg.Remote, "rev-parse", "refs/drover/tasks/t1/base")); got != base {
		t.Errorf("remote's base ref = %s, want %s", got, base)
	}
	if got := strings.TrimSpace(witness(t, repo, "branch", "--list")); got != "* main" {
		t.Errorf("origin's branches changed: %q", got)
	}
	again, err := m.Prepare(context.Background(), task, "main")
	if err != nil || again != base {
		t.Errorf("Prepare again = %s, %v; want %s", again, err, base)
	}
}

func TestCheckpointRecordsEveryFileButIgnoredOnes(t *testing.T) {
	m, task, dir, _ := oneTask(t)
	names := []string{"new file.txt", "données/été 名前.md"}
	for _, n := range names {
		write(t, filepath.Join(dir, n), "made by the turn\n")
	}
	write(t, filepath.Join(dir, ".env"), "SECRET=1\n")
	write(t, filepath.Join(dir, "build", "out.bin"), "built\n")
	appendTo(t, filepath.Join(dir, "shared.txt"), "edited")
	if err := os.Remove(filepath.Join(dir, "README.md")); err != nil {
		t.Fatal(err)
	}
	headBefore := witness(t, dir, "rev-parse", "HEAD")
	statusBefore := witness(t, dir, "status", "--porcelain")
	commit := checkpoint(t, m, task, 1)

	files := treeFiles(t, m.cfg.Remote, "refs/drover/tasks/t1/turns/1")
	want := []string{".gitignore", "données/été 名前.md", "new file.txt", "shared.txt", "src/main.go"}
	if !slices.Equal(files, want) {
		t.Errorf("remote's checkpoint holds %q, want %q", files, want)
	}
	if got := witness(t, m.cfg.Remote, "show", "refs/drover/tasks/t1/last:shared.txt"); got != "base\nedited\n" {
		t.Errorf("checkpoint's shared.txt = %q", got)
	}
	if got := strings.TrimSpace(witness(t, m.cfg.Remote, "rev-parse", "refs/drover/tasks/t1/turns/1")); got != commit {
		t.Errorf("remote's turn ref = %s, want %s", got, commit)
	}
	if got := witness(t, dir, "rev-parse", "HEAD"); got != headBefore {
		t.Errorf("the branch moved: %s -> %s", headBefore, got)
	}
	if got := witness(t, dir, "status", "--porcelain"); got != statusBefore {
		t.Errorf("the worktree's index changed:\n%s\nwant\n%s", got, statusBefore)
	}
	// A second checkpoint chains to the first and holds the next turn's change only.
	appendTo(t, filepath.Join(dir, "shared.txt"), "turn two")
	second := checkpoint(t, m, task, 2)
	parents := strings.Fields(witness(t, m.cfg.Remote, "rev-list", "--parents", "-n1", second))
	if len(parents) != 3 || parents[2] != commit {
		t.Errorf("turn 2's parents = %q, want the branch head and turn 1 %s", parents[1:], commit)
	}
}

func TestRestoreUndoesARetriedTurn(t *testing.T) {
	m, task, dir, _ := oneTask(t)
	log := filepath.Join(dir, "log.txt")
	appendTo(t, log, "run")
	write(t, filepath.Join(dir, ".env"), "SECRET=1\n")
	cp := checkpoint(t, m, task, 1)

	// The failed attempt of turn 2: the tool appends again, leaves a stray file, removes a
	// tracked one and commits on the task's branch.
	appendTo(t, log, "run")
	write(t, filepath.Join(dir, "stray", "tmp.txt"), "stray\n")
	if err := os.Remove(filepath.Join(dir, "src", "main.go")); err != nil {
		t.Fatal(err)
	}
	witness(t, dir, "commit", "-q", "-am", "the agent's own commit")
	headBefore := strings.TrimSpace(witness(t, dir, "rev-parse", "HEAD"))

	r, err := m.Restore(context.Background(), task, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, log); got != "run\n" {
		t.Errorf("log.txt after restore = %q, want one line", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "stray")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stray folder still there: %v", err)
	}
	if got := read(t, filepath.Join(dir, "src", "main.go")); got != "package main\n" {
		t.Errorf("src/main.go = %q", got)
	}
	if got := read(t, filepath.Join(dir, ".env")); got != "SECRET=1\n" {
		t.Errorf("ignored .env = %q, want it left as it was", got)
	}
	if got := strings.TrimSpace(witness(t, dir, "rev-parse", "HEAD")); got == headBefore {
		t.Error("the branch still holds the failed attempt's commit")
	}
	if r.Checkpoint != cp || r.Kept != "refs/drover/tasks/t1/kept/1" {
		t.Errorf("Restore = %+v", r)
	}
	want := []string{"log.txt", "src/main.go", "stray/tmp.txt"}
	if !slices.Equal(r.Files, want) {
		t.Errorf("kept files = %q, want %q", r.Files, want)
	}
	if got := witness(t, m.cfg.Remote, "show", r.Kept+":log.txt"); got != "run\nrun\n" {
		t.Errorf("remote's kept log.txt = %q, want the attempt's two lines", got)
	}
	if got := witness(t, m.cfg.Remote, "rev-list", "-n1", "--grep", "the agent's own commit", r.Kept); got == "" {
		t.Error("the attempt's own commit is not reachable from the kept ref")
	}
	// A second restore finds nothing to keep.
	if r, err := m.Restore(context.Background(), task, 1); err != nil || r.Kept != "" {
		t.Errorf("Restore again = %+v, %v", r, err)
	}
	if got := witness(t, dir, "status", "--porcelain"); got != "?? log.txt\n" {
		t.Errorf("status after restore = %q, want the turn's new file untracked as it was", got)
	}
}

func TestRestoreToBase(t *testing.T) {
	m, task, dir, _ := oneTask(t)
	appendTo(t, filepath.Join(dir, "shared.txt"), "attempt")
	write(t, filepath.Join(dir, "new.txt"), "x")
	r, err := m.Restore(context.Background(), task, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := witness(t, dir, "status", "--porcelain"); got != "" {
		t.Errorf("status after restore to base = %q", got)
	}
	if !slices.Equal(r.Files, []string{"new.txt", "shared.txt"}) {
		t.Errorf("kept files = %q", r.Files)
	}
	if _, err := m.Restore(context.Background(), task, 7); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Restore of a turn never checkpointed = %v, want ErrNoCheckpoint", err)
	}
}

func TestTwoTasksOnOneRepositorySeeOnlyTheirOwnEdits(t *testing.T) {
	repo := origin(t)
	m := host(t, "")
	a, b := Task{ID: "a", Repo: repo}, Task{ID: "b", Repo: repo}
	prepare(t, m, a, "main")
	prepare(t, m, b, "main")
	appendTo(t, filepath.Join(m.Dir("a"), "shared.txt"), "from a")
	appendTo(t, filepath.Join(m.Dir("b"), "shared.txt"), "from b")
	// Both checkpoint at once, through the one mirror and to the one remote.
	errs := make(chan error, 2)
	for _, task := range []Task{a, b} {
		go func() {
			_, err := m.Checkpoint(context.Background(), task, 1, "turn 1 of "+task.ID)
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := read(t, filepath.Join(m.Dir("a"), "shared.txt")); got != "base\nfrom a\n" {
		t.Errorf("a sees %q", got)
	}
	if got := read(t, filepath.Join(m.Dir("b"), "shared.txt")); got != "base\nfrom b\n" {
		t.Errorf("b sees %q", got)
	}
	if got := witness(t, m.cfg.Remote, "show", "refs/drover/tasks/b/turns/1:shared.txt"); got != "base\nfrom b\n" {
		t.Errorf("b's checkpoint holds %q", got)
	}
	if got := witness(t, m.cfg.Remote, "show", "refs/drover/tasks/a/turns/1:shared.txt"); got != "base\nfrom a\n" {
		t.Errorf("a's checkpoint holds %q", got)
	}
	if mirrors, _ := filepath.Glob(filepath.Join(m.mirrorRoot(), "*.git")); len(mirrors) != 1 {
		t.Errorf("mirrors = %q, want one for the repository", mirrors)
	}
}

func TestASecondHostContinuesTheTask(t *testing.T) {
	repo := origin(t)
	remote := bareRemote(t)
	first := host(t, remote)
	task := Task{ID: "moved", Repo: repo}
	prepare(t, first, task, "main")
	dir := first.Dir(task.ID)
	appendTo(t, filepath.Join(dir, "shared.txt"), "turn one")
	write(t, filepath.Join(dir, "notes/ünï code.txt"), "kept\n")
	witness(t, dir, "commit", "-q", "-am", "committed by the agent")
	write(t, filepath.Join(dir, "uncommitted.txt"), "not committed\n")
	write(t, filepath.Join(dir, ".env"), "SECRET=1\n")
	checkpoint(t, first, task, 1)
	head := witness(t, dir, "rev-parse", "HEAD")
	status := witness(t, dir, "status", "--porcelain")
	// The first host is gone for good; the repository itself is out of reach too.
	if err := os.RemoveAll(filepath.Dir(first.cfg.Root)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(repo); err != nil {
		t.Fatal(err)
	}

	second := host(t, remote)
	cp, err := second.Ensure(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(witness(t, remote, "rev-parse", "refs/drover/tasks/moved/last")); cp != want {
		t.Errorf("Ensure = %s, want the remote's last %s", cp, want)
	}
	dir2 := second.Dir(task.ID)
	if got := read(t, filepath.Join(dir2, "shared.txt")); got != "base\nturn one\n" {
		t.Errorf("shared.txt = %q", got)
	}
	if got := read(t, filepath.Join(dir2, "notes/ünï code.txt")); got != "kept\n" {
		t.Errorf("notes = %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir2, ".env")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf(".env reached the second host: %v", err)
	}
	if got := witness(t, dir2, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD = %s, want the first host's %s", got, head)
	}
	if got := witness(t, dir2, "status", "--porcelain"); got != status {
		t.Errorf("status on the second host = %q, want the first host's %q", got, status)
	}
	appendTo(t, filepath.Join(dir2, "shared.txt"), "turn two")
	checkpoint(t, second, task, 2)
	if got := witness(t, remote, "show", "refs/drover/tasks/moved/turns/2:shared.txt"); got != "base\nturn one\nturn two\n" {
		t.Errorf("turn 2 on the remote = %q", got)
	}
}

func TestForkAtTurnOneOfThree(t *testing.T) {
	repo := origin(t)
	m := host(t, "")
	src := Task{ID: "src", Repo: repo}
	prepare(t, m, src, "main")
	file := filepath.Join(m.Dir("src"), "shared.txt")
	for turn := 1; turn <= 3; turn++ {
		appendTo(t, file, "turn "+string(rune('0'+turn)))
		checkpoint(t, m, src, turn)
	}
	cp, err := m.Fork(context.Background(), src, "dst", 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(witness(t, m.cfg.Remote, "rev-parse", "refs/drover/tasks/src/turns/1")); cp != want {
		t.Errorf("Fork = %s, want src's turn 1 %s", cp, want)
	}
	dst := m.Dir("dst")
	if got := read(t, filepath.Join(dst, "shared.txt")); got != "base\nturn 1\n" {
		t.Errorf("fork's shared.txt = %q, want turn 1's", got)
	}
	if got := read(t, file); got != "base\nturn 1\nturn 2\nturn 3\n" {
		t.Errorf("source's shared.txt = %q, want it untouched", got)
	}
	if got := strings.TrimSpace(witness(t, dst, "rev-parse", "--abbrev-ref", "HEAD")); got != "drover/dst" {
		t.Errorf("fork's branch = %q", got)
	}
	refs := witness(t, m.cfg.Remote, "for-each-ref", "--format=%(refname) %(objectname)", "refs/drover/tasks/dst/")
	if want := "refs/drover/tasks/dst/base " + cp + "\n"; refs != want {
		t.Errorf("fork's refs on the remote:\n%s\nwant\n%s", refs, want)
	}
	if got := witness(t, dst, "status", "--porcelain"); got != "" {
		t.Errorf("the fork's worktree differs from its branch head:\n%s", got)
	}
	// The fork's turns count from 1; its first diff shows its own work only.
	fork := Task{ID: "dst", Repo: repo}
	appendTo(t, filepath.Join(dst, "shared.txt"), "fork turn 1")
	checkpoint(t, m, fork, 1)
	if got := witness(t, m.cfg.Remote, "show", "refs/drover/tasks/src/turns/2:shared.txt"); got != "base\nturn 1\nturn 2\n" {
		t.Errorf("source's turn 2 changed: %q", got)
	}
	d, err := m.Diff(context.Background(), fork, 0, 1, false)
	if err != nil || !strings.Contains(d.Patch, "+fork turn 1") || strings.Contains(d.Patch, "+turn 1") {
		t.Errorf("the fork's turn 1: %v\n%s", err, d.Patch)
	}
	// A retry before the fork's first checkpoint goes back to the fork point.
	write(t, filepath.Join(dst, "stray.txt"), "x")
	if _, err := m.Restore(context.Background(), fork, 0); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dst, "shared.txt")); got != "base\nturn 1\n" {
		t.Errorf("restored to the fork point: %q", got)
	}
}

func TestCheckKeepsHandEditsOnASideRef(t *testing.T) {
	m, task, dir, _ := oneTask(t)
	if err := m.Check(context.Background(), task); err != nil {
		t.Fatalf("Check of a fresh worktree = %v", err)
	}
	checkpoint(t, m, task, 1)
	if err := m.Check(context.Background(), task); err != nil {
		t.Fatalf("Check right after a checkpoint = %v", err)
	}
	appendTo(t, filepath.Join(dir, "shared.txt"), "by hand")
	err := m.Check(context.Background(), task)
	var changed *ChangedError
	if !errors.As(err, &changed) || !errors.Is(err, ErrChangedByHand) {
		t.Fatalf("Check = %v, want a ChangedError", err)
	}
	if !slices.Equal(changed.Files, []string{"shared.txt"}) || changed.Ref != "refs/drover/tasks/t1/kept/1" {
		t.Errorf("ChangedError = %+v", changed)
	}
	if got := witness(t, m.cfg.Remote, "show", changed.Ref+":shared.txt"); got != "base\nby hand\n" {
		t.Errorf("kept on the remote: %q", got)
	}
	if got := read(t, filepath.Join(dir, "shared.txt")); got != "base\nby hand\n" {
		t.Errorf("the hand edit was discarded: %q", got)
	}
	r, err := m.Restore(context.Background(), task, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kept != "refs/drover/tasks/t1/kept/2" {
		t.Errorf("the restore's kept ref = %q, want the next one", r.Kept)
	}
}

func TestUnreachableRepositoryAndRemote(t *testing.T) {
	m := host(t, "")
	missing := filepath.Join(t.TempDir(), "no-such-repo")
	_, err := m.Prepare(context.Background(), Task{ID: "t1", Repo: missing}, "main")
	var unreachable *UnreachableError
	if !errors.As(err, &unreachable) || unreachable.URL != missing {
		t.Fatalf("Prepare of a missing repository = %v, want an UnreachableError naming it", err)
	}
	if _, err := os.Stat(m.Dir("t1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a worktree was made: %v", err)
	}

	repo := origin(t)
	gone := filepath.Join(t.TempDir(), "gone.git")
	m2 := host(t, gone)
	_, err = m2.Prepare(context.Background(), Task{ID: "t2", Repo: repo}, "main")
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), gone) {
		t.Errorf("Prepare with an unreachable remote = %v, want ErrUnreachable naming it", err)
	}
}

func TestMissingBase(t *testing.T) {
	repo := origin(t)
	m := host(t, "")
	for _, base := range []string{"no-such-branch", "0123456789012345678901234567890123456789", "--help"} {
		_, err := m.Prepare(context.Background(), Task{ID: "t1", Repo: repo}, base)
		var missing *BaseMissingError
		if !errors.As(err, &missing) || missing.Base != base {
			t.Errorf("Prepare at %q = %v, want a BaseMissingError", base, err)
		}
	}
	if _, err := os.Stat(m.Dir("t1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a worktree was made: %v", err)
	}
	witness(t, repo, "tag", "v1")
	if _, err := m.Prepare(context.Background(), Task{ID: "t1", Repo: repo}, "v1"); err != nil {
		t.Errorf("Prepare at a tag made after the mirror: %v", err)
	}
}

func TestFileOverTheLimitIsNamed(t *testing.T) {
	repo := origin(t)
	m := host(t, "", func(c *Config) { c.MaxFileBytes = 1000 })
	task := Task{ID: "t1", Repo: repo}
	prepare(t, m, task, "main")
	write(t, filepath.Join(m.Dir("t1"), "big dir", "dump.bin"), strings.Repeat("x", 1001))
	write(t, filepath.Join(m.Dir("t1"), ".env"), strings.Repeat("x", 5000))
	_, err := m.Checkpoint(context.Background(), task, 1, "turn 1")
	var big *FileTooLargeError
	if !errors.As(err, &big) || big.Path != "big dir/dump.bin" || big.Size != 1001 {
		t.Fatalf("Checkpoint = %v, want a FileTooLargeError naming big dir/dump.bin", err)
	}
	if refs := witness(t, m.cfg.Remote, "for-each-ref", "refs/drover/tasks/t1/turns/"); refs != "" {
		t.Errorf("a checkpoint reached the remote: %s", refs)
	}
}

func TestDiffNamesBinaryFiles(t *testing.T) {
	m, task, dir, _ := oneTask(t)
	write(t, filepath.Join(dir, "image one.png"), "\x89PNG\x00\x01\x02")
	appendTo(t, filepath.Join(dir, "shared.txt"), "turn one")
	checkpoint(t, m, task, 1)
	appendTo(t, filepath.Join(dir, "shared.txt"), "turn two")
	checkpoint(t, m, task, 2)

	d, err := m.Diff(context.Background(), task, 0, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []FileDiff{{Path: "image one.png", Binary: true}, {Path: "shared.txt", Added: 2}}
	if !slices.Equal(d.Files, want) {
		t.Errorf("files = %+v, want %+v", d.Files, want)
	}
	if !strings.Contains(d.Patch, "Binary files /dev/null and b/image one.png differ") || !strings.Contains(d.Patch, "+turn two") {
		t.Errorf("patch:\n%s", d.Patch)
	}
	one, err := m.Diff(context.Background(), task, 1, 2, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(one.Files, []FileDiff{{Path: "shared.txt", Added: 1}}) || one.Patch != "" {
		t.Errorf("turn 2 alone = %+v", one)
	}
	if _, err := m.Diff(context.Background(), task, 0, 3, true); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Diff to a turn not checkpointed = %v", err)
	}
}

func TestRemoveKeepsRefsAndPruneDropsOldOnes(t *testing.T) {
	repo := origin(t)
	m := host(t, "")
	keep, old := Task{ID: "keep", Repo: repo}, Task{ID: "old", Repo: repo}
	for _, task := range []Task{keep, old} {
		prepare(t, m, task, "main")
		appendTo(t, filepath.Join(m.Dir(task.ID), "shared.txt"), task.ID)
		checkpoint(t, m, task, 1)
	}
	ctx := context.Background()
	if err := m.Remove(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.Dir("old")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("worktree still there: %v", err)
	}
	if list := witness(t, m.Mirror(repo), "worktree", "list"); strings.Contains(list, m.Dir("old")) {
		t.Errorf("the mirror still lists the worktree:\n%s", list)
	}
	if got := witness(t, m.cfg.Remote, "show", "refs/drover/tasks/old/last:shared.txt"); got != "base\nold\n" {
		t.Errorf("removed task's checkpoint: %q", got)
	}
	if _, err := m.Ensure(ctx, old); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(m.Dir("old"), "shared.txt")); got != "base\nold\n" {
		t.Errorf("worktree made again holds %q", got)
	}
	if err := m.Remove(ctx, old); err != nil {
		t.Fatal(err)
	}
	if pruned, err := m.Prune(ctx, time.Now().Add(-time.Hour)); err != nil || len(pruned) != 0 {
		t.Errorf("Prune of nothing old = %q, %v", pruned, err)
	}
	pruned, err := m.Prune(ctx, time.Now().Add(time.Hour))
	if err != nil || !slices.Equal(pruned, []string{"old"}) {
		t.Fatalf("Prune = %q, %v; want old alone (keep has a worktree)", pruned, err)
	}
	if refs := witness(t, m.cfg.Remote, "for-each-ref", "--format=%(refname)", "refs/drover/tasks/"); refs != "refs/drover/tasks/keep/base\nrefs/drover/tasks/keep/last\nrefs/drover/tasks/keep/turns/1\n" {
		t.Errorf("remote's refs after prune:\n%s", refs)
	}
}

func TestRepositoryHooksNeverRun(t *testing.T) {
	repo := origin(t)
	m := host(t, "")
	task := Task{ID: "t1", Repo: repo}
	prepare(t, m, task, "main")
	mark := filepath.Join(t.TempDir(), "hook-ran")
	hook := "#!/bin/sh\ntouch " + mark + "\n"
	for _, repoDir := range []string{m.Mirror(repo), m.cfg.Remote} {
		for _, name := range []string{"reference-transaction", "pre-push", "post-update", "pre-receive"} {
			p := filepath.Join(repoDir, "hooks", name)
			write(t, p, hook)
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendTo(t, filepath.Join(m.Dir("t1"), "shared.txt"), "x")
	checkpoint(t, m, task, 1)
	if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a hook ran: %v", err)
	}
}

func TestDiskFullIsTyped(t *testing.T) {
	err := error(&GitError{Args: []string{"write-tree"}, Err: errors.New("exit status 128"),
		Stderr: "error: unable to write file: No space left on device\nfatal: git-write-tree: error building trees"})
	if !errors.Is(err, ErrDiskFull) {
		t.Error("a write that ran out of space is not ErrDiskFull")
	}
	if errors.Is(&GitError{Err: errors.New("exit status 1"), Stderr: "fatal: bad object"}, ErrDiskFull) {
		t.Error("another failure is ErrDiskFull")
	}
}

func TestACheckpointThatFailedToPushIsRetried(t *testing.T) {
	repo := origin(t)
	remote := bareRemote(t)
	m := host(t, remote)
	task := Task{ID: "t1", Repo: repo}
	prepare(t, m, task, "main")
	appendTo(t, filepath.Join(m.Dir("t1"), "shared.txt"), "turn one")
	away := remote + ".away"
	if err := os.Rename(remote, away); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Checkpoint(context.Background(), task, 1, "turn 1"); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Checkpoint with the remote away = %v, want ErrUnreachable", err)
	}
	if err := os.Rename(away, remote); err != nil {
		t.Fatal(err)
	}
	if refs := witness(t, remote, "for-each-ref", "refs/drover/tasks/t1/turns/"); refs != "" {
		t.Fatalf("the failed checkpoint reached the remote: %s", refs)
	}
	appendTo(t, filepath.Join(m.Dir("t1"), "shared.txt"), "retried")
	commit := checkpoint(t, m, task, 1)
	if got := strings.TrimSpace(witness(t, remote, "rev-parse", "refs/drover/tasks/t1/turns/1")); got != commit {
		t.Errorf("remote's turn 1 = %s, want the retry's %s", got, commit)
	}
	if got := witness(t, remote, "show", "refs/drover/tasks/t1/turns/1:shared.txt"); got != "base\nturn one\nretried\n" {
		t.Errorf("remote's turn 1 holds %q", got)
	}
}

func TestEnsureBeforeTheFirstCheckpoint(t *testing.T) {
	repo := origin(t)
	remote := bareRemote(t)
	first := host(t, remote)
	task := Task{ID: "t1", Repo: repo}
	base := prepare(t, first, task, "main")
	second := host(t, remote)
	cp, err := second.Ensure(context.Background(), task)
	if err != nil || cp != base {
		t.Fatalf("Ensure = %s, %v; want the base %s", cp, err, base)
	}
	if got := witness(t, second.Dir("t1"), "status", "--porcelain"); got != "" {
		t.Errorf("status = %q", got)
	}
	if _, err := host(t, remote).Ensure(context.Background(), Task{ID: "never", Repo: repo}); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Ensure of an unknown task = %v, want ErrNoCheckpoint", err)
	}
}

// TestPrepareWithoutABaseTakesTheDefaultBranch: a repository whose default branch is not git's
// own default gives its default branch's commit when no base is named.
func TestPrepareWithoutABaseTakesTheDefaultBranch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "origin")
	witness(t, t.TempDir(), "init", "-q", "-b", "trunk", dir)
	write(t, filepath.Join(dir, "f.txt"), "trunk\n")
	witness(t, dir, "add", "-A")
	witness(t, dir, "commit", "-q", "-m", "on trunk")
	witness(t, dir, "branch", "other")
	m := host(t, "")
	task := Task{ID: "t1", Repo: dir}
	base := prepare(t, m, task, "")
	if want := strings.TrimSpace(witness(t, dir, "rev-parse", "trunk")); base != want {
		t.Errorf("base = %s, want trunk's %s", base, want)
	}
}

// TestRestoreToACheckpointMadeElsewhere: a host whose worktree of a task is stale (the task ran
// on another host since) restores to the checkpoint the other host made, fetched from the
// remote; and restoring to a checkpoint older than the remote's last (a checkpoint pushed but
// never committed by the caller) puts that older one back.
func TestRestoreToACheckpointMadeElsewhere(t *testing.T) {
	repo := origin(t)
	remote := bareRemote(t)
	first, second := host(t, remote), host(t, remote)
	task := Task{ID: "back", Repo: repo}
	prepare(t, first, task, "main")
	appendTo(t, filepath.Join(first.Dir(task.ID), "shared.txt"), "turn one")
	cp1 := checkpoint(t, first, task, 1)

	if _, err := second.Ensure(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	appendTo(t, filepath.Join(second.Dir(task.ID), "shared.txt"), "turn two")
	cp2 := checkpoint(t, second, task, 2)

	r, err := first.RestoreTo(context.Background(), task, cp2)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(first.Dir(task.ID), "shared.txt")); r.Checkpoint != cp2 || got != "base\nturn one\nturn two\n" {
		t.Fatalf("restored to %s, shared.txt %q; want turn two's %s", r.Checkpoint, got, cp2)
	}

	appendTo(t, filepath.Join(first.Dir(task.ID), "shared.txt"), "turn three, never committed")
	checkpoint(t, first, task, 3)
	r, err = first.RestoreTo(context.Background(), task, cp1)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(first.Dir(task.ID), "shared.txt")); r.Checkpoint != cp1 || got != "base\nturn one\n" {
		t.Fatalf("restored to %s, shared.txt %q; want turn one's %s", r.Checkpoint, got, cp1)
	}
	if _, err := first.RestoreTo(context.Background(), task, "0123456789abcdef0123456789abcdef01234567"); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("RestoreTo an unknown commit = %v, want ErrNoCheckpoint", err)
	}
	r, err = first.RestoreTo(context.Background(), task, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(first.Dir(task.ID), "shared.txt")); got != "base\n" || r.Kept == "" {
		t.Errorf("restored to the base: shared.txt %q, kept %q", got, r.Kept)
	}
}

// TestRestoreOfALockedWorktree: a git command that was stopped (or a person's, still running)
// left index.lock in the worktree's repository. Restore keeps the worktree's changes on a side
// ref, then reports ErrLocked with the lock's path, and leaves the lock where it is; once the
// lock is gone, the same restore succeeds.
func TestRestoreOfALockedWorktree(t *testing.T) {
	m, task, dir, _ := oneTask(t)
	log := filepath.Join(dir, "log.txt")
	appendTo(t, log, "run")
	checkpoint(t, m, task, 1)
	appendTo(t, log, "run")
	lock := filepath.Join(strings.TrimSpace(witness(t, dir, "rev-parse", "--absolute-git-dir")), "index.lock")
	write(t, lock, "")

	_, err := m.Restore(context.Background(), task, 1)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), lock) {
		t.Fatalf("Restore of a locked worktree = %v, want ErrLocked naming %s", err, lock)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Errorf("the lock was removed: %v", err)
	}
	if got := witness(t, m.cfg.Remote, "show", "refs/drover/tasks/t1/kept/1:log.txt"); got != "run\nrun\n" {
		t.Errorf("the remote's kept log.txt = %q, want the worktree's two lines", got)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Restore(context.Background(), task, 1); err != nil {
		t.Fatalf("Restore once the lock is gone: %v", err)
	}
	if got := read(t, log); got != "run\n" {
		t.Errorf("log.txt after restore = %q, want one line", got)
	}
}

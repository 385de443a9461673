package workspace

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A reader with its own state folder and only the remote in common with the host that ran the
// task sees the task's turns and diffs, and loses the refs the remote has dropped.
func TestAReaderSeesTheRemotesCheckpoints(t *testing.T) {
	repo, remote := origin(t), bareRemote(t)
	w := host(t, remote)
	task := Task{ID: "t1", Repo: repo}
	prepare(t, w, task, "main")
	dir := w.Dir(task.ID)
	appendTo(t, filepath.Join(dir, "shared.txt"), "turn one")
	write(t, filepath.Join(dir, "b.bin"), "\x00\x01")
	checkpoint(t, w, task, 1)
	appendTo(t, filepath.Join(dir, "shared.txt"), "turn two")
	checkpoint(t, w, task, 2)

	ctx := context.Background()
	r := host(t, remote)
	view := r.Stored("t1")
	if _, err := r.Turns(ctx, view); !errors.Is(err, ErrNotManaged) {
		t.Errorf("Turns before Fetch = %v, want ErrNotManaged", err)
	}
	if err := r.Fetch(ctx, view); err != nil {
		t.Fatal(err)
	}
	turns, err := r.Turns(ctx, view)
	if err != nil || !slices.Equal(turns, []int{1, 2}) {
		t.Fatalf("Turns = %v, %v", turns, err)
	}
	d, err := r.Diff(ctx, view, 1, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	want := witness(t, remote, "diff", "refs/drover/tasks/t1/turns/1", "refs/drover/tasks/t1/turns/2")
	if d.Patch != want {
		t.Errorf("turn 2's patch:\n%s\nwant (git diff):\n%s", d.Patch, want)
	}
	p, err := r.Patch(ctx, view, 0, 2, "shared.txt")
	if err != nil {
		t.Fatal(err)
	}
	if want := witness(t, remote, "diff", "refs/drover/tasks/t1/base", "refs/drover/tasks/t1/turns/2", "--", "shared.txt"); p != want {
		t.Errorf("shared.txt's patch:\n%s\nwant:\n%s", p, want)
	}
	if p, err := r.Patch(ctx, view, 0, 2, "b.bin"); err != nil || !strings.Contains(p, "Binary files /dev/null and b/b.bin differ") {
		t.Errorf("binary file's patch = %q, %v", p, err)
	}
	// The remote drops turn 2 (a rewind, a prune): the reader's next fetch drops it too.
	witness(t, remote, "update-ref", "-d", "refs/drover/tasks/t1/turns/2")
	if err := r.Fetch(ctx, view); err != nil {
		t.Fatal(err)
	}
	if turns, err := r.Turns(ctx, view); err != nil || !slices.Equal(turns, []int{1}) {
		t.Errorf("Turns after the remote dropped turn 2 = %v, %v", turns, err)
	}
	if _, err := r.Turns(ctx, r.Stored("unknown")); !errors.Is(err, ErrNotManaged) {
		t.Errorf("Turns of a task the remote never had = %v", err)
	}
}

// Publish pushes the newest checkpoint to a branch of the user's; it replaces what it does not
// contain only when asked.
func TestPublishNeverOverwritesABranchUnasked(t *testing.T) {
	w, task, dir, _ := oneTask(t)
	repo := task.Repo
	write(t, filepath.Join(dir, "new.txt"), "made\n")
	cp := checkpoint(t, w, task, 1)
	ctx := context.Background()

	user := bareRemote(t)
	p, err := w.Publish(ctx, task, user, "review/t1", false)
	if err != nil {
		t.Fatal(err)
	}
	if p.Commit != cp || p.Turn != 1 || p.Ref != "refs/heads/review/t1" {
		t.Errorf("Publish = %+v, want turn 1's checkpoint %s", p, cp)
	}
	if got := witness(t, user, "show", "review/t1:new.txt"); got != "made\n" {
		t.Errorf("published new.txt = %q", got)
	}
	// A later turn fast-forwards the branch.
	appendTo(t, filepath.Join(dir, "new.txt"), "more")
	cp2 := checkpoint(t, w, task, 2)
	if _, err := w.Publish(ctx, task, user, "review/t1", false); err != nil {
		t.Fatalf("a fast-forward publish: %v", err)
	}
	if got := strings.TrimSpace(witness(t, user, "rev-parse", "review/t1")); got != cp2 {
		t.Errorf("branch at %s, want %s", got, cp2)
	}
	// A branch with someone else's commit: refused, left as it was, unless forced.
	witness(t, repo, "commit", "-q", "--allow-empty", "-m", "someone else's")
	witness(t, repo, "push", "-q", user, "main")
	before := witness(t, user, "rev-parse", "main")
	if _, err := w.Publish(ctx, task, user, "main", false); !errors.Is(err, ErrNotOurs) {
		t.Errorf("publish over someone's branch = %v, want ErrNotOurs", err)
	}
	if got := strings.TrimSpace(witness(t, user, "rev-parse", "main")); got+"\n" != before {
		t.Errorf("main moved to %s", got)
	}
	if _, err := w.Publish(ctx, task, user, "--upload-pack=x", false); err == nil {
		t.Error("a branch that reads as an option was taken")
	}
	if _, err := w.Publish(ctx, task, user, "main", true); err != nil {
		t.Fatalf("forced publish: %v", err)
	}
	if got := strings.TrimSpace(witness(t, user, "rev-parse", "main")); got != cp2 {
		t.Errorf("forced: main at %s, want %s", got, cp2)
	}
}

// An empty base is the repository's default branch, whatever git's default is where the mirror
// is made.
func TestEmptyBaseIsTheDefaultBranch(t *testing.T) {
	repo := origin(t)
	witness(t, repo, "checkout", "-q", "-b", "trunk")
	witness(t, repo, "commit", "-q", "--allow-empty", "-m", "on trunk")
	m := host(t, "")
	got := prepare(t, m, Task{ID: "t1", Repo: repo}, "")
	if want := strings.TrimSpace(witness(t, repo, "rev-parse", "trunk")); got != want {
		t.Errorf("base = %s, want trunk's %s", got, want)
	}
}

// Rewind makes an earlier turn's checkpoint the newest, on the remote too, keeps the later ones
// aside, and the next turn's checkpoint and diff follow from it; Restore puts the files back.
func TestRewindSetsLaterTurnsAside(t *testing.T) {
	repo, remote := origin(t), bareRemote(t)
	w := host(t, remote)
	task := Task{ID: "t1", Repo: repo}
	prepare(t, w, task, "main")
	dir := w.Dir(task.ID)
	var cps []string
	for _, line := range []string{"one", "two", "three"} {
		appendTo(t, filepath.Join(dir, "shared.txt"), line)
		cps = append(cps, checkpoint(t, w, task, len(cps)+1))
	}
	ctx := context.Background()
	// The rewind is done from another host, through the remote alone.
	other := host(t, remote)
	r, err := other.Rewind(ctx, other.Stored("t1"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Checkpoint != cps[0] || !slices.Equal(r.Turns, []int{2, 3}) || r.Set != "refs/drover/tasks/t1/rewound/1/" {
		t.Errorf("Rewind = %+v", r)
	}
	refs := witness(t, remote, "for-each-ref", "--format=%(refname) %(objectname)", "refs/drover/tasks/t1/")
	for _, want := range []string{"refs/drover/tasks/t1/last " + cps[0], "refs/drover/tasks/t1/turns/1 " + cps[0],
		"refs/drover/tasks/t1/rewound/1/turns/2 " + cps[1], "refs/drover/tasks/t1/rewound/1/turns/3 " + cps[2]} {
		if !strings.Contains(refs, want+"\n") {
			t.Errorf("the remote lacks %s:\n%s", want, refs)
		}
	}
	if strings.Contains(refs, "refs/drover/tasks/t1/turns/2") || strings.Contains(refs, "refs/drover/tasks/t1/turns/3") {
		t.Errorf("turns 2 and 3 are still turns:\n%s", refs)
	}
	// The worker's host: its mirror follows, the worktree goes back, and turn 4 starts there.
	if err := w.Fetch(ctx, task); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Restore(ctx, task, 1); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "shared.txt")); got != "base\none\n" {
		t.Errorf("after the rewind the worktree holds %q", got)
	}
	appendTo(t, filepath.Join(dir, "shared.txt"), "four")
	checkpoint(t, w, task, 4)
	if turns, err := w.Turns(ctx, task); err != nil || !slices.Equal(turns, []int{1, 4}) {
		t.Errorf("Turns = %v, %v", turns, err)
	}
	from, to, err := TurnRange([]int{1, 4}, 4)
	if err != nil || from != 1 || to != 4 {
		t.Errorf("TurnRange = %d..%d, %v", from, to, err)
	}
	d, err := w.Diff(ctx, task, from, to, false)
	if err != nil || !strings.Contains(d.Patch, "+four") || strings.Contains(d.Patch, "three") {
		t.Errorf("turn 4's diff: %v\n%s", err, d.Patch)
	}
	// A second rewind keeps its set apart.
	if r, err := other.Rewind(ctx, other.Stored("t1"), 0); err != nil || r.Set != "refs/drover/tasks/t1/rewound/2/" {
		t.Errorf("second Rewind = %+v, %v", r, err)
	}
}

package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// originRefs are what a mirror takes from its repository: branches and tags, never pruned, so
// that drover's own refs beside them stay.
var originRefs = []string{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"}

// syncMirror makes the host's bare mirror of repo, or brings it up to date, and returns its path.
func (m *Manager) syncMirror(ctx context.Context, repo string) (string, error) {
	mirror := m.Mirror(repo)
	defer m.lockMirror(mirror)()
	if _, err := os.Stat(mirror); errors.Is(err, os.ErrNotExist) {
		if err := m.initMirror(ctx, mirror); err != nil {
			return "", err
		}
	}
	args := append([]string{"fetch", "--quiet", "--no-write-fetch-head", "--", repo}, originRefs...)
	if _, err := m.in(ctx, mirror, args...); err != nil {
		if errors.Is(err, ErrDiskFull) || ctx.Err() != nil {
			return "", fmt.Errorf("fetching %s: %w", repo, err)
		}
		return "", &UnreachableError{URL: repo, Err: err}
	}
	return mirror, nil
}

// initMirror makes an empty bare repository at path, whole or not at all.
func (m *Manager) initMirror(ctx context.Context, path string) error {
	tmp := fmt.Sprintf("%s.tmp%d", path, time.Now().UnixNano())
	if _, err := m.in(ctx, m.mirrorRoot(), "init", "--quiet", "--bare", tmp); err != nil {
		return fmt.Errorf("making mirror: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.RemoveAll(tmp)
		if _, serr := os.Stat(path); serr == nil {
			return nil // another process made it first
		}
		return fmt.Errorf("making mirror: %w", err)
	}
	return nil
}

// fetchTask brings a task's refs from the remote into mirror, making the mirror when missing.
func (m *Manager) fetchTask(ctx context.Context, mirror, id string) error {
	defer m.lockMirror(mirror)()
	if _, err := os.Stat(mirror); errors.Is(err, os.ErrNotExist) {
		if err := m.initMirror(ctx, mirror); err != nil {
			return err
		}
	}
	spec := "+" + refPrefix(id) + "*:" + refPrefix(id) + "*"
	if _, err := m.in(ctx, mirror, "fetch", "--quiet", "--no-write-fetch-head", "--", m.cfg.Remote, spec); err != nil {
		if errors.Is(err, ErrDiskFull) || ctx.Err() != nil {
			return fmt.Errorf("fetching task %s: %w", id, err)
		}
		return &UnreachableError{URL: m.cfg.Remote, Err: err}
	}
	return nil
}

// push sends refs (names the same on both sides) from the repository at dir to the remote.
func (m *Manager) push(ctx context.Context, dir string, refs ...string) error {
	args := []string{"push", "--quiet", "--no-verify", "--", m.cfg.Remote}
	for _, r := range refs {
		args = append(args, "+"+r+":"+r)
	}
	if _, err := m.in(ctx, dir, args...); err != nil {
		if errors.Is(err, ErrDiskFull) || ctx.Err() != nil {
			return fmt.Errorf("pushing to %s: %w", m.cfg.Remote, err)
		}
		return &UnreachableError{URL: m.cfg.Remote, Err: err}
	}
	return nil
}

// Prepare makes the task's worktree at Dir(t.ID) on branch drover/<id> from base (a branch,
// tag or commit of t.Repo; empty means the repository's default branch) and records the base on
// the remote, so that any host can take the task from its first turn. It returns the base
// commit. A task whose worktree is there already is left as it is.
func (m *Manager) Prepare(ctx context.Context, t Task, base string) (string, error) {
	if err := checkID(t.ID); err != nil {
		return "", fmt.Errorf("preparing workspace: %w", err)
	}
	if _, err := os.Stat(filepath.Join(m.Dir(t.ID), ".git")); err == nil {
		return m.in(ctx, m.Mirror(t.Repo), "rev-parse", "--verify", baseRef(t.ID)+"^{commit}")
	}
	mirror, err := m.syncMirror(ctx, t.Repo)
	if err != nil {
		return "", fmt.Errorf("preparing workspace of %s: %w", t.ID, err)
	}
	rev := base
	if rev == "" {
		if rev, err = m.defaultBranch(ctx, mirror, t.Repo); err != nil {
			return "", fmt.Errorf("preparing workspace of %s: %w", t.ID, err)
		}
	}
	if strings.HasPrefix(rev, "-") {
		return "", &BaseMissingError{Repo: t.Repo, Base: base}
	}
	commit, err := m.in(ctx, mirror, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return "", &BaseMissingError{Repo: t.Repo, Base: base}
	}
	if _, err := m.in(ctx, mirror, "update-ref", baseRef(t.ID), commit); err != nil {
		return "", fmt.Errorf("recording base of %s: %w", t.ID, err)
	}
	if err := m.addWorktree(ctx, mirror, t.ID, commit, commit); err != nil {
		return "", err
	}
	if err := m.push(ctx, mirror, baseRef(t.ID)); err != nil {
		return "", fmt.Errorf("preparing workspace of %s: %w", t.ID, err)
	}
	return commit, nil
}

// defaultBranch is the branch repo's HEAD names (refs/heads/…), which a mirror made with init
// does not know: its own HEAD names git's default, whatever the repository's is.
func (m *Manager) defaultBranch(ctx context.Context, mirror, repo string) (string, error) {
	out, err := m.in(ctx, mirror, "ls-remote", "--symref", "--", repo, "HEAD")
	if err != nil {
		if errors.Is(err, ErrDiskFull) || ctx.Err() != nil {
			return "", fmt.Errorf("reading the default branch of %s: %w", repo, err)
		}
		return "", &UnreachableError{URL: repo, Err: err}
	}
	for line := range strings.SplitSeq(out, "\n") {
		if ref, ok := strings.CutPrefix(line, "ref: "); ok {
			if name, _, ok := strings.Cut(ref, "\t"); ok && strings.HasPrefix(name, "refs/heads/") {
				return name, nil
			}
		}
	}
	return "HEAD", nil
}

// addWorktree makes the task's worktree on its branch at head, with the files of checkpoint cp
// (the same commit as head for a fresh task).
func (m *Manager) addWorktree(ctx context.Context, mirror, id, cp, head string) error {
	dir := m.Dir(id)
	if _, err := m.in(ctx, mirror, "worktree", "prune"); err != nil {
		return fmt.Errorf("pruning worktrees: %w", err)
	}
	_ = os.Remove(m.indexFile(id))
	args := []string{"worktree", "add", "--quiet", "-B", Branch(id), dir, head}
	if cp != head {
		args = []string{"worktree", "add", "--quiet", "--no-checkout", "-B", Branch(id), dir, head}
	}
	if _, err := m.in(ctx, mirror, args...); err != nil {
		return fmt.Errorf("making worktree of %s: %w", id, err)
	}
	if cp == head {
		return nil
	}
	if _, err := m.in(ctx, dir, "read-tree", "-u", "--reset", cp); err != nil {
		return fmt.Errorf("checking out checkpoint of %s: %w", id, err)
	}
	if _, err := m.in(ctx, dir, "reset", "--quiet", head, "--"); err != nil {
		return fmt.Errorf("checking out checkpoint of %s: %w", id, err)
	}
	return nil
}

// Ensure makes the task's worktree on a host that has none, from the remote alone, at the task's
// newest checkpoint (or its base before its first), at the same path as on any other host. It
// returns the checkpoint. A task whose worktree is there already is left as it is.
func (m *Manager) Ensure(ctx context.Context, t Task) (string, error) {
	if err := checkID(t.ID); err != nil {
		return "", fmt.Errorf("ensuring workspace: %w", err)
	}
	mirror := m.Mirror(t.Repo)
	if _, err := os.Stat(filepath.Join(m.Dir(t.ID), ".git")); err == nil {
		return m.newest(ctx, mirror, t.ID)
	}
	if err := m.fetchTask(ctx, mirror, t.ID); err != nil {
		return "", fmt.Errorf("ensuring workspace of %s: %w", t.ID, err)
	}
	cp, err := m.newest(ctx, mirror, t.ID)
	if err != nil {
		return "", fmt.Errorf("ensuring workspace of %s: %w", t.ID, err)
	}
	head, err := m.headOf(ctx, mirror, t.ID, cp)
	if err != nil {
		return "", err
	}
	if err := m.addWorktree(ctx, mirror, t.ID, cp, head); err != nil {
		return "", err
	}
	return cp, nil
}

// newest is the task's last checkpoint, or its base before the first.
func (m *Manager) newest(ctx context.Context, mirror, id string) (string, error) {
	out, err := m.in(ctx, mirror, "for-each-ref", "--format=%(objectname)", lastRef(id), baseRef(id))
	if err != nil {
		return "", fmt.Errorf("reading refs of %s: %w", id, err)
	}
	// for-each-ref sorts by name: "base" before "last".
	lines := strings.Fields(out)
	if len(lines) == 0 {
		return "", fmt.Errorf("task %s: %w", id, ErrNoCheckpoint)
	}
	return lines[len(lines)-1], nil
}

// headOf is the branch head recorded with checkpoint cp: its first parent, or cp itself when cp
// is the task's base.
func (m *Manager) headOf(ctx context.Context, mirror, id, cp string) (string, error) {
	out, err := m.in(ctx, mirror, "rev-parse", baseRef(id), cp+"^@")
	if err != nil {
		return "", fmt.Errorf("reading checkpoint %s: %w", cp, err)
	}
	ids := strings.Fields(out)
	if ids[0] == cp || len(ids) < 2 {
		return cp, nil
	}
	return ids[1], nil
}

// Remove takes the task's worktree off this host. Its branch and refs stay, here and on the remote.
func (m *Manager) Remove(ctx context.Context, t Task) error {
	dir := m.Dir(t.ID)
	if err := checkID(t.ID); err != nil {
		return fmt.Errorf("removing workspace: %w", err)
	}
	mirror := m.Mirror(t.Repo)
	if _, err := os.Stat(dir); err == nil {
		if _, err := m.in(ctx, mirror, "worktree", "remove", "--force", "--force", dir); err != nil {
			if err := os.RemoveAll(dir); err != nil {
				return fmt.Errorf("removing worktree of %s: %w", t.ID, err)
			}
		}
	}
	if _, err := os.Stat(mirror); err == nil {
		if _, err := m.in(ctx, mirror, "worktree", "prune"); err != nil {
			return fmt.Errorf("removing worktree of %s: %w", t.ID, err)
		}
	}
	if err := os.Remove(m.indexFile(t.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing index of %s: %w", t.ID, err)
	}
	return nil
}

// Prune deletes the refs and branches of every task this host's mirrors know whose newest
// checkpoint is older than before and that has no worktree here, in the mirror and on the remote.
// It returns the ids pruned.
func (m *Manager) Prune(ctx context.Context, before time.Time) ([]string, error) {
	mirrors, err := filepath.Glob(filepath.Join(m.mirrorRoot(), "*.git"))
	if err != nil {
		return nil, fmt.Errorf("pruning: %w", err)
	}
	var pruned []string
	for _, mirror := range mirrors {
		ids, err := m.pruneMirror(ctx, mirror, before)
		if err != nil {
			return pruned, err
		}
		pruned = append(pruned, ids...)
	}
	return pruned, nil
}

func (m *Manager) pruneMirror(ctx context.Context, mirror string, before time.Time) ([]string, error) {
	out, err := m.in(ctx, mirror, "for-each-ref", "--format=%(refname) %(committerdate:unix)", "refs/drover/tasks/")
	if err != nil {
		return nil, fmt.Errorf("pruning %s: %w", mirror, err)
	}
	newest, refs := map[string]int64{}, map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		name, date, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(name, "refs/drover/tasks/"), "/")
		sec, _ := strconv.ParseInt(date, 10, 64)
		newest[id] = max(newest[id], sec)
		refs[id] = append(refs[id], name)
	}
	var pruned []string
	for id, sec := range newest {
		if sec >= before.Unix() {
			continue
		}
		if _, err := os.Stat(m.Dir(id)); err == nil {
			continue
		}
		del := append(refs[id], "refs/heads/"+Branch(id))
		var stdin strings.Builder
		args := []string{"push", "--quiet", "--no-verify", "--", m.cfg.Remote}
		for _, r := range del {
			fmt.Fprintf(&stdin, "delete %s\n", r)
			args = append(args, ":"+r)
		}
		if _, err := m.git(ctx, cmd{dir: mirror, stdin: strings.NewReader(stdin.String()), args: []string{"update-ref", "--stdin"}}); err != nil {
			return pruned, fmt.Errorf("pruning task %s: %w", id, err)
		}
		if _, err := m.in(ctx, mirror, args[:len(args)-1]...); err != nil {
			return pruned, &UnreachableError{URL: m.cfg.Remote, Err: err}
		}
		pruned = append(pruned, id)
	}
	return pruned, nil
}

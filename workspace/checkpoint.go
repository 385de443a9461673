package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

func (m *Manager) indexFile(id string) string { return filepath.Join(m.indexRoot(), id) }

// worktree returns the task's worktree folder, or ErrNoWorktree.
func (m *Manager) worktree(id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	dir := m.Dir(id)
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		return "", fmt.Errorf("task %s: %w", id, ErrNoWorktree)
	}
	return dir, nil
}

// snapshot writes the worktree's files (untracked included, ignored left out) as a tree through
// the task's private index, so that the worktree's own index and branch are never touched, and
// returns the tree and the branch head.
func (m *Manager) snapshot(ctx context.Context, id, dir string) (tree, head string, err error) {
	idx := m.indexFile(id)
	if _, err := os.Stat(idx); errors.Is(err, os.ErrNotExist) {
		if err := m.seedIndex(ctx, dir, idx); err != nil {
			return "", "", err
		}
	}
	env := []string{"GIT_INDEX_FILE=" + idx}
	out, err := m.git(ctx, cmd{dir: dir, env: env, args: []string{"ls-files", "-z", "-m", "-d", "-o", "--exclude-standard"}})
	if err != nil {
		return "", "", fmt.Errorf("listing changed files: %w", err)
	}
	paths := dedupe(strings.Split(strings.TrimSuffix(out, "\x00"), "\x00"))
	if err := m.checkSizes(dir, paths); err != nil {
		return "", "", err
	}
	if len(paths) > 0 {
		list := strings.Join(paths, "\x00")
		_, err := m.git(ctx, cmd{dir: dir, env: env, stdin: strings.NewReader(list),
			args: []string{"add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"}})
		if err != nil {
			return "", "", fmt.Errorf("adding files: %w", err)
		}
	}
	out, err = m.git(ctx, cmd{dir: dir, env: env, args: []string{"write-tree"}})
	if err != nil {
		return "", "", fmt.Errorf("writing tree: %w", err)
	}
	head, err = m.in(ctx, dir, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", "", fmt.Errorf("reading HEAD: %w", err)
	}
	return strings.TrimSpace(out), head, nil
}

// seedIndex starts the private index as a copy of the worktree's own, whose file stats spare
// hashing every file again.
func (m *Manager) seedIndex(ctx context.Context, dir, idx string) error {
	own, err := m.in(ctx, dir, "rev-parse", "--path-format=absolute", "--git-path", "index")
	if err != nil {
		return fmt.Errorf("finding the worktree's index: %w", err)
	}
	src, err := os.Open(own)
	if err != nil {
		return fmt.Errorf("seeding the private index: %w", err)
	}
	defer src.Close()
	tmp := idx + ".tmp"
	dst, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("seeding the private index: %w", err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("seeding the private index: %w", err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("seeding the private index: %w", err)
	}
	return os.Rename(tmp, idx)
}

func dedupe(paths []string) []string {
	seen := make(map[string]bool, len(paths))
	out := paths[:0]
	for _, p := range paths {
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// checkSizes refuses a regular file over the limit among paths (relative to dir).
func (m *Manager) checkSizes(dir string, paths []string) error {
	for _, p := range paths {
		fi, err := os.Lstat(filepath.Join(dir, p))
		if err != nil {
			continue // deleted
		}
		if fi.Mode().IsRegular() && fi.Size() > m.cfg.MaxFileBytes {
			return &FileTooLargeError{Path: p, Size: fi.Size(), Limit: m.cfg.MaxFileBytes}
		}
	}
	return nil
}

// Checkpoint records the task's worktree after turn as a commit, without touching its branch or
// index: the commit's tree is every file not ignored, its first parent the branch head (so a
// commit the agent made itself stays in the history), its second the previous checkpoint. It is
// stored as refs/drover/tasks/<id>/turns/<turn> and .../last and pushed to the remote; the
// checkpoint is durable only when Checkpoint returns nil. It returns the commit.
func (m *Manager) Checkpoint(ctx context.Context, t Task, turn int, message string) (string, error) {
	dir, err := m.worktree(t.ID)
	if err != nil {
		return "", fmt.Errorf("checkpointing: %w", err)
	}
	tree, head, err := m.snapshot(ctx, t.ID, dir)
	if errors.Is(err, ErrDiskFull) {
		m.dropPartialObjects(ctx, dir)
	}
	if err != nil {
		return "", fmt.Errorf("checkpointing %s turn %d: %w", t.ID, turn, err)
	}
	prev, err := m.in(ctx, dir, "for-each-ref", "--format=%(objectname)", lastRef(t.ID))
	if err != nil {
		return "", fmt.Errorf("checkpointing %s: %w", t.ID, err)
	}
	args := []string{"commit-tree", tree, "-p", head}
	if prev != "" && prev != head {
		args = append(args, "-p", prev)
	}
	commit, err := m.git(ctx, cmd{dir: dir, stdin: strings.NewReader(message), args: append(args, "-F", "-")})
	if err != nil {
		return "", fmt.Errorf("checkpointing %s turn %d: %w", t.ID, turn, err)
	}
	commit = strings.TrimSpace(commit)
	refs := fmt.Sprintf("update %s %s\nupdate %s %s\n", turnRef(t.ID, turn), commit, lastRef(t.ID), commit)
	if _, err := m.git(ctx, cmd{dir: dir, stdin: strings.NewReader(refs), args: []string{"update-ref", "--stdin"}}); err != nil {
		return "", fmt.Errorf("checkpointing %s turn %d: %w", t.ID, turn, err)
	}
	if err := m.push(ctx, dir, turnRef(t.ID, turn), lastRef(t.ID)); err != nil {
		return "", fmt.Errorf("checkpointing %s turn %d: %w", t.ID, turn, err)
	}
	return commit, nil
}

// dropPartialObjects removes the temporary object files that a write cut short by a full disk
// leaves in the repository of dir, so that the space comes back for the retry. A write of another
// task on the same mirror at that moment may fail with it, and is retried the same way.
func (m *Manager) dropPartialObjects(ctx context.Context, dir string) {
	common, err := m.in(ctx, dir, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return
	}
	tmps, _ := filepath.Glob(filepath.Join(common, "objects", "*", "tmp_obj_*"))
	more, _ := filepath.Glob(filepath.Join(common, "objects", "pack", "tmp_*"))
	for _, f := range append(tmps, more...) {
		if err := os.Remove(f); err == nil {
			m.cfg.Logger.InfoContext(ctx, "removed a partial object after a full disk", "file", f)
		}
	}
}

// Restored is what Restore did.
type Restored struct {
	// Checkpoint is the commit the worktree now holds.
	Checkpoint string
	// Kept is the side ref that holds what the worktree had instead, with Files naming the
	// files that differed; empty when the worktree already held the checkpoint.
	Kept  string
	Files []string
}

// Restore puts the task's worktree back at turn's checkpoint (turn 0: the task's base): its
// files, its branch head, and no untracked file that is not ignored. Whatever the worktree held
// instead is first kept on refs/drover/tasks/<id>/kept/<n> (here and on the remote) and named
// in the result, never dropped. Ignored files (.env, build output) are left as they are.
func (m *Manager) Restore(ctx context.Context, t Task, turn int) (Restored, error) {
	dir, err := m.worktree(t.ID)
	if err != nil {
		return Restored{}, fmt.Errorf("restoring: %w", err)
	}
	cp, cpTree, cpHead, err := m.target(ctx, dir, t.ID, turn)
	if err != nil {
		return Restored{}, fmt.Errorf("restoring %s to turn %d: %w", t.ID, turn, err)
	}
	return m.restore(ctx, t, dir, cp, cpTree, cpHead)
}

// RestoreTo is Restore to a given checkpoint commit of the task (empty: its base), such as the
// one a caller recorded as committed, which may be older than the task's newest ref (a crash
// after a checkpoint was pushed and before the caller recorded it). A commit this host's mirror
// lacks (the task ran elsewhere since this worktree was made) is fetched from the remote first.
func (m *Manager) RestoreTo(ctx context.Context, t Task, commit string) (Restored, error) {
	dir, err := m.worktree(t.ID)
	if err != nil {
		return Restored{}, fmt.Errorf("restoring: %w", err)
	}
	cp, cpTree, cpHead, err := m.resolve(ctx, t, dir, commit)
	if err != nil {
		return Restored{}, fmt.Errorf("restoring %s to %s: %w", t.ID, commit, err)
	}
	return m.restore(ctx, t, dir, cp, cpTree, cpHead)
}

// resolve finds checkpoint commit of a task (empty: its base), fetching the task's refs from
// the remote when this host lacks it: the commit, its tree and the branch head it recorded.
func (m *Manager) resolve(ctx context.Context, t Task, dir, commit string) (cp, tree, head string, err error) {
	rev := commit
	if rev == "" {
		rev = baseRef(t.ID)
	}
	if strings.HasPrefix(rev, "-") {
		return "", "", "", fmt.Errorf("%q: %w", commit, ErrNoCheckpoint)
	}
	out, err := m.in(ctx, dir, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		if ferr := m.fetchTask(ctx, m.Mirror(t.Repo), t.ID); ferr != nil {
			return "", "", "", ferr
		}
		if out, err = m.in(ctx, dir, "rev-parse", "--verify", "--quiet", rev+"^{commit}"); err != nil {
			return "", "", "", fmt.Errorf("%q: %w", commit, ErrNoCheckpoint)
		}
	}
	cp = strings.TrimSpace(out)
	if tree, err = m.in(ctx, dir, "rev-parse", cp+"^{tree}"); err != nil {
		return "", "", "", fmt.Errorf("reading checkpoint %s: %w", cp, err)
	}
	if head, err = m.headOf(ctx, dir, t.ID, cp); err != nil {
		return "", "", "", err
	}
	return cp, strings.TrimSpace(tree), head, nil
}

// restore puts the worktree at dir back at checkpoint cp (tree cpTree, branch head cpHead),
// keeping what it held instead on a kept ref.
func (m *Manager) restore(ctx context.Context, t Task, dir, cp, cpTree, cpHead string) (Restored, error) {
	r := Restored{Checkpoint: cp}
	tree, head, err := m.snapshot(ctx, t.ID, dir)
	if err != nil {
		return r, fmt.Errorf("restoring %s: %w", t.ID, err)
	}
	if tree == cpTree && head == cpHead {
		return r, nil
	}
	if r.Kept, r.Files, err = m.keep(ctx, t.ID, dir, tree, head, cp); err != nil {
		return r, fmt.Errorf("restoring %s: %w", t.ID, err)
	}
	steps := [][]string{
		{"clean", "-f", "-d", "-q"},
		{"read-tree", "-u", "--reset", cp},
		{"reset", "--quiet", cpHead, "--"},
	}
	for _, s := range steps {
		if _, err := m.in(ctx, dir, s...); err != nil {
			return r, fmt.Errorf("restoring %s to %s: %w", t.ID, cp, err)
		}
	}
	return r, nil
}

// target resolves turn's checkpoint of a task: the commit, its tree and the branch head it
// recorded. Turn 0 is the task's base.
func (m *Manager) target(ctx context.Context, dir, id string, turn int) (cp, tree, head string, err error) {
	ref := turnRef(id, turn)
	if turn == 0 {
		ref = baseRef(id)
	}
	out, err := m.in(ctx, dir, "rev-parse", ref+"^{commit}", ref+"^{tree}")
	if err != nil {
		return "", "", "", fmt.Errorf("turn %d: %w", turn, ErrNoCheckpoint)
	}
	f := strings.Fields(out)
	cp, tree = f[0], f[1]
	if turn == 0 {
		return cp, tree, cp, nil
	}
	head, err = m.in(ctx, dir, "rev-parse", "--verify", cp+"^1")
	if err != nil {
		return "", "", "", fmt.Errorf("reading checkpoint %s: %w", cp, err)
	}
	return cp, tree, head, nil
}

// keep records tree (and head, when it moved) as a commit on the task's next kept ref, child of
// checkpoint cp, pushes it, and returns the ref and the files that differ from cp.
func (m *Manager) keep(ctx context.Context, id, dir, tree, head, cp string) (string, []string, error) {
	out, err := m.in(ctx, dir, "for-each-ref", "--format=%(refname)", refPrefix(id)+"kept/")
	if err != nil {
		return "", nil, fmt.Errorf("listing kept refs: %w", err)
	}
	n := 1
	for _, name := range strings.Fields(out) {
		k, _ := strconv.Atoi(name[strings.LastIndex(name, "/")+1:])
		n = max(n, k+1)
	}
	ref := fmt.Sprintf("%skept/%d", refPrefix(id), n)
	args := []string{"commit-tree", tree, "-p", cp}
	if cpHead, _ := m.in(ctx, dir, "rev-parse", cp+"^1"); head != cp && head != cpHead {
		args = append(args, "-p", head)
	}
	msg := fmt.Sprintf("drover: task %s: changes found in the worktree, not in checkpoint %s", id, cp)
	commit, err := m.git(ctx, cmd{dir: dir, stdin: strings.NewReader(msg), args: append(args, "-F", "-")})
	if err != nil {
		return "", nil, fmt.Errorf("keeping changes: %w", err)
	}
	commit = strings.TrimSpace(commit)
	if _, err := m.in(ctx, dir, "update-ref", ref, commit); err != nil {
		return "", nil, fmt.Errorf("keeping changes: %w", err)
	}
	files, err := m.in(ctx, dir, "diff-tree", "-r", "-z", "--name-only", "--no-renames", cp, commit)
	if err != nil {
		return "", nil, fmt.Errorf("listing kept changes: %w", err)
	}
	if err := m.push(ctx, dir, ref); err != nil {
		return ref, nil, fmt.Errorf("keeping changes: %w", err)
	}
	return ref, dedupe(strings.Split(files, "\x00")), nil
}

// Check compares the task's worktree with its newest checkpoint (or its base). A worktree that
// differs is a *ChangedError (ErrChangedByHand), its changes kept on a side ref; the worktree
// itself is left as it is, for the caller to checkpoint or restore.
func (m *Manager) Check(ctx context.Context, t Task) error {
	dir, err := m.worktree(t.ID)
	if err != nil {
		return fmt.Errorf("checking: %w", err)
	}
	cp, err := m.newest(ctx, dir, t.ID)
	if err != nil {
		return fmt.Errorf("checking %s: %w", t.ID, err)
	}
	cpTree, err := m.in(ctx, dir, "rev-parse", cp+"^{tree}")
	if err != nil {
		return fmt.Errorf("checking %s: %w", t.ID, err)
	}
	cpHead, err := m.headOf(ctx, dir, t.ID, cp)
	if err != nil {
		return fmt.Errorf("checking %s: %w", t.ID, err)
	}
	tree, head, err := m.snapshot(ctx, t.ID, dir)
	if err != nil {
		return fmt.Errorf("checking %s: %w", t.ID, err)
	}
	if tree == cpTree && head == cpHead {
		return nil
	}
	ref, files, err := m.keep(ctx, t.ID, dir, tree, head, cp)
	if err != nil {
		return fmt.Errorf("checking %s: %w", t.ID, err)
	}
	return &ChangedError{Task: t.ID, Ref: ref, Files: files}
}

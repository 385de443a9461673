package workspace

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// FileDiff is one file changed between two checkpoints.
type FileDiff struct {
	Path string
	// Added and Deleted count lines; both are 0 for a binary file.
	Added, Deleted int
	Binary         bool
}

// Diff is what changed between two checkpoints of a task.
type Diff struct {
	From, To string // commits
	Files    []FileDiff
	// Patch is the unified diff (binary files named, not shown); empty when asked for the
	// files only.
	Patch string
}

// diffArgs compares two commits as git shows them to a person, with nothing of the user's
// config (no external diff, no text conversion, no colour), renames as a delete and an add.
var diffArgs = []string{"diff-tree", "-r", "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color"}

// Diff compares the task's checkpoints of turns from and to (0: the task's base). With stat it
// lists the files only. It reads the host's mirror, so it works without a worktree once the
// task's refs are here (Ensure or Fetch).
func (m *Manager) Diff(ctx context.Context, t Task, from, to int, stat bool) (Diff, error) {
	if err := checkID(t.ID); err != nil {
		return Diff{}, fmt.Errorf("diffing: %w", err)
	}
	mirror := m.Mirror(t.Repo)
	var d Diff
	var err error
	if d.From, _, _, err = m.target(ctx, mirror, t.ID, from); err != nil {
		return d, fmt.Errorf("diffing %s: %w", t.ID, err)
	}
	if d.To, _, _, err = m.target(ctx, mirror, t.ID, to); err != nil {
		return d, fmt.Errorf("diffing %s: %w", t.ID, err)
	}
	out, err := m.in(ctx, mirror, append(diffArgs, "-z", "--numstat", d.From, d.To)...)
	if err != nil {
		return d, fmt.Errorf("diffing %s: %w", t.ID, err)
	}
	d.Files = parseNumstat(out)
	if !stat {
		if d.Patch, err = m.git(ctx, cmd{dir: mirror, args: append(diffArgs, "-p", d.From, d.To)}); err != nil {
			return d, fmt.Errorf("diffing %s: %w", t.ID, err)
		}
	}
	return d, nil
}

// parseNumstat reads `--numstat -z` output: "added\tdeleted\tpath\0" per file, "-\t-" for binary.
func parseNumstat(out string) []FileDiff {
	var files []FileDiff
	for _, rec := range strings.Split(out, "\x00") {
		parts := strings.SplitN(rec, "\t", 3)
		if len(parts) != 3 {
			continue
		}
		f := FileDiff{Path: parts[2], Binary: parts[0] == "-"}
		f.Added, _ = strconv.Atoi(parts[0])
		f.Deleted, _ = strconv.Atoi(parts[1])
		files = append(files, f)
	}
	return files
}

// Fork starts task dst from src's checkpoint of turn (0: src's base): dst's base is that
// checkpoint, so that dst's turns count from 1 and its diffs show its own work, and its worktree
// at Dir(dst), on its own branch drover/<dst>, starts there with the checkpoint's files (the
// agent's uncommitted work included, committed in the checkpoint). Both tasks work on src.Repo.
// It returns the checkpoint. dst's base is pushed, so that any host can take dst from there.
func (m *Manager) Fork(ctx context.Context, src Task, dst string, turn int) (string, error) {
	if err := checkID(dst); err != nil {
		return "", fmt.Errorf("forking: %w", err)
	}
	if _, err := os.Stat(m.Dir(dst)); err == nil {
		return "", fmt.Errorf("forking %s: the worktree of %s exists", src.ID, dst)
	}
	mirror := m.Mirror(src.Repo)
	if err := m.fetchTask(ctx, mirror, src.ID); err != nil {
		return "", fmt.Errorf("forking %s: %w", src.ID, err)
	}
	cp, _, _, err := m.target(ctx, mirror, src.ID, turn)
	if err != nil {
		return "", fmt.Errorf("forking %s: %w", src.ID, err)
	}
	if _, err := m.in(ctx, mirror, "update-ref", baseRef(dst), cp); err != nil {
		return "", fmt.Errorf("forking %s: %w", src.ID, err)
	}
	if err := m.push(ctx, mirror, baseRef(dst)); err != nil {
		return "", fmt.Errorf("forking %s: %w", src.ID, err)
	}
	if err := m.addWorktree(ctx, mirror, dst, cp, cp); err != nil {
		return "", err
	}
	return cp, nil
}

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

// Fork starts task dst from src's checkpoint of turn: dst gets src's base and turns 1..turn
// (so its next turn is turn+1), its own branch drover/<dst>, and its worktree at Dir(dst) with
// that checkpoint's files. Both tasks work on src.Repo. It returns the checkpoint.
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
	cp, _, head, err := m.target(ctx, mirror, src.ID, turn)
	if err != nil {
		return "", fmt.Errorf("forking %s: %w", src.ID, err)
	}
	var refs strings.Builder
	names := []string{baseRef(dst), lastRef(dst)}
	base, err := m.in(ctx, mirror, "rev-parse", "--verify", baseRef(src.ID))
	if err != nil {
		return "", fmt.Errorf("forking %s: %w", src.ID, err)
	}
	fmt.Fprintf(&refs, "update %s %s\nupdate %s %s\n", baseRef(dst), base, lastRef(dst), cp)
	for n := 1; n <= turn; n++ {
		c, _, _, err := m.target(ctx, mirror, src.ID, n)
		if err != nil {
			continue // a turn without a checkpoint
		}
		fmt.Fprintf(&refs, "update %s %s\n", turnRef(dst, n), c)
		names = append(names, turnRef(dst, n))
	}
	if _, err := m.git(ctx, cmd{dir: mirror, stdin: strings.NewReader(refs.String()), args: []string{"update-ref", "--stdin"}}); err != nil {
		return "", fmt.Errorf("forking %s: %w", src.ID, err)
	}
	if err := m.push(ctx, mirror, names...); err != nil {
		return "", fmt.Errorf("forking %s: %w", src.ID, err)
	}
	if err := m.addWorktree(ctx, mirror, dst, cp, head); err != nil {
		return "", err
	}
	return cp, nil
}

package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// ErrNotOurs: a publish would overwrite a branch that drover did not write, and force was not
// asked for.
var ErrNotOurs = errors.New("branch is not drover's")

// ErrNotManaged: the remote holds no base of the task: it runs in an unmanaged folder, or has not
// begun its first turn, or its checkpoints were pruned.
var ErrNotManaged = errors.New("no managed workspace")

// Stored names a task as the remote holds it, for reading its checkpoints (Fetch, Turns, Diff,
// Patch, Publish) on a host that does not run it: its mirror is the host's mirror of the remote,
// so no repository URL is needed.
func (m *Manager) Stored(id string) Task { return Task{ID: id, Repo: m.cfg.Remote} }

// Remote is the durable remote checkpoints are pushed to.
func (m *Manager) Remote() string { return m.cfg.Remote }

// Fetch brings the task's refs from the remote into the host's mirror of t.Repo (made when
// missing), dropping those the remote no longer has, so that Turns, Diff and Patch read what any
// host has pushed.
func (m *Manager) Fetch(ctx context.Context, t Task) error {
	if err := checkID(t.ID); err != nil {
		return fmt.Errorf("fetching: %w", err)
	}
	mirror := m.Mirror(t.Repo)
	defer m.lockMirror(mirror)()
	if _, err := os.Stat(mirror); errors.Is(err, os.ErrNotExist) {
		if err := m.initMirror(ctx, mirror); err != nil {
			return err
		}
	}
	spec := "+" + refPrefix(t.ID) + "*:" + refPrefix(t.ID) + "*"
	if _, err := m.in(ctx, mirror, "fetch", "--quiet", "--prune", "--no-write-fetch-head", "--", m.cfg.Remote, spec); err != nil {
		if errors.Is(err, ErrDiskFull) || ctx.Err() != nil {
			return fmt.Errorf("fetching task %s: %w", t.ID, err)
		}
		return &UnreachableError{URL: m.cfg.Remote, Err: err}
	}
	return nil
}

// Turns lists, in order, the turns of the task that have a checkpoint in the host's mirror of
// t.Repo. A task with no base there (not a managed task, or not fetched) is ErrNotManaged.
func (m *Manager) Turns(ctx context.Context, t Task) ([]int, error) {
	if err := checkID(t.ID); err != nil {
		return nil, fmt.Errorf("listing turns: %w", err)
	}
	mirror := m.Mirror(t.Repo)
	if _, err := os.Stat(mirror); err != nil {
		return nil, fmt.Errorf("task %s: %w", t.ID, ErrNotManaged)
	}
	out, err := m.in(ctx, mirror, "for-each-ref", "--format=%(refname)", baseRef(t.ID), refPrefix(t.ID)+"turns/")
	if err != nil {
		return nil, fmt.Errorf("listing turns of %s: %w", t.ID, err)
	}
	names := strings.Fields(out)
	if !slices.Contains(names, baseRef(t.ID)) {
		return nil, fmt.Errorf("task %s: %w", t.ID, ErrNotManaged)
	}
	turns := []int{}
	for _, name := range names {
		if n, err := strconv.Atoi(strings.TrimPrefix(name, refPrefix(t.ID)+"turns/")); err == nil {
			turns = append(turns, n)
		}
	}
	slices.Sort(turns)
	return turns, nil
}

// Patch is the unified diff of the one file at path between the task's checkpoints of turns from
// and to (0: the base), binary files named and not shown.
func (m *Manager) Patch(ctx context.Context, t Task, from, to int, path string) (string, error) {
	if err := checkID(t.ID); err != nil {
		return "", fmt.Errorf("diffing: %w", err)
	}
	mirror := m.Mirror(t.Repo)
	a, _, _, err := m.target(ctx, mirror, t.ID, from)
	if err != nil {
		return "", fmt.Errorf("diffing %s: %w", t.ID, err)
	}
	b, _, _, err := m.target(ctx, mirror, t.ID, to)
	if err != nil {
		return "", fmt.Errorf("diffing %s: %w", t.ID, err)
	}
	out, err := m.git(ctx, cmd{dir: mirror, args: append(diffArgs, "-p", a, b, "--", path)})
	if err != nil {
		return "", fmt.Errorf("diffing %s: %w", t.ID, err)
	}
	return out, nil
}

// Published is what Publish pushed.
type Published struct {
	Commit string // the checkpoint
	Turn   int    // its turn (0: the base, before any checkpoint)
	Ref    string // refs/heads/<branch> on the destination
}

// Publish pushes the task's newest checkpoint (its files, committed or not, in one commit whose
// first parent is the branch head the agent left) to url as branch, for a person to review. The
// push fast-forwards; it replaces the branch's commit otherwise only when force is set or the
// branch is the task's own (drover/<id>). A refused push is ErrNotOurs.
func (m *Manager) Publish(ctx context.Context, t Task, url, branch string, force bool) (Published, error) {
	if err := checkID(t.ID); err != nil {
		return Published{}, fmt.Errorf("publishing: %w", err)
	}
	if url == "" || strings.HasPrefix(url, "-") || strings.HasPrefix(branch, "-") {
		return Published{}, fmt.Errorf("publishing %s: want a remote and a branch, got %q %q", t.ID, url, branch)
	}
	mirror := m.Mirror(t.Repo)
	ref := "refs/heads/" + strings.TrimPrefix(branch, "refs/heads/")
	if _, err := m.in(ctx, mirror, "check-ref-format", ref); err != nil {
		return Published{}, fmt.Errorf("publishing %s: %q is not a branch name", t.ID, branch)
	}
	turns, err := m.Turns(ctx, t)
	if err != nil {
		return Published{}, fmt.Errorf("publishing: %w", err)
	}
	p := Published{Ref: ref}
	if len(turns) > 0 {
		p.Turn = turns[len(turns)-1]
	}
	if p.Commit, _, _, err = m.target(ctx, mirror, t.ID, p.Turn); err != nil {
		return p, fmt.Errorf("publishing %s: %w", t.ID, err)
	}
	spec := p.Commit + ":" + ref
	if force || ref == "refs/heads/"+Branch(t.ID) {
		spec = "+" + spec
	}
	if _, err := m.in(ctx, mirror, "push", "--no-verify", "--", url, spec); err != nil {
		var ge *GitError
		if errors.As(err, &ge) && strings.Contains(ge.Stderr, "[rejected]") {
			return p, fmt.Errorf("publishing %s to %s %s: the branch holds commits the task's work does not contain (%w); push with force to replace them", t.ID, url, branch, ErrNotOurs)
		}
		if errors.Is(err, ErrDiskFull) || ctx.Err() != nil {
			return p, fmt.Errorf("publishing %s: %w", t.ID, err)
		}
		return p, &UnreachableError{URL: url, Err: err}
	}
	return p, nil
}

// TurnRange is the pair of checkpoints a task's diff compares, given the turns that have one
// (Turns): for the whole task (turn 0), the base (0) and the newest; for one turn, the newest
// before it (or the base) and the turn's own, ErrNoCheckpoint when it has none.
func TurnRange(turns []int, turn int) (from, to int, err error) {
	if turn == 0 {
		if len(turns) > 0 {
			to = turns[len(turns)-1]
		}
		return 0, to, nil
	}
	i := slices.Index(turns, turn)
	if i < 0 {
		return 0, 0, fmt.Errorf("turn %d: %w", turn, ErrNoCheckpoint)
	}
	if i > 0 {
		from = turns[i-1]
	}
	return from, turn, nil
}

// TaskDiff is what a task's work changed, as read from the remote: the turns whose checkpoint
// counts, the pair of them compared (TurnRange) and their Diff.
type TaskDiff struct {
	Turns            []int
	FromTurn, ToTurn int
	Diff
}

// ReadTaskDiff fetches task id's checkpoints from the remote, keeps the turns committed keeps (nil:
// every one the remote holds), and compares the whole task (turn 0) or the one turn (TurnRange),
// without the patch when stat. On an error after the fetch, what was read so far comes with it.
func (m *Manager) ReadTaskDiff(ctx context.Context, id string, turn int, stat bool,
	committed func(ctx context.Context, turns []int) ([]int, error)) (TaskDiff, error) {
	var d TaskDiff
	t := m.Stored(id)
	if err := m.Fetch(ctx, t); err != nil {
		return d, err
	}
	turns, err := m.Turns(ctx, t)
	if err != nil {
		return d, err
	}
	if committed != nil {
		if turns, err = committed(ctx, turns); err != nil {
			return d, err
		}
	}
	d.Turns = turns
	if d.FromTurn, d.ToTurn, err = TurnRange(turns, turn); err != nil {
		return d, fmt.Errorf("task %s: %w", id, err)
	}
	d.Diff, err = m.Diff(ctx, t, d.FromTurn, d.ToTurn, stat)
	return d, err
}

// Rewound is what Rewind did.
type Rewound struct {
	// Checkpoint is the turn's checkpoint, now the task's newest.
	Checkpoint string
	// Set names the refs under which the later turns' checkpoints are kept
	// (refs/drover/tasks/<id>/rewound/<k>/), empty when there were none.
	Set string
	// Turns are the later turns set aside.
	Turns []int
}

// Rewind makes turn's checkpoint the task's newest, in the mirror of t.Repo and on the remote:
// the checkpoints of later turns move to refs/drover/tasks/<id>/rewound/<k>/turns/<n> (kept,
// never deleted), and last names turn's checkpoint, so that the task's next turn starts from it
// (Ensure on a new host, Diff of the next turn) and Turns no longer lists them. It reads the
// remote first. The worktree is left alone: Restore puts it back.
func (m *Manager) Rewind(ctx context.Context, t Task, turn int) (Rewound, error) {
	if err := m.Fetch(ctx, t); err != nil {
		return Rewound{}, fmt.Errorf("rewinding: %w", err)
	}
	turns, err := m.Turns(ctx, t)
	if err != nil {
		return Rewound{}, fmt.Errorf("rewinding: %w", err)
	}
	mirror := m.Mirror(t.Repo)
	var r Rewound
	if r.Checkpoint, _, _, err = m.target(ctx, mirror, t.ID, turn); err != nil {
		return r, fmt.Errorf("rewinding %s: %w", t.ID, err)
	}
	k, err := m.nextRewoundSet(ctx, mirror, t.ID)
	if err != nil {
		return r, err
	}
	set := fmt.Sprintf("%srewound/%d/", refPrefix(t.ID), k)
	var stdin strings.Builder
	fmt.Fprintf(&stdin, "update %s %s\n", lastRef(t.ID), r.Checkpoint)
	push := []string{"push", "--quiet", "--no-verify", "--atomic", "--", m.cfg.Remote, "+" + r.Checkpoint + ":" + lastRef(t.ID)}
	for _, n := range turns {
		if n <= turn {
			continue
		}
		c, _, _, err := m.target(ctx, mirror, t.ID, n)
		if err != nil {
			return r, fmt.Errorf("rewinding %s: %w", t.ID, err)
		}
		to := fmt.Sprintf("%sturns/%d", set, n)
		fmt.Fprintf(&stdin, "create %s %s\ndelete %s %s\n", to, c, turnRef(t.ID, n), c)
		push = append(push, c+":"+to, ":"+turnRef(t.ID, n))
		r.Turns = append(r.Turns, n)
	}
	if len(r.Turns) > 0 {
		r.Set = set
	}
	if _, err := m.git(ctx, cmd{dir: mirror, stdin: strings.NewReader(stdin.String()), args: []string{"update-ref", "--stdin"}}); err != nil {
		return r, fmt.Errorf("rewinding %s: %w", t.ID, err)
	}
	if _, err := m.in(ctx, mirror, push...); err != nil {
		if errors.Is(err, ErrDiskFull) || ctx.Err() != nil {
			return r, fmt.Errorf("rewinding %s: %w", t.ID, err)
		}
		return r, &UnreachableError{URL: m.cfg.Remote, Err: err}
	}
	return r, nil
}

// nextRewoundSet is the number of the task's next set of rewound checkpoints.
func (m *Manager) nextRewoundSet(ctx context.Context, mirror, id string) (int, error) {
	out, err := m.in(ctx, mirror, "for-each-ref", "--format=%(refname)", refPrefix(id)+"rewound/")
	if err != nil {
		return 0, fmt.Errorf("listing rewound checkpoints of %s: %w", id, err)
	}
	k := 1
	for _, name := range strings.Fields(out) {
		rest := strings.TrimPrefix(name, refPrefix(id)+"rewound/")
		if n, err := strconv.Atoi(rest[:max(0, strings.Index(rest, "/"))]); err == nil {
			k = max(k, n+1)
		}
	}
	return k, nil
}

package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/drover-run/drover/internal/bench"
	"github.com/drover-run/drover/workspace"
)

// The workspace figures: a generated repository of wFiles files of wFileBytes each, a turn that
// changes wTurnFiles of them.
const (
	wFiles          = 10000
	wQuickFiles     = 1000
	wFileBytes      = 10000
	wTurnFiles      = 10
	wCheckpointGoal = 150 // ms
	wRestoreGoal    = 1000
	wNewHostGoal    = 1.2
)

// wFigures are W1 (a turn's checkpoint and push), W2 (restore of a retried attempt) and W3 (a new
// host's first worktree of a moved task ÷ a plain git clone), measured on one repository that the
// first of them to run builds.
func wFigures() []bench.Figure {
	var shared *wBench
	setup := func(ctx context.Context, env *bench.Env) (*wBench, error) {
		if shared != nil {
			return shared, nil
		}
		files := wFiles
		if env.Quick {
			files = wQuickFiles
		}
		env.Logf("W: a repository of %d files of %d bytes", files, wFileBytes)
		w, err := newWBench(ctx, filepath.Join(env.Dir, "w"), files)
		shared = w
		return w, err
	}
	figure := func(id, what string, goal bench.Goal, pairs int, base, subj func(*wBench) func(context.Context) (bench.Sample, error)) bench.Figure {
		return bench.Figure{ID: id, What: what, Goal: goal, Measure: func(ctx context.Context, env *bench.Env) ([]bench.Row, error) {
			w, err := setup(ctx, env)
			if err != nil {
				return nil, err
			}
			runs := pairs
			if env.Quick {
				runs = min(pairs, env.Runs)
			}
			b, s, err := bench.Interleave(ctx, runs, base(w), subj(w))
			if err != nil {
				return nil, err
			}
			ms := func(s []bench.Sample) float64 { return bench.Median(bench.Seconds(s)) * 1000 }
			return []bench.Row{{Figure: id, What: what, Unit: "ms", Baseline: ms(b), Drover: ms(s),
				Ratio: 1 / bench.Median(bench.WallRatios(b, s)), Runs: runs, Goal: goal,
				Note: fmt.Sprintf("%d files, %d MB, %d changed a turn", w.files, w.files*wFileBytes/1e6, wTurnFiles)}}, nil
		}}
	}
	return []bench.Figure{
		figure("W1", "checkpoint + push added to a turn, p50 (baseline: git add -A + commit)",
			bench.DroverAtMost(wCheckpointGoal, "ms"), 9,
			func(w *wBench) func(context.Context) (bench.Sample, error) { return w.plainCommit },
			func(w *wBench) func(context.Context) (bench.Sample, error) { return w.checkpoint }),
		figure("W2", "restore of a retried attempt (baseline: git reset --hard + clean)",
			bench.DroverAtMost(wRestoreGoal, "ms"), 5,
			func(w *wBench) func(context.Context) (bench.Sample, error) { return w.plainReset },
			func(w *wBench) func(context.Context) (bench.Sample, error) { return w.restore }),
		figure("W3", "a new host's first worktree of a moved task ÷ git clone --no-local",
			bench.RatioAtMost(wNewHostGoal), 3,
			func(w *wBench) func(context.Context) (bench.Sample, error) { return w.plainClone },
			func(w *wBench) func(context.Context) (bench.Sample, error) { return w.newHost }),
	}
}

// wBench is the repository and the two sides of the workspace figures.
type wBench struct {
	files              int
	dir, origin, clone string
	m                  *workspace.Manager
	task               workspace.Task
	turn               int
}

// wGit runs git with no user or system config.
func wGit(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@localhost",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@localhost"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %v: %w: %s", args, err, out)
	}
	return nil
}

// newWBench writes the repository, a plain clone of it, and a task's worktree with one
// checkpoint made (the first push carries the whole history; later turns carry their own).
func newWBench(ctx context.Context, dir string, files int) (*wBench, error) {
	w := &wBench{files: files, dir: dir, origin: filepath.Join(dir, "origin"), clone: filepath.Join(dir, "clone")}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, wFileBytes/2)
	for i := range files {
		p := filepath.Join(w.origin, fmt.Sprintf("d%03d/s%d/f%05d.txt", i/100, i/10%10, i))
		for j := range buf {
			buf[j] = byte(rng.Uint32())
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(hex.EncodeToString(buf)), 0o644); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(w.origin, ".gitignore"), []byte(".env\nbuild/\n"), 0o644); err != nil {
		return nil, err
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "base"}} {
		if err := wGit(ctx, w.origin, args...); err != nil {
			return nil, err
		}
	}
	if err := wGit(ctx, dir, "clone", "-q", "--no-local", w.origin, w.clone); err != nil {
		return nil, err
	}
	m, err := workspace.New(ctx, workspace.Config{Root: filepath.Join(dir, "host0", "work"), StateDir: filepath.Join(dir, "host0", "state")})
	if err != nil {
		return nil, err
	}
	w.m, w.task = m, workspace.Task{ID: "bench", Repo: w.origin}
	if _, err := m.Prepare(ctx, w.task, "main"); err != nil {
		return nil, err
	}
	return w, w.change(w.m.Dir(w.task.ID), 0)
}

// change appends a line to wTurnFiles files of the tree at dir.
func (w *wBench) change(dir string, turn int) error {
	for i := range wTurnFiles {
		n := (i*997 + turn*31) % wQuickFiles
		p := filepath.Join(dir, fmt.Sprintf("d%03d/s%d/f%05d.txt", n/100, n/10%10, n))
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(f, "turn %d\n", turn)
		if err := errorsJoin(err, f.Close()); err != nil {
			return err
		}
	}
	return nil
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func timed(f func() error) (bench.Sample, error) {
	start := time.Now()
	err := f()
	return bench.Sample{Wall: time.Since(start)}, err
}

func (w *wBench) checkpoint(ctx context.Context) (bench.Sample, error) {
	w.turn++
	s, err := timed(func() error {
		_, err := w.m.Checkpoint(ctx, w.task, w.turn, fmt.Sprintf("turn %d", w.turn))
		return err
	})
	if err != nil {
		return s, err
	}
	return s, w.change(w.m.Dir(w.task.ID), w.turn)
}

func (w *wBench) plainCommit(ctx context.Context) (bench.Sample, error) {
	if err := w.change(w.clone, w.turn+1000); err != nil {
		return bench.Sample{}, err
	}
	return timed(func() error {
		if err := wGit(ctx, w.clone, "add", "-A"); err != nil {
			return err
		}
		return wGit(ctx, w.clone, "commit", "-q", "-m", "turn")
	})
}

// attempt leaves what a failed attempt leaves: changed files and a stray one.
func (w *wBench) attempt(dir string) error {
	if err := w.change(dir, 5000); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "stray.txt"), []byte("stray\n"), 0o644)
}

func (w *wBench) restore(ctx context.Context) (bench.Sample, error) {
	if err := w.attempt(w.m.Dir(w.task.ID)); err != nil {
		return bench.Sample{}, err
	}
	return timed(func() error {
		_, err := w.m.Restore(ctx, w.task, w.turn)
		return err
	})
}

func (w *wBench) plainReset(ctx context.Context) (bench.Sample, error) {
	if err := w.attempt(w.clone); err != nil {
		return bench.Sample{}, err
	}
	return timed(func() error {
		if err := wGit(ctx, w.clone, "reset", "-q", "--hard"); err != nil {
			return err
		}
		return wGit(ctx, w.clone, "clean", "-f", "-d", "-q")
	})
}

// newHost makes a host with its own folders and the first host's remote, and times its first
// worktree of the task.
func (w *wBench) newHost(ctx context.Context) (bench.Sample, error) {
	host := filepath.Join(w.dir, fmt.Sprintf("host%d", time.Now().UnixNano()))
	defer os.RemoveAll(host)
	m, err := workspace.New(ctx, workspace.Config{Root: filepath.Join(host, "work"), StateDir: filepath.Join(host, "state"),
		Remote: filepath.Join(w.dir, "host0", "state", "remote.git")})
	if err != nil {
		return bench.Sample{}, err
	}
	return timed(func() error {
		_, err := m.Ensure(ctx, w.task)
		return err
	})
}

func (w *wBench) plainClone(ctx context.Context) (bench.Sample, error) {
	dst := filepath.Join(w.dir, fmt.Sprintf("clone%d", time.Now().UnixNano()))
	defer os.RemoveAll(dst)
	return timed(func() error { return wGit(ctx, w.dir, "clone", "-q", "--no-local", w.origin, dst) })
}

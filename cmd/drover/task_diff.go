package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/workspace"
)

// taskDiff is what drover task diff -o json prints.
type taskDiff struct {
	TaskID   string               `json:"task_id"`
	Turn     int                  `json:"turn,omitempty"`
	FromTurn int                  `json:"from_turn"`
	ToTurn   int                  `json:"to_turn"`
	From     string               `json:"from"`
	To       string               `json:"to"`
	Turns    []int                `json:"turns"`
	Files    []workspace.FileDiff `json:"files"`
	Patch    string               `json:"patch,omitempty"`
}

func newTaskDiffCommand(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "diff TASK",
		Short: "Print what a managed task changed: all of it, or one turn",
		Long: `Print what a managed task (one started with --repo) changed, as a unified diff: the
whole task (its base to its newest checkpoint), or with --turn N the turn alone (the
checkpoint before it, or the base, to turn N's). With --stat, the files and their
lines added and deleted. Binary files are named, not shown. It reads the checkpoints
from the durable remote the workers push to, so it needs no worker and no worktree.`,
		Example: `  drover task diff fix-login
  drover task diff fix-login --turn 2 --stat`,
		Args: taskArg,
	}
	out := addOutputFlags(c, true)
	view := addWorkspaceViewFlags(c, a)
	var turn int
	var stat bool
	c.Flags().IntVar(&turn, "turn", 0, "show this turn alone (0: the whole task)")
	c.Flags().BoolVar(&stat, "stat", false, "the files and their lines added and deleted, no patch")
	c.RunE = func(c *cobra.Command, args []string) error {
		if turn < 0 {
			return usageErrorf(c, "--turn is a turn number, at least 1 (0: the whole task)")
		}
		ctx := c.Context()
		m, err := a.workspaceView(ctx, view)
		if err != nil {
			return err
		}
		d, err := a.readDiff(ctx, m, args[0], turn, stat)
		if err != nil {
			return err
		}
		if out.isJSON() {
			return writeJSON(a.stdout, d)
		}
		if stat {
			return printStat(a.stdout, d)
		}
		_, err = io.WriteString(a.stdout, d.Patch)
		return err
	}
	return c
}

// readDiff fetches the task's checkpoints from the remote and compares them: the whole task
// (turn 0, up to its last committed checkpoint) or one turn.
func (a *app) readDiff(ctx context.Context, m *workspace.Manager, id string, turn int, stat bool) (taskDiff, error) {
	wd, err := m.ReadTaskDiff(ctx, id, turn, stat, func(ctx context.Context, turns []int) ([]int, error) {
		return a.committedTurns(ctx, id, turns)
	})
	d := taskDiff{TaskID: id, Turn: turn, Turns: wd.Turns, FromTurn: wd.FromTurn, ToTurn: wd.ToTurn}
	if err != nil {
		return d, err
	}
	d.From, d.To, d.Files, d.Patch = wd.From, wd.To, wd.Files, wd.Patch
	if d.Files == nil {
		d.Files = []workspace.FileDiff{}
	}
	return d, nil
}

// printStat prints the files a diff changes, one a line, and a total.
func printStat(w io.Writer, d taskDiff) error {
	what := "the whole task"
	if d.Turn > 0 {
		what = fmt.Sprintf("turn %d", d.Turn)
	}
	fmt.Fprintf(w, "task %s, %s (%s..%s):\n", d.TaskID, what, short(d.From), short(d.To))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var added, deleted int
	for _, f := range d.Files {
		if f.Binary {
			fmt.Fprintf(tw, "  %s\tbinary\n", f.Path)
			continue
		}
		added, deleted = added+f.Added, deleted+f.Deleted
		fmt.Fprintf(tw, "  %s\t+%d\t-%d\n", f.Path, f.Added, f.Deleted)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d file(s) changed, %d line(s) added, %d deleted\n", len(d.Files), added, deleted)
	return err
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return strings.TrimSpace(commit)
}

// committedTurns keeps the turns whose checkpoint Postgres committed (store.CommittedTurns).
// Without Postgres it says so and keeps them all: the remote alone is enough to read a diff.
func (a *app) committedTurns(ctx context.Context, id string, turns []int) ([]int, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	pool, err := store.Connect(cctx, a.env.databaseURL)
	if err == nil {
		defer pool.Close()
		var kept []int
		if kept, err = store.CommittedTurns(cctx, pool, id, turns); err == nil {
			return kept, nil
		}
	}
	fmt.Fprintf(a.stderr, "drover: not checking which checkpoints Postgres committed (%v); showing every one the remote holds\n", err)
	return turns, nil
}

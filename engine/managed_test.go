package engine_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/testkit/fakecli"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/workspace"
)

// managedRig is a rig whose task is managed: it works on a repository of the test's, in a
// worktree of a workspace.Manager whose files may be at most maxFile bytes. The script's prompt
// handler gets the worktree's folder.
func managedRig(t *testing.T, maxFile int64, onPrompt func(dir string, c *fakecli.CLI, p fakecli.Line)) (*rig, *workspace.Manager, string) {
	t.Helper()
	origin := filepath.Join(t.TempDir(), "origin")
	git(t, "", "init", "-q", "-b", "main", origin)
	if err := os.WriteFile(filepath.Join(origin, "README"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, origin, "add", "README")
	git(t, origin, "commit", "-q", "-m", "first")
	m, err := workspace.New(t.Context(), workspace.Config{Root: t.TempDir(), StateDir: t.TempDir(), MaxFileBytes: maxFile})
	if err != nil {
		t.Fatal(err)
	}
	var r *rig
	r = newRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) { onPrompt(m.Dir(r.taskID), c, p) })
	}, func(c *engine.Config) { c.Workspaces = m })
	return r, m, origin
}

// git runs the real git, the tests' witness.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// managedReq is r's request for a turn of the managed task on origin.
func managedReq(r *rig, origin string, turn, attempt int) engine.Request {
	req := r.req(turn, attempt, "write the file")
	req.Workspace, req.Repo = "", origin
	return req
}

// TestManagedTurnIsCommittedWithItsCheckpoint: what the turn wrote in its worktree is the turn's
// checkpoint on the remote (git shows the file), and the same commit is in the result, the
// turn's record, the executor row and the turn's complete event.
func TestManagedTurnIsCommittedWithItsCheckpoint(t *testing.T) {
	t.Parallel()
	r, m, origin := managedRig(t, 0, func(dir string, c *fakecli.CLI, p fakecli.Line) {
		if err := os.WriteFile(filepath.Join(dir, "out.txt"), []byte("written by the turn\n"), 0o644); err != nil {
			panic(err)
		}
		c.Reply("wrote it")
	})
	res, e := r.run(managedReq(r, origin, 1, 1))
	if e != nil {
		t.Fatal(e)
	}
	remote := filepath.Join(filepath.Dir(m.Mirror(origin)), "..", "remote.git")
	if got := git(t, remote, "show", res.Checkpoint+":out.txt"); got != "written by the turn" {
		t.Fatalf("the checkpoint %q holds out.txt %q", res.Checkpoint, got)
	}
	if got := git(t, remote, "rev-parse", "refs/drover/tasks/"+r.taskID+"/turns/1"); got != res.Checkpoint {
		t.Errorf("the remote's turns/1 is %s, the result's checkpoint %s", got, res.Checkpoint)
	}
	if rec, x := r.turn(1), r.executor(); rec.Checkpoint != res.Checkpoint || x.Checkpoint != res.Checkpoint || x.CheckpointTurn != 1 {
		t.Errorf("turn record %q, executor row (%q, %d); want %s of turn 1", rec.Checkpoint, x.Checkpoint, x.CheckpointTurn, res.Checkpoint)
	}
	var seen bool
	for _, ev := range r.events() {
		if ev.Type == events.TypeComplete && ev.Data != nil && ev.Data.Completion != nil {
			seen = ev.Data.Completion.Checkpoint == res.Checkpoint
		}
	}
	if !seen {
		t.Error("the turn's complete event does not carry its checkpoint")
	}
}

// TestTurnIsNotCommittedWithoutItsCheckpoint: a file over the limit fails the checkpoint; the
// attempt fails as FileTooLarge, not retryable, naming the file, and the turn is not committed:
// no checkpoint on its record, the executor row's or the remote.
func TestTurnIsNotCommittedWithoutItsCheckpoint(t *testing.T) {
	t.Parallel()
	r, m, origin := managedRig(t, 1024, func(dir string, c *fakecli.CLI, p fakecli.Line) {
		if err := os.WriteFile(filepath.Join(dir, "big.bin"), make([]byte, 4096), 0o644); err != nil {
			panic(err)
		}
		c.Reply("wrote a big file")
	})
	_, e := r.run(managedReq(r, origin, 1, 1))
	if e == nil || e.Type != task.ErrTypeFileTooLarge || e.Retryable() || !strings.Contains(e.Error(), "big.bin") {
		t.Fatalf("RunTurn = %v, want a FileTooLarge failure naming big.bin, not retryable", e)
	}
	if rec := r.turn(1); rec.Status == task.TurnCompleted || rec.Checkpoint != "" {
		t.Errorf("the turn's record: %+v; want it not committed", rec)
	}
	if x := r.executor(); x.Checkpoint != "" {
		t.Errorf("the executor row has checkpoint %q", x.Checkpoint)
	}
	remote := filepath.Join(filepath.Dir(m.Mirror(origin)), "..", "remote.git")
	if out := git(t, remote, "for-each-ref", "refs/drover/tasks/"+r.taskID+"/turns/"); out != "" {
		t.Errorf("the remote has checkpoints of the turn: %s", out)
	}
}

// TestHandEditsBetweenTurnsAreKeptAndRestored: a file changed by hand between two turns is kept
// on a side ref (on the remote, with the person's content), named in a workspace_restored event
// of cause changed_by_hand, and the next turn runs on the files of the last checkpoint, as its
// conversation saw them.
func TestHandEditsBetweenTurnsAreKeptAndRestored(t *testing.T) {
	t.Parallel()
	var seen []string // out.txt as the CLI found it at each prompt
	r, m, origin := managedRig(t, 0, func(dir string, c *fakecli.CLI, p fakecli.Line) {
		b, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
		seen = append(seen, string(b))
		if len(seen) == 1 {
			if err := os.WriteFile(filepath.Join(dir, "out.txt"), []byte("by the agent\n"), 0o644); err != nil {
				panic(err)
			}
		}
		c.Reply("done")
	})
	res1, e := r.run(managedReq(r, origin, 1, 1))
	if e != nil {
		t.Fatal(e)
	}
	if err := os.WriteFile(filepath.Join(m.Dir(r.taskID), "out.txt"), []byte("by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	req := managedReq(r, origin, 2, 1)
	req.Prompt.Text = "go on"
	if _, e := r.run(req); e != nil {
		t.Fatal(e)
	}
	if len(seen) != 2 || seen[1] != "by the agent\n" {
		t.Fatalf("turn 2's CLI found out.txt %q, want turn 1's checkpoint", seen)
	}
	var ws *events.WorkspaceRestore
	for _, ev := range r.events() {
		if ev.Type == events.TypeWorkspaceRestored {
			ws = ev.Workspace
		}
	}
	if ws == nil || ws.Cause != events.RestoredChangedByHand || ws.Checkpoint != res1.Checkpoint || ws.Turn != 1 ||
		len(ws.Files) != 1 || ws.Files[0] != "out.txt" || ws.Kept == "" {
		t.Fatalf("workspace_restored: %+v", ws)
	}
	remote := filepath.Join(filepath.Dir(m.Mirror(origin)), "..", "remote.git")
	if got := git(t, remote, "show", ws.Kept+":out.txt"); got != "by hand" {
		t.Errorf("the kept ref %s holds out.txt %q, want the person's", ws.Kept, got)
	}
}

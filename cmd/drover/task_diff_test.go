package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover/internal/testkit/gittest"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/workspace"
)

// gitOut runs git as a person would: the witness.
func gitOut(t *testing.T, dir string, args ...string) string { return gittest.Run(t, dir, args...) }

// A task of two turns, checkpointed by a worker's manager to remote.
func twoTurnTask(t *testing.T, id string) (remote string) {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "origin")
	gitOut(t, t.TempDir(), "init", "-q", "-b", "main", repo)
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "base")
	remote = filepath.Join(t.TempDir(), "remote.git")
	gitOut(t, t.TempDir(), "init", "-q", "--bare", remote)
	base := t.TempDir()
	ctx := context.Background()
	m, err := workspace.New(ctx, workspace.Config{Root: filepath.Join(base, "w"), StateDir: filepath.Join(base, "s"), Remote: remote})
	if err != nil {
		t.Fatal(err)
	}
	task := workspace.Task{ID: id, Repo: repo}
	if _, err := m.Prepare(ctx, task, ""); err != nil {
		t.Fatal(err)
	}
	for turn, content := range []string{"one\ntwo\n", "one\ntwo\nthree\n"} {
		if err := os.WriteFile(filepath.Join(m.Dir(id), "a.txt"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(m.Dir(id), "new.bin"), []byte{0, byte(turn)}, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Checkpoint(ctx, task, turn+1, "turn"); err != nil {
			t.Fatal(err)
		}
	}
	return remote
}

// drover task diff prints what git diff prints between the task's checkpoints on the remote,
// with no worker, Temporal or Postgres.
func TestTaskDiffPrintsWhatGitPrints(t *testing.T) {
	remote := twoTurnTask(t, "t1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("DROVER_WORKSPACE_REMOTE", remote)
	ref := func(n string) string { return "refs/drover/tasks/t1/" + n }
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"task", "diff", "t1"}, gitOut(t, remote, "diff", ref("base"), ref("turns/2"))},
		{[]string{"task", "diff", "t1", "--turn", "2"}, gitOut(t, remote, "diff", ref("turns/1"), ref("turns/2"))},
		{[]string{"task", "diff", "--turn", "1", "t1"}, gitOut(t, remote, "diff", ref("base"), ref("turns/1"))},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), c.args, nil, &out, io.Discard); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if out.String() != c.want {
			t.Errorf("%q printed:\n%s\nwant (git diff):\n%s", c.args, out.String(), c.want)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"task", "diff", "t1", "--turn", "2", "--stat"}, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"a.txt", "+1", "-0", "new.bin", "binary", "2 file(s) changed, 1 line(s) added, 0 deleted"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("--stat does not say %q:\n%s", line, out.String())
		}
	}
	out.Reset()
	if err := run(context.Background(), []string{"task", "diff", "t1", "-o", "json", "--stat"}, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var d taskDiff
	if err := json.Unmarshal(out.Bytes(), &d); err != nil || len(d.Turns) != 2 || d.ToTurn != 2 || len(d.Files) != 2 {
		t.Errorf("json: %+v, %v", d, err)
	}
	out.Reset()
	err := run(context.Background(), []string{"task", "diff", "t1", "--turn", "3", "-o", "json"}, nil, &out, &out)
	if err == nil || !strings.Contains(out.String(), `"code": "no_checkpoint"`) {
		t.Errorf("a turn with no checkpoint: %v\n%s", err, out.String())
	}
	out.Reset()
	err = run(context.Background(), []string{"task", "diff", "unmanaged", "-o", "json"}, nil, &out, &out)
	if err == nil || !strings.Contains(out.String(), `"code": "not_managed"`) {
		t.Errorf("a task with no managed workspace: %v\n%s", err, out.String())
	}
}

// git, reading or publishing checkpoints, gets the ways to authenticate and the proxies of the
// environment, and nothing else of it (no API key, no token).
func TestGitEnvPassesAuthAndProxiesOnly(t *testing.T) {
	got := gitEnv([]string{"SSH_AUTH_SOCK=/tmp/agent", "ANTHROPIC_API_KEY=sk-secret", "https_proxy=http://p:3128",
		"DROVER_API_TOKENS=tok", "GIT_SSH_COMMAND=ssh -i k", "HOME=/root"})
	want := []string{"SSH_AUTH_SOCK=/tmp/agent", "https_proxy=http://p:3128", "GIT_SSH_COMMAND=ssh -i k"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("gitEnv = %q, want %q", got, want)
	}
}

// drover task diff ends the whole task at the checkpoint Postgres committed: a turn whose
// checkpoint an attempt pushed before it died is not shown.
func TestTaskDiffEndsAtTheCommittedCheckpoint(t *testing.T) {
	remote := twoTurnTask(t, "t1")
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	pool, err := store.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := store.Migrate(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	c1 := strings.TrimSpace(gitOut(t, remote, "rev-parse", "refs/drover/tasks/t1/turns/1"))
	if _, err := store.BeginAttempt(ctx, pool, store.AttemptStart{TaskID: "t1", AttemptID: "a1", Turn: 1, Prompt: "p",
		PromptUUID: "00000000-0000-4000-8000-000000000001", LostTurnError: "lost"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.CommitTurn(ctx, pool, store.TurnCommit{TaskID: "t1", Turn: 1, AttemptID: "a1", SessionID: "s",
		LastMessageUUID: "u1", Status: task.TurnCompleted, Checkpoint: c1}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("DROVER_WORKSPACE_REMOTE", remote)
	t.Setenv("DROVER_DATABASE_URL", dsn)
	var out bytes.Buffer
	if err := run(ctx, []string{"task", "diff", "t1"}, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if want := gitOut(t, remote, "diff", "refs/drover/tasks/t1/base", c1); out.String() != want {
		t.Errorf("the whole task's diff:\n%s\nwant the base to turn 1's:\n%s", out.String(), want)
	}
}

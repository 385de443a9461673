package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/drover-run/drover/internal/pgtest"
	"github.com/drover-run/drover/internal/tools"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/worker"
)

// One host keeps the configuration it was given, so `drover dev` without --workers runs as it
// always has.
func TestHostConfigsOne(t *testing.T) {
	t.Parallel()
	cfg := worker.Config{HostID: "dev"}
	cfg.Claude.ConfigDir = "/s/claude"
	got := hostConfigs(cfg, 1)
	if len(got) != 1 || got[0].HostID != "dev" || got[0].Claude.ConfigDir != "/s/claude" {
		t.Fatalf("hostConfigs(cfg, 1) = %+v", got)
	}
}

func TestDevWorkersFlag(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"0", "9"} {
		a := &app{stdout: &discard{}, stderr: &discard{}, log: slog.New(slog.DiscardHandler)}
		c := newDevCommand(a)
		c.SetArgs([]string{"--workers", n, "--fake-api"})
		c.SetOut(&discard{})
		c.SetErr(&discard{})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.ExecuteContext(ctx)
		cancel()
		if err == nil {
			t.Errorf("--workers %s accepted", n)
		}
	}
}

// `drover dev --workers 2` runs two hosts in one process: distinct host ids and CLI config
// folders, both polling their turn queues; a task's turn runs on one of them, whose folder alone
// holds the session.
func TestDevRunsTwoHosts(t *testing.T) {
	temporalBin, err := tools.TemporalBin()
	if err != nil {
		t.Skipf("the temporal CLI is not installed (%v): run scripts/tools.sh", err)
	}
	claude, err := tools.ClaudeBin()
	if err != nil {
		t.Skipf("the Claude CLI is not installed (%v): run scripts/tools.sh", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	state := t.TempDir()
	home := filepath.Join(state, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	e := env{
		databaseURL: pgtest.NewDatabase(t),
		namespace:   "default",
		taskQueue:   "dev-hosts-" + uuid.NewString()[:8],
		claudeBin:   claude,
		temporalBin: temporalBin,
		environ:     []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CLAUDE_CODE_MAX_RETRIES=0"},
	}
	s, err := startStack(ctx, e, stackOptions{
		stateDir: state, headless: true, fakeAPI: true, fakeResponder: echoResponder,
		hostID: "dev", workers: 2, keepAlive: -1,
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop(ctx)

	if len(s.hosts) != 2 {
		t.Fatalf("%d hosts, want 2", len(s.hosts))
	}
	dirs := map[string]int{}
	for i, h := range s.hosts {
		wantID := []string{"dev-1", "dev-2"}[i]
		wantDir := filepath.Join(state, "claude-"+wantID)
		if h.cfg.HostID != wantID || h.cfg.Claude.ConfigDir != wantDir || h.worker.HostQueue() != task.HostQueue(wantID) {
			t.Errorf("host %d: id %s, config %s, queue %s; want %s, %s", i, h.cfg.HostID, h.cfg.Claude.ConfigDir, h.worker.HostQueue(), wantID, wantDir)
		}
		dirs[h.cfg.Claude.ConfigDir] = i
		waitPolled(ctx, t, s, h.worker.HostQueue())
	}

	tc := &taskclient.Client{Temporal: s.worker.Client(), TaskQueue: e.taskQueue}
	id := "dev-hosts-" + uuid.NewString()[:8]
	if _, err := tc.Start(ctx, id, task.Params{Workspace: t.TempDir(), Profile: task.Profile{PermissionMode: task.Autonomous}},
		task.Prompt{Text: "hello hosts"}, ""); err != nil {
		t.Fatal(err)
	}
	st, err := tc.WaitIdle(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Totals.Turns != 1 || st.Totals.FailedTurns != 0 || st.SessionID == "" {
		t.Fatalf("state after a turn: %+v", st)
	}
	ran := -1
	for i, h := range s.hosts {
		if h.worker.HostQueue() == st.HostQueue {
			ran = i
		}
	}
	if ran < 0 {
		t.Fatalf("the turn ran on queue %q, none of the hosts'", st.HostQueue)
	}
	for dir, i := range dirs {
		found, _ := filepath.Glob(filepath.Join(dir, "projects", "*", st.SessionID+".jsonl"))
		if (i == ran) != (len(found) == 1) {
			t.Errorf("host %d (ran the turn: %v) holds the session's transcript: %v", i, i == ran, found)
		}
	}
}

func waitPolled(ctx context.Context, t *testing.T, s *stack, queue string) {
	t.Helper()
	for {
		d, err := s.worker.Client().DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_ACTIVITY)
		if err == nil && len(d.GetPollers()) > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("nobody polls %s", queue)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

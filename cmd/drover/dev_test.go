package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/internal/testkit/testtools"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/taskview"
	"github.com/drover-run/drover/worker"
)

// One host keeps the configuration it was given, so `drover dev` without --workers runs as it
// always has.
func TestHostConfigsOne(t *testing.T) {
	t.Parallel()
	cfg := worker.Config{Config: engine.Config{HostID: "dev"}}
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
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	state := t.TempDir()
	s, e := startDevStack(ctx, t, state, 2)

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

// startDevStack starts what drover dev starts, with the offline model and workers hosts, in
// state; it is stopped when the test ends.
func startDevStack(ctx context.Context, t *testing.T, state string, workers int) (*stack, env) {
	t.Helper()
	temporalBin, err := testtools.TemporalBin()
	if err != nil {
		t.Fatalf("the temporal CLI is not installed (%v): run scripts/tools.sh", err)
	}
	claude, err := testtools.ClaudeBin()
	if err != nil {
		t.Fatalf("the Claude CLI is not installed (%v): run scripts/tools.sh", err)
	}
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
		stateDir: state, headless: true, fakeAPI: true, fakeResponder: offlineModel,
		hostID: "dev", workers: workers, keepAlive: -1,
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop(context.WithoutCancel(ctx)) })
	return s, e
}

// Offline, drover dev's model asks to run what a prompt says to run: a supervised task waits
// for a person, whose approval runs the command (witness: the file it writes) and whose model
// reports its output.
func TestDevOfflineModelAsksForApproval(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, e := startDevStack(ctx, t, t.TempDir(), 1)
	pool, err := pgxpool.New(ctx, e.databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	view := taskview.New(pool)
	tc := &taskclient.Client{Temporal: s.worker.Client(), TaskQueue: e.taskQueue}
	ws := t.TempDir()
	id := "dev-offline-" + uuid.NewString()[:8]
	if _, err := tc.Start(ctx, id, task.Params{Workspace: ws, Profile: task.Profile{PermissionMode: task.Supervised}},
		task.Prompt{Text: "run echo offline > marker.txt && echo done"}, ""); err != nil {
		t.Fatal(err)
	}
	var req taskview.PendingRequest
	for {
		if req, err = view.OnlyPending(ctx, id); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no request to approve: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if req.Tool != "Bash" || !strings.Contains(req.Summary, "echo offline > marker.txt") {
		t.Fatalf("the request: %+v", req)
	}
	if _, err := os.Stat(filepath.Join(ws, "marker.txt")); err == nil {
		t.Fatal("the command ran before anybody approved it")
	}
	dc := &taskclient.Decider{Temporal: tc.Temporal, View: view}
	if _, _, err := dc.Decide(ctx, id, task.Decision{RequestID: req.RequestID, Allow: true, By: "newcomer"}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.WaitIdle(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "marker.txt")); err != nil || strings.TrimSpace(string(b)) != "offline" {
		t.Fatalf("the approved command's file: %q, %v", b, err)
	}
	evs, err := view.Events(ctx, id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var said string
	for _, ev := range evs {
		var a events.AgentEvent
		if err := json.Unmarshal(ev.Event, &a); err != nil {
			t.Fatal(err)
		}
		if a.Type == events.TypeMessageChunk {
			said += a.Text
		}
	}
	if !strings.Contains(said, "The command ran and printed:\ndone") {
		t.Errorf("the offline model said %q", said)
	}
}

func TestOfflineModelReadsRun(t *testing.T) {
	for line, want := range map[string]string{"run ls -la": "ls -la", "Run: make test": "make test", "RUN  x ": "x",
		"run": "", "runner up": "", "run ": "", "please run ls": ""} {
		got, ok := runCommand(line)
		if got != want || ok != (want != "") {
			t.Errorf("runCommand(%q) = %q, %v; want %q", line, got, ok, want)
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

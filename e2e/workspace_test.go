package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// Managed workspaces on real parts: the worker drives the real git binary, the CLI runs its
// Bash tool in the task's worktree, and the fake Messages API's request log shows what the
// model was told each tool printed. Every host of a test shares nothing with another but
// Postgres, Temporal and the durable remote, a bare repository the test makes.

// gitWrapText is the git the workers run: the real one, which stops before (or after) a
// commit-tree or a push when the test has left a file named for that step in the holds folder
// ("before-commit-tree", "before-push", "after-push"). A stopped git writes "held" and waits
// until its worker is gone, then fails without running: a worker killed there leaves the
// repository as that step found it.
const gitWrapText = `#!/bin/sh
holds=%q
sub=""
for a in "$@"; do
  case "$a" in commit-tree|push) sub=$a; break;; esac
done
stop() {
  if [ -n "$sub" ] && [ -e "$holds/$1-$sub" ]; then
    rm -f "$holds/$1-$sub"
    echo "$1-$sub" > "$holds/held"
    while kill -0 $PPID 2>/dev/null; do sleep 0.1; done
    exit 1
  fi
}
stop before
%q "$@"
rc=$?
stop after
exit $rc
`

// wsEnv is a test's world with managed workspaces.
type wsEnv struct {
	*env
	origin string // the repository tasks work on
	remote string // the durable remote every host pushes to
	holds  string // the git wrapper's holds folder
	path   string // PATH with the wrapper first
	dir    string // where hosts keep their folders
}

func newWSEnv(t *testing.T) *wsEnv {
	t.Helper()
	e := newEnv(t)
	w := &wsEnv{env: e, dir: filepath.Join(filepath.Dir(e.workspace), "ws")}
	w.origin = filepath.Join(w.dir, "origin")
	w.remote = filepath.Join(w.dir, "remote.git")
	w.holds = filepath.Join(w.dir, "holds")
	wrap := filepath.Join(w.dir, "bin")
	for _, d := range []string{w.origin, w.holds, wrap} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wrap, "git"), fmt.Appendf(nil, gitWrapText, w.holds, realGit), 0o755); err != nil {
		t.Fatal(err)
	}
	w.path = wrap + ":" + os.Getenv("PATH")
	gitIn(t, w.origin, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(w.origin, "README"), []byte("the origin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, w.origin, "add", "README")
	gitIn(t, w.origin, "commit", "-q", "-m", "first")
	gitIn(t, w.dir, "init", "-q", "--bare", w.remote)
	return w
}

// gitIn runs the real git in dir, a witness of what drover's git did, and returns its output.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// wsHost is one host's own folders: HOME, CLI config, worktree root and workspace state.
type wsHost struct {
	id                        string
	home, config, root, state string
}

// host makes a host's folders under the test's; root is its worktree root ("" for its own).
func (w *wsEnv) host(name, root string) wsHost {
	w.t.Helper()
	d := filepath.Join(w.dir, "hosts", name)
	h := wsHost{id: name + "-" + w.queue, home: filepath.Join(d, "home"), config: filepath.Join(d, "claude"),
		root: root, state: filepath.Join(d, "state")}
	if h.root == "" {
		h.root = filepath.Join(d, "worktrees")
	}
	for _, dir := range []string{h.home, h.config} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			w.t.Fatal(err)
		}
	}
	return h
}

// start runs `drover worker` as h, its git the wrapper, and waits until it polls.
func (w *wsEnv) start(h wsHost, args ...string) *workerProc {
	w.t.Helper()
	cmd := exec.Command(suite.drover, append([]string{"worker", "--keep-alive", "2m"}, args...)...)
	cmd.Env = setEnv(w.workerEnv(h.id, "debug"), "PATH="+w.path, "HOME="+h.home, "DROVER_CLAUDE_CONFIG_DIR="+h.config,
		"DROVER_WORKTREE_ROOT="+h.root, "DROVER_WORKSPACE_STATE="+h.state, "DROVER_WORKSPACE_REMOTE="+w.remote)
	p := launchWorker(w.t, w.t, h.id, cmd)
	w.waitFor("worker "+h.id+" to start", func() bool {
		if p.exited() {
			w.t.Fatalf("worker %s exited:\n%s", h.id, p.log.String())
		}
		return p.logLine(`msg="drover worker started"`)
	})
	return p
}

// params are a managed task's on the test's repository.
func (w *wsEnv) params() task.Params {
	return task.Params{Repo: w.origin, Profile: task.Profile{PermissionMode: task.Autonomous}, MaxAttempts: 3}
}

// hold makes the wrapper stop at step, and waitHeld waits until a git stopped there.
func (w *wsEnv) hold(step string) {
	w.t.Helper()
	if err := os.WriteFile(filepath.Join(w.holds, step), nil, 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func (w *wsEnv) waitHeld(step string) {
	w.t.Helper()
	w.waitFor("git to stop "+step, func() bool {
		b, err := os.ReadFile(filepath.Join(w.holds, "held"))
		return err == nil && strings.TrimSpace(string(b)) == step
	})
	_ = os.Remove(filepath.Join(w.holds, "held"))
}

// lastToolResults is the newest tool result of each main request after mark, in order: what the
// model was told each tool run printed.
func lastToolResults(f *fa.Server, mark int) []string {
	var out []string
	for _, r := range mainRequestsSince(f, mark) {
		if rs := r.ToolResults(); len(rs) > 0 {
			out = append(out, strings.TrimSpace(rs[len(rs)-1].Content))
		}
	}
	return out
}

// toolResultsWith is lastToolResults restricted to those that contain text: the runs of one
// tool, not the earlier results a later request carries again.
func toolResultsWith(f *fa.Server, mark int, text string) []string {
	var out []string
	for _, r := range lastToolResults(f, mark) {
		if strings.Contains(r, text) {
			out = append(out, r)
		}
	}
	return out
}

// remoteRef is ref on the durable remote, "" when it has none.
func (w *wsEnv) remoteRef(ref string) string {
	w.t.Helper()
	out := gitIn(w.t, w.dir, "ls-remote", w.remote, ref)
	id, _, _ := strings.Cut(out, "\t")
	return id
}

// remoteFile is path in commit on the remote.
func (w *wsEnv) remoteFile(commit, path string) string {
	w.t.Helper()
	return gitIn(w.t, w.remote, "show", commit+":"+path)
}

// restoredEvents are the task's workspace_restored events.
func restoredEvents(evs []loggedEvent) []loggedEvent {
	var out []loggedEvent
	for _, ev := range evs {
		if ev.Agent.Type == events.TypeWorkspaceRestored {
			out = append(out, ev)
		}
	}
	return out
}

// checkpointOf is the checkpoint Postgres committed with turn.
func (w *wsEnv) checkpointOf(id string, turn int) string {
	w.t.Helper()
	rec, err := store.GetTurn(w.ctx, w.db(), id, turn)
	if err != nil {
		w.t.Fatal(err)
	}
	if rec.Checkpoint == "" {
		w.t.Fatalf("turn %d of %s has no checkpoint", turn, id)
	}
	return rec.Checkpoint
}

// TestRetryRestoresTheWorktree: a tool appends a line to a file, and the worker is SIGKILLed as
// soon as the tool has run (the model's next request, carrying the tool's result, is held). The
// restarted worker retries the turn: it first puts the worktree back at the task's base, so the
// retry's run of the same tool prints one line, not two, in what the model receives. The file
// the lost attempt left is kept on a side ref, which the retry's event names, and the turn's
// checkpoint, on the remote, holds one line.
func TestRetryRestoresTheWorktree(t *testing.T) {
	t.Parallel()
	w := newWSEnv(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	h := w.host("a", "")
	wk := w.start(h)
	id := w.taskID("restore")
	const cmd = "echo run >> log.txt && cat log.txt"

	w.fake.Enqueue(fa.Reply(fa.UseBash(cmd)), fa.Reply(fa.Text("never finished")).WithHold(0, release))
	if _, err := w.tc.Start(w.ctx, id, w.params(), task.Prompt{Text: "append a line"}, ""); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the tool's result to reach the model", func() bool { return len(lastToolResults(w.fake, 0)) == 1 })
	if got := lastToolResults(w.fake, 0); got[0] != "run" {
		t.Fatalf("the first run printed %q, want one line", got[0])
	}
	wk.kill()
	w.waitWithin(15*time.Second, "the lost attempt's CLI tree to end", func() bool { return len(taggedProcesses(h.id)) == 0 })
	mark := w.fake.Mark()
	w.fake.Enqueue(fa.Reply(fa.UseBash(cmd)), fa.Reply(fa.Text("appended")))
	wk = w.start(h)
	st := w.waitTurns(id, 1)
	if st.Totals.FailedTurns != 0 {
		t.Fatalf("the turn failed: %s", st.LastError)
	}

	got := lastToolResults(w.fake, mark)
	if len(got) != 1 || got[0] != "run" {
		t.Fatalf("the retry's tool printed %q to the model, want one line \"run\" (without the restore: two)", got)
	}
	cp := w.checkpointOf(id, 1)
	if f := w.remoteFile(cp, "log.txt"); f != "run" {
		t.Errorf("the turn's checkpoint holds log.txt %q, want one line", f)
	}
	if r := w.remoteRef("refs/drover/tasks/" + id + "/turns/1"); r != cp {
		t.Errorf("the remote's turns/1 is %q, want the committed checkpoint %s", r, cp)
	}
	evs := w.events(id)
	rs := restoredEvents(turnEvents(evs, 1, 2))
	if len(rs) != 1 {
		t.Fatalf("the retry logged %d workspace_restored events, want 1", len(rs))
	}
	ws := rs[0].Agent.Workspace
	if ws.Cause != events.RestoredForRetry || ws.Turn != 0 || ws.Kept == "" || !strings.Contains(strings.Join(ws.Files, ","), "log.txt") ||
		!strings.Contains(ws.Message, "cannot be rolled back") {
		t.Errorf("the retry's event: %+v", ws)
	}
	if kept := w.remoteRef(ws.Kept); kept == "" || w.remoteFile(kept, "log.txt") != "run" {
		t.Errorf("the kept ref %s on the remote does not hold the lost attempt's file", ws.Kept)
	}
	var cpSeen bool
	for _, c := range completes(turnEvents(evs, 1, 2)) {
		cpSeen = cpSeen || c.Agent.Data.Completion.Checkpoint == cp
	}
	if !cpSeen {
		t.Errorf("the committing attempt's complete event does not carry checkpoint %s", cp)
	}

	// The task ends: its worktree goes, its checkpoints stay on the remote.
	dir := filepath.Join(h.root, id)
	if _, err := os.Stat(filepath.Join(dir, "log.txt")); err != nil {
		t.Fatalf("the worktree is not at %s: %v", dir, err)
	}
	if err := w.tc.Close(w.ctx, id); err != nil {
		t.Fatal(err)
	}
	w.waitFor("the ended task's worktree to be removed", func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	})
	if r := w.remoteRef("refs/drover/tasks/" + id + "/turns/1"); r != cp {
		t.Errorf("after the task ended, the remote's turns/1 is %q, want %s", r, cp)
	}
	wk.stop()
}

// TestTwoTasksOnOneRepository: two tasks on the same repository append to the same file at the
// same time (each tool waits until the other has written); each sees only its own line, and
// each task's checkpoint holds only its own.
func TestTwoTasksOnOneRepository(t *testing.T) {
	t.Parallel()
	w := newWSEnv(t)
	h := w.host("a", "")
	wk := w.start(h)
	meet := filepath.Join(w.dir, "meet")
	if err := os.MkdirAll(meet, 0o755); err != nil {
		t.Fatal(err)
	}
	tool := func(me, other string) string {
		return fmt.Sprintf("echo %s >> shared.txt && touch %s/%s && while [ ! -e %s/%s ]; do sleep 0.1; done && cat shared.txt",
			me, meet, me, meet, other)
	}
	w.setResponder(func(r *fa.Request) (fa.Response, bool) {
		for _, me := range []string{"A", "B"} {
			if r.PromptCount("write as "+me) != 1 {
				continue
			}
			if len(r.ToolResults()) == 0 {
				other := map[string]string{"A": "B", "B": "A"}[me]
				return fa.Reply(fa.UseBash(tool(me, other))), true
			}
			return fa.Reply(fa.Text("wrote as " + me)), true
		}
		return fa.Response{}, false
	})
	ids := map[string]string{"A": w.taskID("two-a"), "B": w.taskID("two-b")}
	for me, id := range ids {
		if _, err := w.tc.Start(w.ctx, id, w.params(), task.Prompt{Text: "write as " + me}, ""); err != nil {
			t.Fatal(err)
		}
	}
	for me, id := range ids {
		if st := w.waitTurns(id, 1); st.Totals.FailedTurns != 0 {
			t.Fatalf("task %s failed: %s", me, st.LastError)
		}
	}
	for me, id := range ids {
		var seen []string
		for _, r := range w.fake.MainRequests() {
			if rs := r.ToolResults(); r.PromptCount("write as "+me) == 1 && len(rs) > 0 {
				seen = append(seen, strings.TrimSpace(rs[len(rs)-1].Content))
			}
		}
		if len(seen) != 1 || seen[0] != me {
			t.Errorf("task %s's tool printed %q to the model, want only its own line %q", me, seen, me)
		}
		if f := w.remoteFile(w.checkpointOf(id, 1), "shared.txt"); f != me {
			t.Errorf("task %s's checkpoint holds shared.txt %q, want %q", me, f, me)
		}
	}
	wk.stop()
}

// TestManagedTaskMovesToAnEmptyHost: host A runs a managed task's first turn and is SIGKILLed
// during its second, for good: its worktree root and state folder are deleted. Host B has its
// own state folder and nothing of the task but the same worktree root path (empty), the shared
// remote and Postgres. B takes the turn, makes the worktree from the remote at turn 1's
// checkpoint, and finishes the task: the tool prints turn 1's file, and the model is sent turn 1's
// conversation.
func TestManagedTaskMovesToAnEmptyHost(t *testing.T) {
	t.Parallel()
	w := newWSEnv(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	root := filepath.Join(w.dir, "worktrees")
	a, b := w.host("a", root), w.host("b", root)
	wa := w.start(a)
	id := w.taskID("move")

	const prompt1 = "Remember the word QUILLFEATHER and write notes."
	w.fake.Enqueue(fa.Reply(fa.UseBash("echo turn-one-notes > notes.txt")), fa.Reply(fa.Text("Noted: TANGERINE-ORBIT.")))
	if _, err := w.tc.Start(w.ctx, id, w.params(), task.Prompt{Text: prompt1}, ""); err != nil {
		t.Fatal(err)
	}
	if st := w.waitTurns(id, 1); st.Totals.FailedTurns != 0 {
		t.Fatalf("turn 1 failed: %s", st.LastError)
	}
	cp1 := w.checkpointOf(id, 1)

	const prompt2 = "prompt two moves to another host"
	w.fake.Enqueue(fa.Reply(fa.Text("PARTIAL-ANSWER-OF-A"), fa.Text("never finished")).WithHold(1, release))
	if _, err := w.tc.Prompt(w.ctx, id, task.Prompt{Text: prompt2}, ""); err != nil {
		t.Fatal(err)
	}
	w.waitFor("turn 2 to stream on A", func() bool { return hasText(turnEvents(w.events(id), 2, 0), "PARTIAL-ANSWER-OF-A") })
	wa.kill()
	w.waitWithin(15*time.Second, "A's CLI tree to end", func() bool { return len(taggedProcesses(a.id)) == 0 })
	for _, d := range []string{root, a.state, a.home, a.config} {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
	mark := w.fake.Mark()
	w.fake.Enqueue(fa.Reply(fa.UseBash("cat notes.txt")), fa.Reply(fa.Text("turn two done on B")))
	wb := w.start(b)
	w.waitFor("turn 2 to complete on B", func() bool {
		rec, err := store.GetTurn(w.ctx, w.db(), id, 2)
		if err == nil && rec.Finished() && rec.Status != task.TurnCompleted {
			t.Fatalf("turn 2 ended %s: %s", rec.Status, rec.Error)
		}
		return err == nil && rec.Status == task.TurnCompleted
	})
	if x, err := store.GetExecutor(w.ctx, w.db(), id); err != nil || x.HostID != b.id || x.Workspace != filepath.Join(root, id) {
		t.Fatalf("executor after the move: %+v, %v; want B in %s", x, err, filepath.Join(root, id))
	}
	if got := toolResultsWith(w.fake, mark, "notes"); len(got) != 1 || got[0] != "turn-one-notes" {
		t.Errorf("B's tool printed %q to the model, want turn 1's notes", got)
	}
	for _, r := range mainRequestsSince(w.fake, mark) {
		if r.PromptCount(prompt1) != 1 || !carries(r, "assistant", "TANGERINE-ORBIT") || r.PromptCount(prompt2) != 1 {
			t.Errorf("request %d from B does not carry turn 1 and prompt two once each", r.Seq)
		}
	}
	cp2 := w.checkpointOf(id, 2)
	if parents := gitIn(t, w.remote, "rev-list", "--parents", "-n", "1", cp2); !strings.Contains(parents, cp1) {
		t.Errorf("turn 2's checkpoint %s does not follow turn 1's %s (parents %s)", cp2, cp1, parents)
	}
	if !wb.logLine("made the task's worktree") {
		t.Error("B did not make the task's worktree")
	}
	wb.stop()
}

// checkpointCrash is one point of a managed turn's commit at which the worker is SIGKILLed.
type checkpointCrash struct {
	name string
	// arm makes the worker stop at the point once the turn's answer is released; wait waits
	// until it stands there.
	arm  func(c *cpRun)
	wait func(c *cpRun)
	// committed: the turn's commit reached Postgres before the kill, so the retry answers from
	// its record.
	committed bool
	// check runs after the kill, before the new worker starts.
	check func(c *cpRun)
}

// cpRun is one checkpoint crash in progress.
type cpRun struct {
	*wsEnv
	id    string
	proxy *pgtest.Proxy
	// mirrorOf reads turns/2 in the host's own mirror ("" when it has none).
	mirrorOf func() string
}

// TestCheckpointCrashPoints SIGKILLs the worker at each point of a managed turn's commit (turn 2;
// turn 1 commits normally): before the checkpoint is recorded, after its commit but before the
// push, after the push but before Postgres commits the turn, and after Postgres committed it but
// before the answer. In the first three the turn is not committed and the retry restores the
// worktree to turn 1's checkpoint, which Postgres recorded, even where the remote's refs are
// ahead: its tool run prints turn 1's line and its own once. In the last, the retry answers from
// the record and Postgres's checkpoint is the remote's.
func TestCheckpointCrashPoints(t *testing.T) {
	t.Parallel()
	stopAt := func(step string) func(c *cpRun) { return func(c *cpRun) { c.hold(step) } }
	waitAt := func(step string) func(c *cpRun) { return func(c *cpRun) { c.waitHeld(step) } }
	cases := []checkpointCrash{
		{name: "before-checkpoint", arm: stopAt("before-commit-tree"), wait: waitAt("before-commit-tree"),
			check: func(c *cpRun) {
				if r := c.remoteRef(c.ref(2)); r != "" {
					c.t.Errorf("the remote has turns/2 (%s) though the checkpoint was never made", r)
				}
			}},
		{name: "after-commit-before-push", arm: stopAt("before-push"), wait: waitAt("before-push"),
			check: func(c *cpRun) {
				if c.mirrorOf() == "" {
					c.t.Error("the host's mirror has no turns/2: the checkpoint's commit was not made")
				}
				if r := c.remoteRef(c.ref(2)); r != "" {
					c.t.Errorf("the remote has turns/2 (%s) though the push never ran", r)
				}
			}},
		{name: "after-push-before-commit", arm: stopAt("after-push"), wait: waitAt("after-push"),
			check: func(c *cpRun) {
				if r := c.remoteRef(c.ref(2)); r == "" || c.remoteRef("refs/drover/tasks/"+c.id+"/last") != r {
					c.t.Errorf("the remote's turns/2 %q is not its last: the push did not complete", r)
				}
				if x, err := store.GetExecutor(c.ctx, c.db(), c.id); err != nil || x.CheckpointTurn != 1 {
					c.t.Errorf("Postgres's last checkpoint: %+v, %v; want turn 1's", x, err)
				}
			}},
		{name: "after-commit-before-answer", committed: true,
			arm: func(c *cpRun) {},
			wait: func(c *cpRun) {
				held := c.proxy.HoldAt(pgtest.SimpleQuery("commit"), pgtest.HoldReplies)
				<-held
				c.waitFor("the commit to be applied", func() bool {
					rec, err := store.GetTurn(c.ctx, c.db(), c.id, 2)
					return err == nil && rec.Status == task.TurnCompleted
				})
			}},
	}
	for _, cc := range cases {
		t.Run(cc.name, func(t *testing.T) {
			t.Parallel()
			runCheckpointCrash(t, cc)
		})
	}
}

func (c *cpRun) ref(turn int) string { return fmt.Sprintf("refs/drover/tasks/%s/turns/%d", c.id, turn) }

func runCheckpointCrash(t *testing.T, cc checkpointCrash) {
	w := newWSEnv(t)
	c := &cpRun{wsEnv: w, id: w.taskID("cp")}
	c.proxy = pgtest.NewProxy(t, pgtest.AdminAddr())
	w.workerDSN = c.proxy.DSN(w.dsn)
	release := make(chan struct{})
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	h := w.host("a", "")
	c.mirrorOf = func() string {
		mirrors, _ := filepath.Glob(filepath.Join(h.state, "mirrors", "*.git"))
		for _, m := range mirrors {
			if out, err := exec.Command("git", "-C", m, "rev-parse", "--verify", "--quiet", c.ref(2)).Output(); err == nil {
				return strings.TrimSpace(string(out))
			}
		}
		return ""
	}
	wk := w.start(h)
	w.fake.Enqueue(fa.Reply(fa.UseBash("echo one >> log.txt")), fa.Reply(fa.Text("turn one done")))
	if _, err := w.tc.Start(w.ctx, c.id, w.params(), task.Prompt{Text: "prompt one"}, ""); err != nil {
		t.Fatal(err)
	}
	if st := w.waitTurns(c.id, 1); st.Totals.FailedTurns != 0 {
		t.Fatalf("turn 1 failed: %s", st.LastError)
	}
	cp1 := w.checkpointOf(c.id, 1)

	const cmd = "echo two >> log.txt && cat log.txt"
	mark2 := w.fake.Mark()
	w.fake.Enqueue(fa.Reply(fa.UseBash(cmd)), fa.Reply(fa.Text("turn two done")).WithHold(0, release))
	if _, err := w.tc.Prompt(w.ctx, c.id, task.Prompt{Text: "prompt two"}, ""); err != nil {
		t.Fatal(err)
	}
	w.waitFor("turn 2's tool to run", func() bool { return len(toolResultsWith(w.fake, mark2, "two")) == 1 })
	cc.arm(c)
	close(release)
	released = true
	cc.wait(c)
	wk.kill()
	w.waitWithin(15*time.Second, "the lost attempt's CLI tree to end", func() bool { return len(taggedProcesses(h.id)) == 0 })
	c.proxy.Release()
	if cc.check != nil {
		cc.check(c)
	}
	mark := w.fake.Mark()
	if !cc.committed {
		w.fake.Enqueue(fa.Reply(fa.UseBash(cmd)), fa.Reply(fa.Text("turn two done again")))
	}
	wk = w.start(h)
	st := w.waitTurns(c.id, 2)
	if st.Totals.FailedTurns != 0 {
		t.Fatalf("a turn failed: %s", st.LastError)
	}
	cp2 := w.checkpointOf(c.id, 2)
	if cc.committed {
		if n := len(mainRequestsSince(w.fake, mark)); n != 0 {
			t.Errorf("the retry of a committed turn sent %d requests", n)
		}
	} else if got := toolResultsWith(w.fake, mark, "two"); len(got) != 1 || got[0] != "one\ntwo" {
		t.Errorf("the retry's tool printed %q to the model, want turn 1's line and its own once", got)
	}
	if r := w.remoteRef(c.ref(2)); r != cp2 {
		t.Errorf("the remote's turns/2 is %s, Postgres's checkpoint %s", r, cp2)
	}
	if f := w.remoteFile(cp2, "log.txt"); f != "one\ntwo" {
		t.Errorf("turn 2's checkpoint holds log.txt %q, want two lines", f)
	}
	if x, err := store.GetExecutor(w.ctx, w.db(), c.id); err != nil || x.Checkpoint != cp2 || x.CheckpointTurn != 2 {
		t.Errorf("the executor's last checkpoint: %+v, %v; want %s of turn 2", x, err, cp2)
	}
	if gitIn(t, w.remote, "rev-parse", cp2+"^{tree}") == gitIn(t, w.remote, "rev-parse", cp1+"^{tree}") {
		t.Error("turn 2's checkpoint holds turn 1's files")
	}
	wk.stop()
}

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
)

// requestFor is the first main request after mark whose last user message holds prompt: the
// request that began the prompt's turn.
func requestFor(t *testing.T, f *fa.Server, mark int, prompt string) fa.Request {
	t.Helper()
	for _, r := range mainRequestsSince(f, mark) {
		if r.PromptCount(prompt) > 0 {
			return r
		}
	}
	t.Fatalf("no request carries %q", prompt)
	return fa.Request{}
}

// promptsIn says which of prompts a request carries, as "prompt 1:1 prompt 2:0 …".
func promptsIn(r fa.Request, prompts ...string) string {
	var b strings.Builder
	for _, p := range prompts {
		b.WriteString(p + ":" + string(rune('0'+r.PromptCount(p))) + " ")
	}
	return strings.TrimSpace(b.String())
}

// TestForkAndRewindAtTurnOne: a managed task of three turns, each writing its turn into a file.
// A fork at turn 1 starts from turn 1's files (witnesses: the fork's worktree, its checkpoint on
// the remote, and the file its first tool reads, as the model is told) and the model is sent turn
// 1's conversation alone (the fake Messages API's request log: the fork's first request holds
// prompt 1, not prompts 2 and 3); the task forked from keeps its files. A rewind of the task to
// turn 1 does the same to the task itself: its next turn's request holds prompt 1 and not 2 or 3,
// and its tool reads turn 1's file; turns 2 and 3's checkpoints stay on the remote, set aside.
func TestForkAndRewindAtTurnOne(t *testing.T) {
	t.Parallel()
	w := newWSEnv(t)
	h := w.host("a", "")
	w.start(h)
	src := w.taskID("src")
	prompts := []string{"prompt 1", "prompt 2", "prompt 3"}
	for i := range prompts {
		n := string(rune('1' + i))
		w.fake.Enqueue(fa.Reply(fa.UseBash("echo turn-"+n+" > state.txt")), fa.Reply(fa.Text("done "+n)))
	}
	if _, err := w.tc.Start(w.ctx, src, w.params(), task.Prompt{Text: prompts[0]}, ""); err != nil {
		t.Fatal(err)
	}
	w.waitTurns(src, 1)
	for i, p := range prompts[1:] {
		if _, err := w.tc.Prompt(w.ctx, src, task.Prompt{Text: p}, ""); err != nil {
			t.Fatal(err)
		}
		w.waitTurns(src, i+2)
	}
	srcFile := filepath.Join(h.root, src, "state.txt")
	if got := readFile(t, srcFile); got != "turn-3\n" {
		t.Fatalf("after three turns the task's file holds %q", got)
	}

	// The fork, from the command line, with a first prompt whose tool reads the file.
	fork := w.taskID("fork")
	mark := w.fake.Mark()
	w.fake.Enqueue(fa.Reply(fa.UseBash("cat state.txt")), fa.Reply(fa.Text("forked")))
	w.drover("task", "fork", src, "--at-turn", "1", "--id", fork, "fork prompt")
	if st := w.waitTurns(fork, 1); st.Totals.FailedTurns != 0 {
		t.Fatalf("the fork's turn failed: %s", st.LastError)
	}
	first := requestFor(t, w.fake, mark, "fork prompt")
	if got := promptsIn(first, prompts...); got != "prompt 1:1 prompt 2:0 prompt 3:0" {
		t.Errorf("the fork's first request carries %s; want turn 1's conversation alone", got)
	}
	if got := toolResultsWith(w.fake, mark, "turn-"); len(got) != 1 || got[0] != "turn-1" {
		t.Errorf("the fork's tool read %q, want turn 1's file", got)
	}
	if got := readFile(t, filepath.Join(h.root, fork, "state.txt")); got != "turn-1\n" {
		t.Errorf("the fork's worktree holds %q", got)
	}
	if got := w.remoteFile(w.remoteRef("refs/drover/tasks/"+fork+"/turns/1"), "state.txt"); got != "turn-1" {
		t.Errorf("the fork's checkpoint holds %q", got)
	}
	if got := gitIn(t, filepath.Join(h.root, fork), "rev-parse", "--abbrev-ref", "HEAD"); got != "drover/"+fork {
		t.Errorf("the fork's branch is %q", got)
	}
	if got := readFile(t, srcFile); got != "turn-3\n" {
		t.Errorf("the task forked from now holds %q", got)
	}

	// The rewind of the task itself, from the command line.
	var r struct {
		Rewound task.Rewound `json:"rewound"`
	}
	if err := json.Unmarshal([]byte(w.drover("task", "rewind", src, "--to-turn", "1", "-o", "json")), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Rewound.SetAside) != 2 || r.Rewound.Checkpoint != w.checkpointOf(src, 1) {
		t.Errorf("rewind answered %+v", r.Rewound)
	}
	mark = w.fake.Mark()
	w.fake.Enqueue(fa.Reply(fa.UseBash("cat state.txt")), fa.Reply(fa.Text("back")))
	if _, err := w.tc.Prompt(w.ctx, src, task.Prompt{Text: "prompt 4"}, ""); err != nil {
		t.Fatal(err)
	}
	if st := w.waitTurns(src, 4); st.Totals.FailedTurns != 0 {
		t.Fatalf("turn 4 failed: %s", st.LastError)
	}
	fourth := requestFor(t, w.fake, mark, "prompt 4")
	if got := promptsIn(fourth, prompts...); got != "prompt 1:1 prompt 2:0 prompt 3:0" {
		t.Errorf("turn 4's first request carries %s; want turn 1's conversation alone", got)
	}
	if got := toolResultsWith(w.fake, mark, "turn-"); len(got) != 1 || got[0] != "turn-1" {
		t.Errorf("turn 4's tool read %q, want turn 1's file", got)
	}
	var causes []string
	for _, ev := range restoredEvents(w.events(src)) {
		if ev.Turn == 4 {
			causes = append(causes, ev.Agent.Workspace.Cause)
		}
	}
	if len(causes) != 1 || causes[0] != events.RestoredForRewind {
		t.Errorf("turn 4's restores: %q, want one for the rewind", causes)
	}
	for _, n := range []string{"2", "3"} {
		if w.remoteRef("refs/drover/tasks/"+src+"/rewound/1/turns/"+n) == "" || w.remoteRef("refs/drover/tasks/"+src+"/turns/"+n) != "" {
			t.Errorf("turn %s's checkpoint is not set aside on the remote", n)
		}
	}
}

// drover runs the command line as a person on the test's world would, and returns its output.
func (w *wsEnv) drover(args ...string) string {
	w.t.Helper()
	cmd := exec.Command(suite.drover, args...)
	cmd.Env = w.serveEnv("DROVER_WORKSPACE_REMOTE="+w.remote, "XDG_CACHE_HOME="+w.t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		w.t.Fatalf("drover %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
)

// gitOutput runs the real git in dir and returns its output as it is: the witness of a diff.
func gitOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "core.quotepath=false"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// pagePatch is the text of the Changes page's patch, and pageFiles its files as git diff
// --numstat prints them.
const (
	pagePatch = `[...document.querySelectorAll(".patch .dl")].map(e => e.textContent).join("")`
	pageFiles = `[...document.querySelectorAll(".diff-files tr[data-path]")].map(r => r.dataset.binary === "true" ?
  "-\t-\t" + r.dataset.path : r.querySelector(".added").textContent.slice(1) + "\t" + r.querySelector(".deleted").textContent.slice(1) + "\t" + r.dataset.path).join("\n") + "\n"`
)

// TestChangesOfAManagedTask: a managed task of two turns run by a worker with the real CLI; then,
// with nothing but the durable remote and Postgres: the console's Changes page (drover serve,
// headless Chromium) shows turn 2's files and patch as git diff run by the test prints them
// between the turns' checkpoints, binary file named, markup as text; drover task diff prints the
// same; and drover task close --push-to puts the task's newest checkpoint on a branch of a
// repository of the user's once the task has ended.
func TestChangesOfAManagedTask(t *testing.T) {
	t.Parallel()
	w := newWSEnv(t)
	h := w.host("a", "")
	w.start(h)
	id := w.taskID("changes")
	w.fake.Enqueue(
		fa.Reply(fa.UseBash(`printf 'one\ntwo\n' > notes.txt && printf '\000\001\002' > blob.bin`)), fa.Reply(fa.Text("turn one")),
		fa.Reply(fa.UseBash(`echo three >> notes.txt && echo '<img src=x onerror=alert(1)>' > page.html`)), fa.Reply(fa.Text("turn two")),
	)
	if _, err := w.tc.Start(w.ctx, id, w.params(), task.Prompt{Text: "first"}, ""); err != nil {
		t.Fatal(err)
	}
	w.waitTurns(id, 1)
	if _, err := w.tc.Prompt(w.ctx, id, task.Prompt{Text: "second"}, ""); err != nil {
		t.Fatal(err)
	}
	if st := w.waitTurns(id, 2); st.Totals.FailedTurns != 0 {
		t.Fatalf("a turn failed: %s", st.LastError)
	}
	ref := func(n string) string { return "refs/drover/tasks/" + id + "/" + n }
	wantPatch := gitOutput(t, w.remote, "diff", ref("turns/1"), ref("turns/2"))
	wantFiles := gitOutput(t, w.remote, "diff", "--numstat", ref("turns/1"), ref("turns/2"))
	if !strings.Contains(wantPatch, "+three") {
		t.Fatalf("turn 2's checkpoint does not hold its change:\n%s", wantPatch)
	}

	s := w.startAPI("DROVER_API_TOKENS="+apiToken, "DROVER_WORKSPACE_REMOTE="+w.remote)
	p := w.consolePage()
	pageDo(t, p, chromedp.Navigate(s.url+"/#/tasks/"+id))
	w.pageWait(p, "the console to ask for the token", `document.getElementById("token-dialog").open`)
	pageDo(t, p, chromedp.SendKeys(chromedp.ID("token-input"), apiToken), chromedp.Click(chromedp.CSS("#token-form button[type=submit]")))
	w.pageWait(p, "the task's page to link its changes", `document.querySelector(".changes-link:not([hidden])") && document.querySelectorAll(".turn-actions").length === 2`)
	pageDo(t, p, chromedp.Click(chromedp.CSS(`[data-turn-actions="2"] a.changes-of-turn`)))
	w.pageWait(p, "turn 2's changes", `document.querySelector(".diff-files tr[data-path]") && document.querySelector(".patch .dl")`)
	if got := pageEval[string](t, p, pagePatch); got != wantPatch {
		t.Errorf("turn 2's patch in the page:\n%s\ngit diff:\n%s", got, wantPatch)
	}
	if got := pageEval[string](t, p, pageFiles); got != wantFiles {
		t.Errorf("turn 2's files in the page:\n%s\ngit diff --numstat:\n%s", got, wantFiles)
	}
	if pageEval[bool](t, p, `!!document.querySelector(".patch img")`) {
		t.Error("the agent's markup became an element")
	}
	pageDo(t, p, chromedp.Click(chromedp.CSS(`.turn-link[data-turn="1"]`)))
	w.pageWait(p, "turn 1's changes", `document.querySelector('.diff-files tr[data-path="blob.bin"]')`)
	if got := pageEval[string](t, p, `document.querySelector('tr[data-path="blob.bin"]').dataset.binary`); got != "true" {
		t.Errorf("blob.bin is not named binary: %q", got)
	}
	shoot(t, p, "changes")

	// The command line, with only the remote (and its own cache folder).
	cmd := exec.Command(suite.drover, "task", "diff", id, "--turn", "2")
	cmd.Env = w.serveEnv("DROVER_WORKSPACE_REMOTE="+w.remote, "XDG_CACHE_HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil || string(out) != wantPatch {
		t.Errorf("drover task diff --turn 2: %v\n%s\nwant:\n%s", err, out, wantPatch)
	}

	// Close and publish to a repository of the user's.
	user := filepath.Join(w.dir, "user.git")
	gitIn(t, w.dir, "init", "-q", "--bare", user)
	cmd = exec.Command(suite.drover, "task", "close", id, "--push-to", user, "review/"+id)
	cmd.Env = w.serveEnv("DROVER_WORKSPACE_REMOTE="+w.remote, "XDG_CACHE_HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("drover task close --push-to: %v\n%s", err, out)
	}
	last := w.checkpointOf(id, 2)
	if got := gitIn(t, user, "rev-parse", "review/"+id); got != last {
		t.Errorf("the user's branch is at %s, want turn 2's checkpoint %s", got, last)
	}
	if got := gitIn(t, user, "show", "review/"+id+":notes.txt"); got != "one\ntwo\nthree" {
		t.Errorf("the published notes.txt: %q", got)
	}
	if _, err := os.Stat(filepath.Join(h.root, id)); !os.IsNotExist(err) {
		t.Errorf("the ended task's worktree is still there: %v", err)
	}
}

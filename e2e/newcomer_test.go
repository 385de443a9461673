package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// startDev runs `drover dev` as a newcomer does, without an API key (so with its offline
// model), on the test's Temporal server and database, and returns the console's URL as dev
// printed it.
func (e *env) startDev() string {
	e.t.Helper()
	env := setEnv(e.workerEnv("dev-"+e.queue, "info"), "ANTHROPIC_API_KEY=", "ANTHROPIC_BASE_URL=")
	cmd := exec.Command(suite.drover, "dev", "--temporal-address", e.temporal, "--listen", "127.0.0.1:0",
		"--state", filepath.Join(e.t.TempDir(), "state"), "--host-id", "dev-"+e.queue)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	log := &lockedBuffer{}
	cmd.Stderr = log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			_, _ = log.Write([]byte(line + "\n"))
			if _, rest, ok := strings.Cut(line, "(console "); ok {
				urls <- strings.TrimSuffix(rest, ")")
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(done) }()
	e.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if e.t.Failed() {
			e.t.Logf("drover dev's output:\n%s", log.String())
		}
	})
	select {
	case u := <-urls:
		return u
	case <-done:
		e.t.Fatalf("drover dev exited:\n%s", log.String())
	case <-time.After(90 * time.Second):
		e.t.Fatalf("drover dev printed no console URL:\n%s", log.String())
	}
	return ""
}

// What the README promises a newcomer: `drover dev` (what `make dev` runs) prints the console's
// URL; on that page a task is started, watched, and its approval answered, with no API key.
// Witnesses: the file the approved command writes, and the command's output the offline model
// reports back, as the page shows it.
func TestNewcomerStartsAndApprovesFromThePage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	url := e.startDev()
	marker := filepath.Join(e.workspace, "newcomer.txt")

	p := e.consolePage()
	pageDo(t, p, chromedp.Navigate(url))
	e.pageWait(p, "the task list", `document.querySelector("a.new-task")`)
	pageDo(t, p, chromedp.Click(chromedp.CSS("a.new-task")))
	e.pageWait(p, "the new task's form", `document.querySelector("form.new-task")`)
	pageDo(t, p, chromedp.SendKeys(chromedp.CSS("form.new-task textarea[name=prompt]"), "run echo hello > newcomer.txt && cat newcomer.txt"),
		chromedp.SendKeys(chromedp.CSS("form.new-task input[name=workspace]"), e.workspace))
	pageEval[bool](t, p, `(() => { const m = document.querySelector("form.new-task select[name=mode]"); m.value = "supervised";
		m.dispatchEvent(new Event("change", { bubbles: true })); return true; })()`)
	pageDo(t, p, chromedp.Click(chromedp.CSS("form.new-task button[type=submit]")))
	e.pageWait(p, "the task's page", `location.hash.startsWith("#/tasks/")`)

	waiting := `.request:not(.settled)`
	e.pageWait(p, "the request to run the command", `document.querySelector('`+waiting+` button.approve')`)
	if got := pageEval[string](t, p, `document.querySelector('`+waiting+`').closest("li.ev").textContent`); !strings.Contains(got, "echo hello > newcomer.txt") {
		t.Fatalf("the request on the page: %q", got)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran before anybody approved it")
	}
	pageDo(t, p, chromedp.Click(chromedp.CSS(waiting+" button.approve")))
	e.pageWait(p, "the command's output reported on the page",
		`document.getElementById("timeline").textContent.includes("The command ran and printed:")`)
	e.pageWait(p, "the turn's end on the page", `document.querySelectorAll("li.ev-complete").length == 1`)
	if b, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(b)) != "hello" {
		t.Fatalf("the approved command's file: %q, %v", b, err)
	}
	if got := pageEval[string](t, p, `document.getElementById("timeline").textContent`); !strings.Contains(got, "printed:\nhello") {
		t.Errorf("the page does not show the command's output: %q", got)
	}
	shoot(t, p, "newcomer")
}

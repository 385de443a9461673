package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/drover-run/drover/internal/browser"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/testtools"
	"github.com/drover-run/drover/task"
)

var consolePNG = flag.String("console.png", "", "TestConsoleSupervisedTask: also write the screenshot of a waiting request here (docs/console.png)")

// consolePage opens the web console of s in a headless Chromium of its own.
func (e *env) consolePage() *browser.Page {
	e.t.Helper()
	bin, err := testtools.ChromiumBin()
	if err != nil {
		e.t.Fatalf("chromium: %v", err)
	}
	b, err := browser.Start(e.ctx, browser.Config{Bin: bin, Width: 1280, Height: 1200})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(b.Close)
	p, err := b.NewPage(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(p.Close)
	return p
}

// pageWait polls a JavaScript condition in the page until it holds.
func (e *env) pageWait(p *browser.Page, what, cond string) {
	e.t.Helper()
	var last error
	e.waitFor(what, func() bool {
		ok, err := browser.Eval[bool](p, "!!("+cond+")")
		last = err
		return err == nil && ok
	})
	if last != nil {
		e.t.Fatalf("%s: %v", what, last)
	}
}

func pageEval[T any](t *testing.T, p *browser.Page, expr string) T {
	t.Helper()
	v, err := browser.Eval[T](p, expr)
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

func pageDo(t *testing.T, p *browser.Page, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := p.Do(actions...); err != nil {
		t.Fatal(err)
	}
}

// shoot saves a screenshot of the page among the test's artefacts and says where.
func shoot(t *testing.T, p *browser.Page, name string) string {
	t.Helper()
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := p.Screenshot(path); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// The web console on the real stack (drover serve with a token, a worker, the real CLI against
// the fake Messages API, Temporal, Postgres): a supervised task started from the page's form
// (its prompt reaches the model once) streams its events into the page;
// a request approved from the page runs its tool (witnesses: the file it writes, and the tool
// result the model is sent); one denied from the page does not run, and the model reads the
// reason; a prompt sent from the page runs; a reload in the middle of a turn leaves the page
// with exactly the events of the Postgres log, none missing, none doubled; "allow always" from
// the page spares the same command later (it runs twice, asked once). Who acted is recorded:
// the page's decisions and prompts by its token's name (ada), a decision from the command line
// by the user who ran it, each shown on the page and in the event log.
func TestConsoleSupervisedTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	s := e.startAPI("DROVER_API_TOKENS=ada:" + apiToken)
	s.token = apiToken
	id := e.taskID("console")
	marker := filepath.Join(e.workspace, "approved.txt")
	always := filepath.Join(e.workspace, "always.txt")
	same := "echo again >> " + always
	const why = "never delete the workspace"
	story := make([]fa.Block, 0, 12)
	for i := range 12 {
		story = append(story, fa.Text(fmt.Sprintf("Chapter %d: the quick brown fox jumps over the lazy dog. ", i)))
	}
	e.fake.Enqueue(
		fa.Reply(fa.Text("I will write the marker."), fa.UseBash("echo approved > "+marker)),
		fa.Reply(fa.Text("Marker written.")),
		fa.Reply(fa.UseBash("rm -rf "+e.workspace)),
		fa.Reply(fa.Text("Understood, I will not delete it.")),
		fa.Reply(story...).WithDelay(40*time.Millisecond),
		fa.Reply(fa.UseBash(same)),
		fa.Reply(fa.UseBash(same)), // granted: not asked
		fa.Reply(fa.Text("Both done.")),
		fa.Reply(fa.UseBash("echo from the command line")),
		fa.Reply(fa.Text("Ran it.")),
	)
	// The task is started from the page's form, as a newcomer does.
	p := e.consolePage()
	pageDo(t, p, chromedp.Navigate(s.url+"/#/"))
	e.pageWait(p, "the console to ask for the token", `document.getElementById("token-dialog").open`)
	pageDo(t, p, chromedp.SendKeys(chromedp.ID("token-input"), apiToken),
		chromedp.Click(chromedp.CSS("#token-form button[type=submit]")))
	e.pageWait(p, "the task list", `document.querySelector("a.new-task")`)
	pageDo(t, p, chromedp.Click(chromedp.CSS("a.new-task")))
	e.pageWait(p, "the new task's form", `document.querySelector("form.new-task")`)
	pageDo(t, p, chromedp.SendKeys(chromedp.CSS("form.new-task textarea[name=prompt]"), "write the marker"),
		chromedp.SendKeys(chromedp.CSS("form.new-task input[name=workspace]"), e.workspace),
		chromedp.SendKeys(chromedp.CSS("form.new-task input[name=id]"), id))
	pageEval[bool](t, p, `(() => { const m = document.querySelector("form.new-task select[name=mode]"); m.value = "supervised";
		m.dispatchEvent(new Event("change", { bubbles: true })); return true; })()`)
	pageDo(t, p, chromedp.Click(chromedp.CSS("form.new-task button[type=submit]")))
	e.pageWait(p, "the new task's page", `location.hash == "#/tasks/`+id+`"`)

	// The request streams in, with its whole input.
	waiting := `.request:not(.settled)`
	e.pageWait(p, "the request to write the marker", `document.querySelector('`+waiting+` button.approve')`)
	// Its input is folded; unfolded, it is whole.
	pageEval[bool](t, p, `(document.querySelector('`+waiting+` details.input').open = true)`)
	e.pageWait(p, "the request's input unfolded", `document.querySelector('`+waiting+` details.input pre')`)
	if got := pageEval[string](t, p, `document.querySelector('`+waiting+` details.input pre').textContent`); !strings.Contains(got, "echo approved > "+marker) {
		t.Fatalf("the request's input on the page: %q", got)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the tool ran before anybody approved it")
	}
	e.pageWait(p, "the task's facts", `document.querySelector(".facts .attn")`)
	pageEval[bool](t, p, `(window.scrollTo(0, 0), true)`)
	shot := shoot(t, p, "approval")
	if *consolePNG != "" {
		b, err := os.ReadFile(shot)
		if err == nil {
			err = os.WriteFile(*consolePNG, b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	pageDo(t, p, chromedp.Click(chromedp.CSS(waiting+" button.approve")))
	e.waitFor("the approved tool to write the marker", func() bool {
		b, err := os.ReadFile(marker)
		return err == nil && strings.TrimSpace(string(b)) == "approved"
	})
	e.pageWait(p, "the tool's result on the page", `[...document.querySelectorAll('li.tool[data-status="complete"]')].some(e => e.textContent.includes("echo approved"))`)
	e.pageWait(p, "the decision on the page", `document.querySelector('.request[data-outcome="allowed"]')`)
	e.pageWait(p, "the first turn's end on the page", `document.querySelectorAll("li.ev-complete").length == 1`)
	asked := 0
	for _, r := range e.fake.MainRequests() {
		if strings.Contains(r.LastUserText(), "write the marker") {
			asked++
		}
	}
	if asked != 1 {
		t.Fatalf("the model was sent the page's first prompt %d times, want once", asked)
	}
	var ran bool
	for _, tr := range e.toolResultsSince(0) {
		ran = ran || !tr.IsError
	}
	if !ran {
		t.Fatalf("the model was not sent the approved tool's result: %+v", e.toolResultsSince(0))
	}

	// A prompt from the page; its request denied from the page, with a reason.
	pageDo(t, p, chromedp.SendKeys(chromedp.CSS("form.prompt textarea"), "clean up"),
		chromedp.Click(chromedp.CSS("form.prompt button[type=submit]")))
	e.pageWait(p, "the request to delete the workspace", `document.querySelector('`+waiting+` button.deny') && document.querySelector('`+waiting+`').closest("li.ev").textContent.includes("rm -rf")`)
	pageDo(t, p, chromedp.SendKeys(chromedp.CSS(waiting+" input.reason"), why),
		chromedp.Click(chromedp.CSS(waiting+" button.deny")))
	e.pageWait(p, "the denial on the page", `document.querySelector('.request[data-outcome="denied"]')`)
	e.pageWait(p, "the second turn's end on the page", `document.querySelectorAll("li.ev-complete").length == 2`)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the denied command ran: %v", err)
	}
	reqs := e.fake.MainRequests()
	var sawReason bool
	for _, tr := range reqs[len(reqs)-1].ToolResults() {
		sawReason = sawReason || (tr.IsError && strings.Contains(tr.Content, why))
	}
	if !sawReason {
		t.Fatalf("the model did not read the denial's reason: %+v", reqs[len(reqs)-1].ToolResults())
	}
	if promptCount := func() int {
		n := 0
		for _, ev := range e.events(id) {
			if ev.Type == "user_message" && strings.Contains(ev.Agent.Text, "clean up") {
				n++
			}
		}
		return n
	}(); promptCount != 1 {
		t.Fatalf("the page's prompt is in the log %d times", promptCount)
	}

	// A reload while a turn streams.
	s.must(202, nil, "POST", "/api/v1/tasks/"+id+"/prompts", `{"text":"tell me a story"}`)
	e.pageWait(p, "the story to start on the page", `document.getElementById("timeline").textContent.includes("Chapter 0:")`)
	before := pageEval[string](t, p, `document.body.dataset.lastSeq`)
	pageDo(t, p, chromedp.Reload())
	e.pageWait(p, "the third turn's end on the page", `document.querySelectorAll("li.ev-complete").length == 3`)
	logged := e.events(id)
	if last := logged[len(logged)-1]; fmt.Sprint(last.Seq) == before || last.Type != "complete" {
		t.Fatalf("the reload was not in the middle of the turn: the page held seq %s, the log ends at %d (%s)", before, last.Seq, last.Type)
	}
	want := make([]int64, len(logged))
	for i, ev := range logged {
		want[i] = ev.Seq
	}
	e.pageWait(p, "the page to hold the log's last event", fmt.Sprintf(`document.body.dataset.lastSeq == "%d"`, want[len(want)-1]))
	got := pageEval[[]int64](t, p, `[...document.querySelectorAll("#timeline [data-seq]")].map(e => Number(e.dataset.seq))`)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the page shows seqs %v, the log holds %v", got, want)
	}
	text := pageEval[string](t, p, `document.getElementById("timeline").textContent`)
	for i := range 12 {
		if c := strings.Count(text, fmt.Sprintf("Chapter %d:", i)); c != 1 {
			t.Errorf("chapter %d is on the page %d times", i, c)
		}
	}
	shoot(t, p, "after-reload")

	// "Allow always" from the page spares the same command later in the turn.
	s.must(202, nil, "POST", "/api/v1/tasks/"+id+"/prompts", `{"text":"append twice"}`)
	e.pageWait(p, "the request to append, with its grants", `[...document.querySelectorAll('`+waiting+` button.always')].some(b => b.textContent.includes("echo again"))`)
	pageEval[bool](t, p, `([...document.querySelectorAll('`+waiting+` button.always')].find(b => b.textContent.includes("echo again")).click(), true)`)
	e.pageWait(p, "the grant to be sent", `[...document.querySelectorAll(".request .request-state")].every(e => !e.textContent.startsWith("sending"))`)
	if bad := pageEval[string](t, p, `[...document.querySelectorAll(".request .request-state")].map(e => e.textContent).filter(t => t.startsWith("not sent")).join("|")`); bad != "" {
		t.Fatalf("allow always from the page: %s", bad)
	}
	e.pageWait(p, "the fourth turn's end on the page", `document.querySelectorAll("li.ev-complete").length == 4`)
	if n := lines(t, always); n != 2 {
		t.Errorf("the command allowed always ran %d times, want 2", n)
	}
	if rows := e.requestRows(id); len(rows) != 3 {
		t.Errorf("%d requests, want 3 (the command allowed always asked once)", len(rows))
	}
	if got := pageEval[string](t, p, `[...document.querySelectorAll('.request[data-outcome="allowed"] .request-state')].map(e => e.textContent).join("|")`); !strings.Contains(got, "always: ") {
		t.Errorf("the page does not show the grant: %q", got)
	}
	checkAuthors(t, e, p, s, id)
	if d := p.Dialogs(); len(d) > 0 {
		t.Errorf("dialogs opened: %v", d)
	}
}

// checkAuthors: the page's decisions and prompts were recorded by the token's name (the event
// log and the page say ada); a request approved with the command line is recorded by the user
// who ran it, and the page says so.
func checkAuthors(t *testing.T, e *env, p *browser.Page, s *apiServer, id string) {
	t.Helper()
	var decidedBy, promptBy []string
	for _, ev := range e.events(id) {
		switch {
		case ev.Type == "permission_decision" && ev.Agent.Decision != nil:
			decidedBy = append(decidedBy, ev.Agent.Decision.By)
		case ev.Type == "user_message" && ev.Agent.Text == "clean up":
			promptBy = append(promptBy, ev.Agent.By)
		}
	}
	if strings.Join(decidedBy, ",") != "ada,ada,ada" || strings.Join(promptBy, ",") != "ada" {
		t.Errorf("the log records decisions by %q and the page's prompt by %q, want ada", decidedBy, promptBy)
	}
	if got := pageEval[string](t, p, `[...document.querySelectorAll('.request[data-outcome] .request-state')].map(e => e.textContent).join("|")`); strings.Count(got, "by ada") != 3 {
		t.Errorf("the page's decisions read %q, want each by ada", got)
	}
	e.pageWait(p, "the page's prompt by ada", `[...document.querySelectorAll("#timeline .who")].some(e => e.textContent == "Prompt by ada")`)

	s.must(202, nil, "POST", "/api/v1/tasks/"+id+"/prompts", `{"text":"run it from the terminal"}`)
	waiting := `.request:not(.settled)`
	e.pageWait(p, "the request to run from the command line", `document.querySelector('`+waiting+` button.approve')`)
	var reqID string
	for _, r := range e.requestRows(id) {
		if r.Status == task.OutcomePending {
			reqID = r.RequestID
		}
	}
	if out, err := e.droverCLI("task", "approve", id, reqID); err != nil {
		t.Fatalf("drover task approve: %v: %s", err, out)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	e.pageWait(p, "the command line's decision on the page", `[...document.querySelectorAll('.request[data-outcome="allowed"] .request-state')].some(e => e.textContent.includes("by `+u.Username+`"))`)
	if row := e.row(id, reqID); row.DecidedBy != u.Username {
		t.Errorf("the command line's decision is recorded by %q, want %q", row.DecidedBy, u.Username)
	}
}

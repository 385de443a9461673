package console_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/fakeapi"
)

// reads counts the calls the page sent to path.
func reads(api *fakeapi.Server, method, path string) int {
	n := 0
	for _, c := range api.Calls() {
		if c.Method == method && c.Path == path {
			n++
		}
	}
	return n
}

// waitReads waits until the page has sent at least n calls to path in all, the witness being the
// fake API's ledger of calls.
func waitReads(t *testing.T, api *fakeapi.Server, method, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for reads(api, method, path) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the page stopped calling %s %s", method, path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWaitingRequestIsNoStall: a running task whose turn waits for a person writes nothing, and
// is not called stalled however long the person takes.
func TestWaitingRequestIsNoStall(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	api.PutTask(fakeapi.Task{ID: "asks", Status: "running", Mode: "supervised", CreatedAt: now, UpdatedAt: now, PendingApprovals: 1,
		WaitingSince: &now, Pending: []fakeapi.PendingRequest{{TaskID: "asks", RequestID: "r1", Kind: "tool", Tool: "Bash",
			Summary: "ls", Since: now, Deadline: now.Add(time.Hour)}}})
	if _, err := api.Append("asks", 1, 1, mustJSON(t, events.AgentEvent{Type: events.TypePermissionRequest, PendingID: "r1",
		ToolName: "Bash", Permission: &events.Permission{Summary: "ls"}})); err != nil {
		t.Fatal(err)
	}
	p := page(t)
	navigate(t, p, url+"/#/tasks/asks")
	waitFor(t, p, `document.body.dataset.lastSeq == "1"`)
	eval[bool](t, p, `(() => { const real = Date.now; Date.now = () => real() + 120000; window.movedAt = Date.now(); return true; })()`)
	// The stall check has run with the clock moved.
	waitFor(t, p, `Number(document.querySelector(".alert.stall").dataset.checkedAt) >= window.movedAt`)
	if !eval[bool](t, p, `document.querySelector(".alert.stall").hidden`) {
		t.Errorf("a turn waiting for a person is called stalled: %q", eval[string](t, p, `document.querySelector(".alert.stall").textContent`))
	}
}

// TestStartedTaskIsNotUnknown: for the moment the API does not know a task just started from the
// form, its page says that it is starting, with no error and no command-line advice; an unknown
// task is said to be unknown in a browser user's words.
func TestStartedTaskIsNotUnknown(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{HideCreated: true})
	p := page(t)
	navigate(t, p, url+"/#/new")
	waitFor(t, p, `document.querySelector("form.new-task")`)
	if err := p.Do(
		chromedp.SendKeys(chromedp.CSS(`form.new-task textarea[name=prompt]`), "run ls"),
		chromedp.SendKeys(chromedp.CSS(`form.new-task input[name=workspace]`), "/srv/work"),
		chromedp.Click(chromedp.CSS(`form.new-task button[type=submit]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `location.hash == "#/tasks/task-1"`)
	// The page has been refused the task twice.
	waitReads(t, api, "GET", "/api/v1/tasks/task-1", 2)
	waitReads(t, api, "GET", "/api/v1/tasks/task-1/events", 1)
	text := eval[string](t, p, `document.body.innerText`)
	if eval[int](t, p, `document.querySelectorAll("main .alert:not([hidden])").length`) != 0 || strings.Contains(text, "drover task") {
		t.Errorf("a task being started is shown as an error: %q", text)
	}
	if !strings.Contains(text, "Starting the task") {
		t.Errorf("the page does not say the task is starting: %q", text)
	}
	api.Reveal("task-1")
	waitFor(t, p, `document.querySelector('.task-head .status[data-status="running"]')`)
	waitFor(t, p, `!document.body.innerText.includes("Starting the task")`)

	navigate(t, p, url+"/#/tasks/nobody")
	waitFor(t, p, `document.body.innerText.includes("No task nobody")`)
	if got := eval[string](t, p, `document.body.innerText`); strings.Contains(got, "drover task") || !strings.Contains(got, "No task nobody is known") {
		t.Errorf("an unknown task's page says %q", got)
	}
}

// toolCard is a supervised Bash call that asks, as the adapter records it.
func toolCard(t *testing.T, id, cmd string, deadline time.Time) []json.RawMessage {
	shell := &events.NormalizedPayload{Kind: events.KindShellExec, ShellExec: &events.ShellExec{Command: cmd}}
	return []json.RawMessage{
		mustJSON(t, events.AgentEvent{Type: events.TypeSessionStatus}),
		mustJSON(t, events.AgentEvent{Type: events.TypeAvailableCommands, AvailableCommands: []events.Command{{Name: "compact"}, {Name: "review"}}}),
		mustJSON(t, events.AgentEvent{Type: events.TypeUserMessage, Text: "run " + cmd}),
		mustJSON(t, events.AgentEvent{Type: events.TypeToolCall, ToolCallID: id, ToolName: "Bash", ToolTitle: "Run " + cmd,
			ToolStatus: events.ToolRunning, Normalized: shell}),
		mustJSON(t, events.AgentEvent{Type: events.TypePermissionRequest, PendingID: "p-" + id, ToolCallID: id, ToolName: "Bash",
			ToolTitle: "Run " + cmd, Normalized: shell, Permission: &events.Permission{Summary: cmd, Deadline: deadline,
				Input: mustJSON(t, map[string]string{"command": cmd})}}),
	}
}

// TestOneCardPerToolCall: a tool call and its request are one card that says it waits (not that
// the tool runs), with its input folded, readable "allow always" choices and its events' times;
// decided, the request folds to one line that gives the denial's reason once, and says nothing
// of a deadline. The session's bookkeeping is not shown.
func TestOneCardPerToolCall(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	deadline := now.Add(time.Hour)
	api.PutTask(fakeapi.Task{ID: "card", Status: "running", Mode: "supervised", CreatedAt: now, UpdatedAt: now, PendingApprovals: 1,
		Pending: []fakeapi.PendingRequest{{TaskID: "card", RequestID: "p-t1", Kind: "tool", Tool: "Bash", Summary: "ls -la", Since: now,
			Deadline: deadline, Suggestions: []fakeapi.Suggestion{{Key: "1", Label: "allow Edit(//srv/app/**)"}, {Key: "2", Label: "allow Bash(npm test:*)"}}}}})
	first := toolCard(t, "t1", "ls -la", deadline)
	if _, err := api.Append("card", 1, 1, first...); err != nil {
		t.Fatal(err)
	}
	p := page(t)
	navigate(t, p, url+"/#/tasks/card")
	waitFor(t, p, `document.body.dataset.lastSeq == "5"`)
	waitFor(t, p, `document.querySelectorAll(".request button.always").length == 2`)
	card := `#timeline li.ev[data-tool-call-id="t1"]`
	if got := eval[int](t, p, `document.querySelectorAll("#timeline li.ev:not([hidden])").length`); got != 2 {
		t.Errorf("%d visible items, want the prompt and one card for the tool call", got)
	}
	if !eval[bool](t, p, `!!document.querySelector('`+card+` .request[data-pending-id="p-t1"] button.approve')`) {
		t.Fatal("the request is not in its tool call's card")
	}
	if got := eval[string](t, p, `document.querySelector('`+card+` .tool-status').textContent`); got == "…" {
		t.Error("a tool waiting for its request is shown as running")
	}
	if got := eval[string](t, p, `document.querySelector('`+card+` .tool-head').textContent`); !strings.Contains(got, "waiting for you") {
		t.Errorf("the card's head says %q", got)
	}
	if eval[bool](t, p, `document.querySelector('`+card+` details.input').open`) {
		t.Error("the tool input is unfolded")
	}
	always := eval[string](t, p, `[...document.querySelectorAll(".request button.always")].map(b => b.textContent).join("|")`)
	if always != "Always allow editing files in /srv/app/|Always allow commands starting with “npm test”" {
		t.Errorf("allow-always buttons say %q", always)
	}
	if got := eval[int](t, p, `[...document.querySelectorAll("#timeline li.ev:not([hidden])")].filter(e => !e.querySelector(":scope > time.ev-time")).length`); got != 0 {
		t.Errorf("%d shown events without their time", got)
	}
	text := eval[string](t, p, `document.getElementById("timeline").innerText`)
	for _, hidden := range []string{"slash commands", "session"} {
		if strings.Contains(text, hidden) {
			t.Errorf("the timeline shows %q: %q", hidden, text)
		}
	}
	screenshot(t, p, "card-waiting")

	const reason = "not on the shared host"
	exit := 1
	denied := []json.RawMessage{
		mustJSON(t, events.AgentEvent{Type: events.TypePermissionDecision, PendingID: "p-t1", ToolName: "Bash",
			Decision: &events.Decision{Outcome: "denied", By: "ada", Reason: reason}}),
		mustJSON(t, events.AgentEvent{Type: events.TypeToolUpdate, ToolCallID: "t1", ToolName: "Bash", ToolStatus: events.ToolError, ToolError: reason,
			Normalized: &events.NormalizedPayload{Kind: events.KindShellExec, ShellExec: &events.ShellExec{Command: "ls -la",
				Output: &events.ShellOutput{ExitCode: &exit, Stderr: reason}}}}),
		mustJSON(t, events.AgentEvent{Type: events.TypePermissionDenied, ToolCallID: "t1", ToolName: "Bash", Permission: &events.Permission{Message: reason}}),
	}
	api.UpdateTask("card", func(t *fakeapi.Task) { t.Pending, t.PendingApprovals = nil, 0 })
	n, err := api.Append("card", 1, 1, denied...)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, fmt.Sprintf(`document.body.dataset.lastSeq == "%d"`, n))
	checkSeqs(t, domSeqs(t, p), n)
	waitFor(t, p, `document.querySelector('`+card+` .request[data-outcome="denied"]')`)
	body := eval[string](t, p, `document.body.textContent`)
	if c := strings.Count(body, reason); c != 1 {
		t.Errorf("the denial's reason is on the page %d times, want once: %q", c, body)
	}
	if strings.Contains(body, "if nobody answers") {
		t.Error("a decided request still gives its deadline")
	}
	if got := eval[string](t, p, `document.querySelector('`+card+` .request-state').textContent`); !strings.Contains(got, "by ada") {
		t.Errorf("the decided card says %q", got)
	}
	if eval[bool](t, p, `document.querySelector('`+card+` details.asked').open`) {
		t.Error("a decided request does not fold")
	}
	if got := eval[int](t, p, `document.querySelectorAll("#timeline li.ev:not([hidden])").length`); got != 2 {
		t.Errorf("%d visible items after the decision, want the prompt and the card", got)
	}
	screenshot(t, p, "card-denied")
}

// TestTurnsFold: each turn is a fold labelled with its prompt; the latest is open, the earlier
// ones closed, except one whose request still waits for a person.
func TestTurnsFold(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	api.PutTask(fakeapi.Task{ID: "turns", Status: "idle", CreatedAt: now, UpdatedAt: now})
	prompt := func(s string) json.RawMessage {
		return mustJSON(t, events.AgentEvent{Type: events.TypeUserMessage, Text: s})
	}
	done := mustJSON(t, events.AgentEvent{Type: events.TypeComplete})
	if _, err := api.Append("turns", 1, 1, prompt("first thing\nmore"), done); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Append("turns", 2, 1, toolCard(t, "t2", "make", now.Add(time.Hour))[2:]...); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Append("turns", 3, 1, prompt("second thing"), done); err != nil {
		t.Fatal(err)
	}
	n, err := api.Append("turns", 4, 1, prompt("third thing"))
	if err != nil {
		t.Fatal(err)
	}
	p := page(t)
	navigate(t, p, url+"/#/tasks/turns")
	waitFor(t, p, fmt.Sprintf(`document.body.dataset.lastSeq == "%d"`, n))
	got := eval[string](t, p, `[...document.querySelectorAll("#timeline li.turn > details")].map(d => (d.open ? "open " : "closed ") + d.querySelector("summary").textContent).join("|")`)
	want := "closed Turn 1 · first thing|open Turn 2 · run make|closed Turn 3 · second thing|open Turn 4 · third thing"
	if got != want {
		t.Errorf("the turns are %q, want %q", got, want)
	}
}

// TestPromptBoxHidesNoButton: every button of a task's page, scrolled to the bottom of the
// window, is what a click there reaches.
func TestPromptBoxHidesNoButton(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	n := recordedTask(t, api, "buttons")
	p := page(t)
	navigate(t, p, url+"/#/tasks/buttons")
	waitFor(t, p, fmt.Sprintf(`document.body.dataset.lastSeq == "%d"`, n))
	covered := eval[[]string](t, p, `[...document.querySelectorAll("main button")].filter(b => b.offsetParent).filter(b => {
		// Scrolled by hand so that the button's bottom is the window's.
		b.scrollIntoView({ block: "end" });
		window.scrollBy(0, b.getBoundingClientRect().bottom - innerHeight);
		const r = b.getBoundingClientRect();
		const at = document.elementFromPoint(r.left + r.width / 2, r.bottom - 2);
		return !(at && (at === b || b.contains(at)));
	}).map(b => b.textContent)`)
	if len(covered) > 0 {
		t.Errorf("buttons a click cannot reach at the bottom of the window: %q", covered)
	}
}

// TestNarrowScreens: at 420 px nothing of the list, a task's page or the inbox scrolls sideways;
// at 800 px a long error, one word of 485 characters, wraps.
func TestNarrowScreens(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	long := "exit:" + strings.Repeat("0123456789abcdef", 30)
	now := time.Now().UTC()
	api.PutTask(fakeapi.Task{ID: "0d6f3c1e-8a51-4f0c-9a4e-3b1f2c7d9e11", Status: "failed", Mode: "supervised", Model: "claude-sonnet-4-5",
		Workspace: "/srv/a/rather/long/path/of/a/workspace/folder", LastError: long, CreatedAt: now, UpdatedAt: now,
		TemporalURL: "http://127.0.0.1:8233/namespaces/default/workflows/x"})
	recordedTask(t, api, "narrow")
	p := page(t)
	for _, c := range []struct {
		width int64
		view  string
		ready string
	}{
		{420, "#/", `document.querySelector("tr[data-task-id]")`},
		{420, "#/inbox", `document.querySelector("#attention-list li[data-task-id]")`},
		{420, "#/tasks/narrow", `document.body.dataset.timelineReady`},
		{800, "#/inbox", `document.querySelector("#attention-list li[data-task-id]")`},
		{800, "#/tasks/0d6f3c1e-8a51-4f0c-9a4e-3b1f2c7d9e11", `document.querySelector(".facts .bad")`},
	} {
		if err := p.Do(chromedp.EmulateViewport(c.width, 900)); err != nil {
			t.Fatal(err)
		}
		navigate(t, p, url+"/"+c.view)
		waitFor(t, p, c.ready)
		if w := eval[int](t, p, `document.documentElement.scrollWidth`); w > int(c.width) {
			t.Errorf("%s at %d px: the page is %d px wide", c.view, c.width, w)
		}
		screenshot(t, p, fmt.Sprintf("narrow-%d-%s", c.width, strings.Trim(strings.ReplaceAll(c.view, "/", "-"), "#-")))
	}
}

// TestHeaderFollowsTimeline: the task's header changes with its events, not with a poll: with
// the page's slow timers stopped, a decision and a turn's end in the timeline bring the header's
// waiting count, status and cost along, even when the task's row is written after its event.
func TestHeaderFollowsTimeline(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	api.PutTask(fakeapi.Task{ID: "head", Status: "running", Mode: "supervised", CreatedAt: now, UpdatedAt: now, Turns: 1, PendingApprovals: 1,
		WaitingSince: &now, Pending: []fakeapi.PendingRequest{{TaskID: "head", RequestID: "p-t1", Kind: "tool", Tool: "Bash", Summary: "ls",
			Since: now, Deadline: now.Add(time.Hour)}}})
	if _, err := api.Append("head", 1, 1, toolCard(t, "t1", "ls", now.Add(time.Hour))...); err != nil {
		t.Fatal(err)
	}
	p := page(t)
	navigate(t, p, url+"/#/tasks/head")
	waitFor(t, p, `document.body.dataset.lastSeq == "5"`)
	waitFor(t, p, `document.querySelector(".facts").textContent.includes("1 waiting for you")`)
	// From now on no timer of a second or more fires: only events move the page.
	eval[bool](t, p, `(() => { const st = window.setTimeout; window.setTimeout = (f, ms, ...a) => ms >= 1000 ? 0 : st(f, ms, ...a); return true; })()`)

	// The decision's event comes first; the task's row follows.
	reads0 := reads(api, "GET", "/api/v1/tasks/head")
	if _, err := api.Append("head", 1, 1, mustJSON(t, events.AgentEvent{Type: events.TypePermissionDecision, PendingID: "p-t1",
		Decision: &events.Decision{Outcome: "allowed", By: "ada"}})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.body.dataset.lastSeq == "6"`)
	waitForReads(t, api, "GET", "/api/v1/tasks/head", reads0+1)
	api.UpdateTask("head", func(t *fakeapi.Task) { t.Pending, t.PendingApprovals, t.WaitingSince = nil, 0, nil })
	waitFor(t, p, `!document.querySelector(".facts").textContent.includes("waiting for you")`)

	reads0 = reads(api, "GET", "/api/v1/tasks/head")
	if _, err := api.Append("head", 1, 1, mustJSON(t, events.AgentEvent{Type: events.TypeComplete, Data: &events.Data{Completion: &events.Completion{CostUSD: 0.0421}}})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.body.dataset.lastSeq == "7"`)
	waitForReads(t, api, "GET", "/api/v1/tasks/head", reads0+1)
	api.UpdateTask("head", func(t *fakeapi.Task) { t.Status, t.CostUSD = "idle", 0.0421 })
	waitFor(t, p, `document.querySelector('.task-head .status[data-status="idle"]')`)
	waitFor(t, p, `document.querySelector(".facts .cost").textContent == "cost $0.0421"`)
}

// waitForReads waits until the page has sent at least n calls to path in all.
func waitForReads(t *testing.T, api *fakeapi.Server, method, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for reads(api, method, path) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the page sent %d calls to %s %s, want %d", reads(api, method, path), method, path, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLongTaskLaysOutFoldedTurnsWhenOpened: a long task opens on its last stored events with
// only its last turn laid out; its earlier turns are folded and hold no event until a person
// opens one, which then shows its events, each once.
func TestLongTaskLaysOutFoldedTurnsWhenOpened(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	api.PutTask(fakeapi.Task{ID: "huge", Status: "idle", CreatedAt: now, UpdatedAt: now})
	const turns, per = 12, 50
	var last int64
	for i := range turns {
		evs := []json.RawMessage{mustJSON(t, events.AgentEvent{Type: events.TypeUserMessage, Text: fmt.Sprintf("turn %d", i+1)})}
		for j := 1; j < per; j++ {
			evs = append(evs, mustJSON(t, events.AgentEvent{Type: events.TypeMessageChunk, MessageID: fmt.Sprintf("m%d-%d", i, j), Text: "words "}))
		}
		var err error
		if last, err = api.Append("huge", i+1, 1, evs...); err != nil {
			t.Fatal(err)
		}
	}
	p := page(t)
	navigate(t, p, url+"/#/tasks/huge")
	waitFor(t, p, fmt.Sprintf(`document.body.dataset.lastSeq == "%d"`, last))
	// The last 500 events are turns 3 to 12; only turn 12 is laid out.
	shown := eval[[]int64](t, p, `[...document.querySelectorAll("#timeline [data-seq]")].map(e => Number(e.dataset.seq))`)
	if len(shown) != per || slices.Min(shown) != int64((turns-1)*per+1) {
		t.Fatalf("at first the page lays out %d events from %d, want the last turn's %d", len(shown), slices.Min(shown), per)
	}
	folds := eval[string](t, p, `[...document.querySelectorAll("#timeline li.turn > details")].map(d => d.parentElement.dataset.turnNo + (d.open ? "o" : "c")).join(" ")`)
	if folds != "3c 4c 5c 6c 7c 8c 9c 10c 11c 12o" {
		t.Errorf("the turns' folds: %q", folds)
	}
	eval[bool](t, p, `(document.querySelector('#timeline li.turn[data-turn-no="7"] > details').open = true)`)
	waitFor(t, p, `document.querySelectorAll('#timeline li.turn[data-turn-no="7"] [data-seq]').length > 0`)
	got := eval[[]int64](t, p, `[...document.querySelectorAll("#timeline [data-seq]")].map(e => Number(e.dataset.seq))`)
	slices.Sort(got)
	want := make([]int64, 0, 2*per)
	for s := int64(6*per + 1); s <= 7*per; s++ {
		want = append(want, s)
	}
	for s := int64((turns-1)*per + 1); s <= last; s++ {
		want = append(want, s)
	}
	if !slices.Equal(got, want) {
		t.Errorf("after opening turn 7 the page holds %d events (%v…), want turns 7 and 12's %d", len(got), got[:min(5, len(got))], len(want))
	}
}

package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/drover-run/drover/console"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/browser"
	"github.com/drover-run/drover/internal/fakeapi"
	"github.com/drover-run/drover/internal/testkit/testtools"
	"github.com/drover-run/drover/task"
)

var (
	chromeOnce sync.Once
	chrome     *browser.Browser
	chromeErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if chrome != nil {
		chrome.Close()
	}
	os.Exit(code)
}

// page opens a tab of the package's one Chromium. A missing Chromium fails the test: it is
// installed by scripts/tools.sh.
func page(t *testing.T) *browser.Page {
	t.Helper()
	chromeOnce.Do(func() {
		bin, err := testtools.ChromiumBin()
		if err != nil {
			chromeErr = err
			return
		}
		chrome, chromeErr = browser.Start(context.Background(), browser.Config{Bin: bin})
	})
	if chromeErr != nil {
		t.Fatalf("chromium: %v", chromeErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	p, err := chrome.NewPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// stack serves the fake API with the console mounted at "/", as the real server does.
func stack(t *testing.T, cfg fakeapi.Config) (*fakeapi.Server, string) {
	t.Helper()
	cfg.Console = console.Handler()
	api := fakeapi.New(cfg)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return api, srv.URL
}

func screenshot(t *testing.T, p *browser.Page, name string) {
	t.Helper()
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := p.FullScreenshot(path); err != nil {
		t.Error(err)
		return
	}
	t.Logf("screenshot: %s", path)
}

func eval[T any](t *testing.T, p *browser.Page, expr string) T {
	t.Helper()
	v, err := browser.Eval[T](p, expr)
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript condition until it holds.
func waitFor(t *testing.T, p *browser.Page, cond string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := browser.Eval[bool](p, "!!("+cond+")")
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v; page problems: %v", cond, err, p.Problems())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func navigate(t *testing.T, p *browser.Page, url string) {
	t.Helper()
	if err := p.Do(chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
}

// domSeqs returns the seq of every element of the timeline, in document order.
func domSeqs(t *testing.T, p *browser.Page) []int64 {
	t.Helper()
	return eval[[]int64](t, p, `[...document.querySelectorAll("#timeline [data-seq]")].map(e => Number(e.dataset.seq))`)
}

// checkSeqs fails unless the page shows each of 1..n exactly once.
func checkSeqs(t *testing.T, got []int64, n int64) {
	t.Helper()
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	want := make([]int64, n)
	for i := range want {
		want[i] = int64(i) + 1
	}
	if !slices.Equal(sorted, want) {
		var dup, missing []int64
		seen := map[int64]int{}
		for _, s := range got {
			seen[s]++
			if seen[s] == 2 {
				dup = append(dup, s)
			}
		}
		for _, s := range want {
			if seen[s] == 0 {
				missing = append(missing, s)
			}
		}
		t.Fatalf("the page shows %d events, want each of 1..%d once: doubled %v, missing %v", len(got), n, dup, missing)
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func recordedTask(t *testing.T, api *fakeapi.Server, id string) int64 {
	t.Helper()
	evs, err := fakeapi.Timeline()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	since := now.Add(-90 * time.Second)
	api.PutTask(fakeapi.Task{ID: id, Status: "running", Mode: "supervised", Model: "claude-sonnet-4-5", Workspace: "/srv/work/" + id,
		CreatedAt: now.Add(-time.Hour), UpdatedAt: now, Turns: 4, CostUSD: 0.4215, PendingApprovals: 1, WaitingSince: &since,
		TemporalURL:   "http://127.0.0.1:8233/namespaces/default/workflows/" + id,
		ContextWindow: &fakeapi.ContextWindow{Used: 61000, Limit: 200000}})
	// The timeline's last three events are a search and the retry of its attempt: they make a
	// second turn, whose first attempt's output is set aside.
	if _, err := api.Append(id, 1, 1, evs[:len(evs)-3]...); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Append(id, 2, 1, evs[len(evs)-3:len(evs)-1]...); err != nil {
		t.Fatal(err)
	}
	last, err := api.Append(id, 2, 2, evs[len(evs)-1])
	if err != nil {
		t.Fatal(err)
	}
	return last
}

// TestRendersEveryEvent loads the recorded timeline (every event type, every payload kind) and
// checks that each event is on the page once, each payload kind has its view, and nothing threw.
func TestRendersEveryEvent(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	n := recordedTask(t, api, "recorded")
	p := page(t)
	navigate(t, p, url+"/#/tasks/recorded")
	waitFor(t, p, fmt.Sprintf(`document.body.dataset.lastSeq == "%d"`, n))
	checkSeqs(t, domSeqs(t, p), n)

	kinds := eval[[]string](t, p, `[...new Set([...document.querySelectorAll("#timeline .payload")].map(e => e.dataset.kind))].sort()`)
	for _, k := range []events.Kind{events.KindReadFile, events.KindModifyFile, events.KindShellExec, events.KindCodeSearch,
		events.KindHTTPRequest, events.KindSubagentTask, events.KindCreateTask, events.KindManageTodos, events.KindGeneric,
		events.KindMisc} {
		if !slices.Contains(kinds, string(k)) {
			t.Errorf("no view of a %s payload (views: %v)", k, kinds)
		}
	}
	for what, sel := range map[string]string{
		"a diff's added line":          "#timeline pre.diff .dl.add",
		"a diff's removed line":        "#timeline pre.diff .dl.del",
		"a shell command":              "#timeline pre.command",
		"a shell command's output":     "#timeline pre.stdout",
		"folded reasoning":             "#timeline li.ev-reasoning details:not([open])",
		"a subagent's nested event":    "#timeline ol.children > li.ev",
		"a todo":                       "#timeline ul.todos li.todo",
		"a search's files":             "#timeline ul.files li",
		"a request's full tool input":  "#timeline .request details.input",
		"a question's options":         "#timeline .request fieldset label.option",
		"a plan":                       "#timeline .request pre.plan",
		"a decided request":            `#timeline .request[data-outcome="allowed"]`,
		"a withdrawn request":          `#timeline .request[data-outcome="cancelled"]`,
		"a failed turn":                "#timeline li.ev-error.alert",
		"a finished turn":              "#timeline li.ev-complete",
		"a rate limit":                 "#timeline li.ev-rate_limit",
		"a compaction":                 "#timeline li.ev-compaction",
		"an interruption":              "#timeline li.ev-interrupted",
		"a denied tool":                "#timeline li.ev-permission_denied",
		"a retried attempt":            "#timeline li.ev-turn_retry",
		"the lost attempt's output":    `#timeline li.dropped[data-turn="2"][data-attempt="1"]`,
		"the prompt":                   "#timeline li.ev-user_message",
		"the agent's text":             "#timeline li.ev-message_chunk .message-text",
		"the Temporal link":            `.facts a.temporal[href^="http://127.0.0.1:8233/"]`,
		"the cost":                     ".facts .cost",
		"the context gauge":            ".gauge-fill",
		"the waiting request's action": "#timeline .request:not(.settled) button.approve",
	} {
		if !eval[bool](t, p, fmt.Sprintf(`!!document.querySelector(%q)`, sel)) {
			t.Errorf("no %s (%s)", what, sel)
		}
	}
	if got := eval[int](t, p, `document.querySelectorAll('#timeline li.dropped:not([data-turn="2"])').length`); got != 0 {
		t.Errorf("%d events of other attempts are set aside", got)
	}
	if got := eval[string](t, p, `document.querySelector(".gauge-text").textContent`); !strings.Contains(got, "%") {
		t.Errorf("context gauge says %q", got)
	}
	if got := eval[string](t, p, `document.querySelector(".facts .cost").textContent`); got != "cost $0.4215" {
		t.Errorf("cost says %q", got)
	}
	screenshot(t, p, "timeline")
	if err := p.Do(chromedp.ScrollIntoView(chromedp.CSS("#timeline .request:not(.settled)"))); err != nil {
		t.Fatal(err)
	}
	view := filepath.Join(t.ArtifactDir(), "request.png")
	if err := p.Screenshot(view); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", view)
	if d := p.Dialogs(); len(d) > 0 {
		t.Errorf("dialogs opened: %v", d)
	}
	if pr := p.Problems(); len(pr) > 0 {
		t.Errorf("page problems: %v", pr)
	}
}

const (
	imgAttack    = `<img src=x onerror="window.__pwned=1;alert(1)">`
	scriptAttack = `<script>window.__pwned=2;alert(2)</script>`
)

// TestAgentOutputIsText puts markup in every field an agent writes and checks that the page
// shows it as text and runs none of it.
func TestAgentOutputIsText(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	evil := imgAttack + scriptAttack
	exit := 1
	evs := []events.AgentEvent{
		{Type: events.TypeUserMessage, Text: evil},
		{Type: events.TypeMessageChunk, MessageID: "m1", Text: evil},
		{Type: events.TypeReasoning, MessageID: "m1", ReasoningText: evil},
		{Type: events.TypeToolCall, ToolCallID: "t1", ToolName: evil, ToolTitle: evil, ToolStatus: events.ToolRunning,
			Normalized: &events.NormalizedPayload{Kind: events.KindShellExec, ShellExec: &events.ShellExec{Command: evil, Description: evil}}},
		{Type: events.TypeToolUpdate, ToolCallID: "t1", ToolName: "Bash", ToolStatus: events.ToolError, ToolError: evil,
			Normalized: &events.NormalizedPayload{Kind: events.KindShellExec, ShellExec: &events.ShellExec{Command: evil,
				Output: &events.ShellOutput{ExitCode: &exit, Stdout: evil, Stderr: evil}}}},
		{Type: events.TypeToolUpdate, ToolCallID: "t2", ToolName: "Edit", ToolStatus: events.ToolComplete,
			Normalized: &events.NormalizedPayload{Kind: events.KindModifyFile, ModifyFile: &events.ModifyFile{FilePath: evil,
				Mutations: []events.Mutation{{Type: events.MutationReplace, Diff: "@@ -1 +1 @@\n-" + evil + "\n+" + evil}}}}},
		{Type: events.TypeToolUpdate, ToolCallID: "t3", ToolName: "TodoWrite", ToolStatus: events.ToolComplete,
			Normalized: &events.NormalizedPayload{Kind: events.KindManageTodos, ManageTodos: &events.ManageTodos{Operation: "write",
				Items: []events.TodoItem{{Description: evil, Status: evil}}}}},
		{Type: events.TypeToolUpdate, ToolCallID: "t4", ToolName: "mcp__x__y", ToolStatus: events.ToolComplete,
			Normalized: &events.NormalizedPayload{Kind: events.KindGeneric, Generic: &events.Generic{Name: evil, Server: evil,
				Input: mustJSON(t, map[string]string{"q": evil}), Output: evil}}},
		{Type: events.TypeToolUpdate, ToolCallID: "t5", ToolName: "Grep", ToolStatus: events.ToolComplete,
			Normalized: &events.NormalizedPayload{Kind: events.KindCodeSearch, CodeSearch: &events.CodeSearch{Pattern: evil,
				Output: &events.SearchOutput{Files: []string{evil}, FileCount: 1, Content: evil}}}},
		{Type: events.TypePermissionRequest, PendingID: "r1", ToolName: "Bash", ToolTitle: evil,
			Permission: &events.Permission{Input: mustJSON(t, map[string]string{"command": evil}), Summary: evil, Description: evil,
				Diff: "+" + evil, Plan: evil, Questions: []events.Question{{Question: evil, Header: evil,
					Options: []events.QuestionOption{{Label: evil, Description: evil}}}}}},
		{Type: events.TypeError, Error: &events.ErrorInfo{Kind: events.ErrorExecution, Message: evil, Errors: []string{evil}}},
		{Type: events.TypeRateLimit, RateLimitMessage: evil, RateLimit: &events.RateLimit{Source: events.RateLimitSourceAPIRetry, Error: evil}},
		{Type: events.TypeSubagentTask, ToolCallID: "t1", Subagent: &events.SubagentProgress{Phase: events.SubagentProgressed, Description: evil, Summary: evil}},
		{Type: events.TypePermissionDenied, ToolName: "Bash", ToolTitle: evil, Permission: &events.Permission{Message: evil}},
		{Type: "made_up_" + events.Type("x"), Text: evil},
	}
	raws := make([]json.RawMessage, len(evs))
	for i, ev := range evs {
		raws[i] = mustJSON(t, ev)
	}
	now := time.Now().UTC()
	api.PutTask(fakeapi.Task{ID: "evil", Status: "running", Mode: "supervised", Model: evil, Workspace: evil, LastError: evil,
		CreatedAt: now, UpdatedAt: now, PendingApprovals: 1, TemporalURL: "javascript:window.__pwned=3",
		Pending: []fakeapi.PendingRequest{{TaskID: "evil", RequestID: "r1", Kind: "tool", Tool: evil, Summary: evil, Since: now,
			Deadline: now.Add(time.Hour), Suggestions: []fakeapi.Suggestion{{Key: "1", Label: evil}}}}})
	n, err := api.Append("evil", 1, 1, raws...)
	if err != nil {
		t.Fatal(err)
	}
	p := page(t)
	for _, view := range []string{"#/tasks/evil", "#/", "#/inbox"} {
		navigate(t, p, url+"/"+view)
		switch view {
		case "#/tasks/evil":
			waitFor(t, p, fmt.Sprintf(`document.body.dataset.lastSeq == "%d"`, n))
			checkSeqs(t, domSeqs(t, p), n)
		case "#/":
			waitFor(t, p, `document.querySelector('tr[data-task-id="evil"]')`)
		case "#/inbox":
			waitFor(t, p, `document.querySelector('.inbox-item[data-request-id="r1"]')`)
		}
		// Open every fold, so that nothing stays unrendered, and give handlers time to fire.
		eval[bool](t, p, `(document.querySelectorAll("details").forEach(d => d.open = true), true)`)
		time.Sleep(300 * time.Millisecond)
		if got := eval[int](t, p, `document.querySelectorAll("img").length`); got != 0 {
			t.Errorf("%s: %d img elements on the page", view, got)
		}
		if got := eval[int](t, p, `document.scripts.length`); got != 1 {
			t.Errorf("%s: %d script elements, want the console's own one", view, got)
		}
		if got := eval[any](t, p, `window.__pwned === undefined ? null : window.__pwned`); got != nil {
			t.Errorf("%s: injected code ran: window.__pwned = %v", view, got)
		}
		if got := eval[int](t, p, `document.body.textContent.split("<img src=x onerror=").length - 1`); got == 0 {
			t.Errorf("%s: the markup is not on the page as text", view)
		}
		if got := eval[int](t, p, `document.querySelectorAll('a[href^="javascript:"]').length`); got != 0 {
			t.Errorf("%s: %d javascript: links", view, got)
		}
		screenshot(t, p, "escaped-"+map[string]string{"#/tasks/evil": "task", "#/": "list", "#/inbox": "inbox"}[view])
	}
	if d := p.Dialogs(); len(d) > 0 {
		t.Errorf("dialogs opened: %v", d)
	}
}

// TestStreamResumes follows a task whose stream the server ends every few events, then reloads
// the page mid-stream: every event is shown once, none missing, and each reconnection asked for
// what came after the last event shown.
func TestStreamResumes(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{StreamLimit: 4})
	n := recordedTask(t, api, "live")
	p := page(t)
	navigate(t, p, url+"/#/tasks/live")
	waitFor(t, p, fmt.Sprintf(`document.body.dataset.lastSeq == "%d"`, n))
	chunk := func(i int) json.RawMessage {
		return mustJSON(t, events.AgentEvent{Type: events.TypeMessageChunk, MessageID: "live-msg", Text: fmt.Sprintf("part %d. ", i)})
	}
	appendSome := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := api.Append("live", 3, 1, chunk(i)); err != nil {
				t.Fatal(err)
			}
			if i%3 == 0 {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	appendSome(0, 30)
	waitFor(t, p, fmt.Sprintf(`document.body.dataset.lastSeq == "%d"`, n+30))
	checkSeqs(t, domSeqs(t, p), n+30)

	// Reload while events keep coming.
	done := make(chan struct{})
	go func() { defer close(done); appendSome(30, 60) }()
	if err := p.Do(chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	<-done
	waitFor(t, p, fmt.Sprintf(`document.body.dataset.lastSeq == "%d"`, n+60))
	checkSeqs(t, domSeqs(t, p), n+60)
	text := eval[string](t, p, `[...document.querySelectorAll("#timeline li.ev-message_chunk .message-text")].map(e => e.textContent).join("|")`)
	for i := range 60 {
		if c := strings.Count(text, fmt.Sprintf("part %d. ", i)); c != 1 {
			t.Errorf("chunk %d shown %d times", i, c)
		}
	}
	streams, resumed := 0, 0
	for _, c := range api.Calls() {
		if c.Path == "/api/v1/tasks/live/events" && c.Query == "" {
			streams++
			if c.LastEventID != "" {
				resumed++
			}
		}
	}
	if streams < 5 || resumed != streams {
		t.Errorf("%d stream connections, %d resumed with Last-Event-ID: the page did not resume", streams, resumed)
	}
	screenshot(t, p, "resumed")
}

// TestTokenAskedOnce: the API wants a token; the page asks once, sends it in the header only,
// and keeps it across a reload of the tab.
func TestTokenAskedOnce(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token-value"
	api, url := stack(t, fakeapi.Config{Token: token})
	recordedTask(t, api, "guarded")
	p := page(t)
	navigate(t, p, url+"/#/")
	waitFor(t, p, `document.getElementById("token-dialog").open`)
	screenshot(t, p, "token")
	if err := p.Do(chromedp.SendKeys(chromedp.ID("token-input"), token), chromedp.Click(chromedp.CSS("#token-form button[type=submit]"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.querySelector('tr[data-task-id="guarded"]')`)
	if err := p.Do(chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.querySelector('tr[data-task-id="guarded"]')`)
	if eval[bool](t, p, `document.getElementById("token-dialog").open`) {
		t.Error("the token was asked again after a reload")
	}
	if got := eval[string](t, p, `sessionStorage.getItem("drover.token")`); got != token {
		t.Errorf("sessionStorage holds %q", got)
	}
	if got := eval[string](t, p, `location.href`); strings.Contains(got, token) {
		t.Errorf("the token is in the page's URL %s", got)
	}
	refused, authorized := 0, 0
	for _, c := range api.Calls() {
		if c.TokenInURL {
			t.Errorf("the token was sent in a URL: %s %s?%s", c.Method, c.Path, c.Query)
		}
		if c.Authorized {
			authorized++
		} else {
			refused++
		}
	}
	if refused == 0 || authorized == 0 {
		t.Errorf("%d calls refused, %d authorized: want the first refused, the rest authorized", refused, authorized)
	}
}

// TestDecisionsFromThePage approves, denies with a reason, and allows always from the task's
// page, and checks what the API was sent.
func TestDecisionsFromThePage(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	ask := func(id, cmd string) json.RawMessage {
		return mustJSON(t, events.AgentEvent{Type: events.TypePermissionRequest, PendingID: id, ToolCallID: "tc-" + id, ToolName: "Bash",
			ToolTitle: cmd, Permission: &events.Permission{Input: mustJSON(t, map[string]string{"command": cmd, "description": "run " + cmd}),
				Summary: cmd, AllowAlways: mustJSON(t, []any{map[string]any{"type": "addRules"}})}})
	}
	var pending []fakeapi.PendingRequest
	for _, id := range []string{"r-allow", "r-deny", "r-always"} {
		pending = append(pending, fakeapi.PendingRequest{TaskID: "decide", RequestID: id, Kind: "tool", Tool: "Bash", Summary: "echo " + id,
			Since: now, Deadline: now.Add(time.Hour), Suggestions: []fakeapi.Suggestion{{Key: "1", Label: "Bash(echo:*)"}}})
	}
	pending = append(pending, fakeapi.PendingRequest{TaskID: "decide", RequestID: "r-question", Kind: "question", Tool: "AskUserQuestion",
		Summary: "Which database?", Since: now, Deadline: now.Add(time.Hour)})
	question := mustJSON(t, events.AgentEvent{Type: events.TypePermissionRequest, PendingID: "r-question", ToolName: "AskUserQuestion",
		Permission: &events.Permission{Summary: "Which database?", RequiresUserInteraction: true, Questions: []events.Question{
			{Question: "Which database?", Header: "DB", Options: []events.QuestionOption{{Label: "Postgres"}, {Label: "SQLite"}}},
			{Question: "Which features?", MultiSelect: true, Options: []events.QuestionOption{{Label: "search"}, {Label: "export"}, {Label: "sync"}}},
		}}})
	api.PutTask(fakeapi.Task{ID: "decide", Status: "running", Mode: "supervised", CreatedAt: now, UpdatedAt: now, PendingApprovals: 4, Pending: pending})
	n, err := api.Append("decide", 1, 1, ask("r-allow", "echo r-allow"), ask("r-deny", "echo r-deny"), ask("r-always", "echo r-always"), question)
	if err != nil {
		t.Fatal(err)
	}
	p := page(t)
	navigate(t, p, url+"/#/tasks/decide")
	waitFor(t, p, fmt.Sprintf(`document.body.dataset.lastSeq == "%d"`, n))
	waitFor(t, p, `document.querySelector('.request[data-pending-id="r-always"] button.always')`)
	// The tool's input is folded, and whole once unfolded.
	if eval[bool](t, p, `document.querySelector('.request[data-pending-id="r-allow"] details.input').open`) {
		t.Error("the request's tool input is unfolded at first")
	}
	if err := p.Do(chromedp.Click(chromedp.CSS(`.request[data-pending-id="r-allow"] details.input summary`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.querySelector('.request[data-pending-id="r-allow"] details.input pre')`)
	if got := eval[string](t, p, `document.querySelector('.request[data-pending-id="r-allow"] details.input pre').textContent`); !strings.Contains(got, `"description": "run echo r-allow"`) {
		t.Errorf("the request's input is not shown whole: %q", got)
	}
	card := func(id string) string { return `.request[data-pending-id="` + id + `"] ` }
	// A denial without a reason is not sent: the agent would read nothing.
	if err := p.Do(chromedp.Click(chromedp.CSS(card("r-deny") + "button.deny"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.querySelector('.request[data-pending-id="r-deny"] .request-state').textContent.startsWith("say why")`)
	if err := p.Do(
		chromedp.Click(chromedp.CSS(card("r-allow")+"button.approve")),
		chromedp.SendKeys(chromedp.CSS(card("r-deny")+"input.reason"), "not on main"),
		chromedp.Click(chromedp.CSS(card("r-deny")+"button.deny")),
		chromedp.Click(chromedp.CSS(card("r-always")+"button.always")),
		chromedp.Click(chromedp.CSS(card("r-question")+`input[value="SQLite"]`)),
		chromedp.Click(chromedp.CSS(card("r-question")+`input[value="search"]`)),
		chromedp.Click(chromedp.CSS(card("r-question")+`input[value="sync"]`)),
		chromedp.Click(chromedp.CSS(card("r-question")+"button.approve")),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `[...document.querySelectorAll(".request .request-state")].every(e => e.textContent.startsWith("sent"))`)
	got := map[string]string{}
	for _, c := range api.Calls() {
		if id, ok := strings.CutPrefix(c.Path, "/api/v1/tasks/decide/approvals/"); ok && c.Method == "POST" {
			got[id] = string(c.Body)
		}
	}
	want := map[string]string{
		"r-allow":    `{"decision":"allow"}`,
		"r-deny":     `{"decision":"deny","message":"not on main"}`,
		"r-always":   `{"decision":"allow_always","always":"1"}`,
		"r-question": `{"decision":"allow","answers":{"Which database?":["SQLite"],"Which features?":["search","sync"]}}`,
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: the API was sent %s, want %s", id, got[id], w)
		}
	}
	// The agent's answer settles the card.
	if _, err := api.Append("decide", 1, 1, mustJSON(t, events.AgentEvent{Type: events.TypePermissionDecision, PendingID: "r-deny",
		ToolName: "Bash", Decision: &events.Decision{Outcome: "denied", By: "ada", Reason: "not on main"}})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.querySelector('.request[data-pending-id="r-deny"][data-outcome="denied"]')`)
	screenshot(t, p, "decided")
}

// TestInboxNotifies lists waiting requests across tasks and shows a browser notification, once
// opted in, when a new one arrives.
func TestInboxNotifies(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	for _, id := range []string{"a", "b"} {
		api.PutTask(fakeapi.Task{ID: id, Status: "running", CreatedAt: now, UpdatedAt: now, PendingApprovals: 1,
			Pending: []fakeapi.PendingRequest{{TaskID: id, RequestID: "req-" + id, Kind: "tool", Tool: "Bash", Summary: "make " + id,
				Since: now.Add(-time.Minute), Deadline: now.Add(time.Hour)}}})
	}
	api.PutTask(fakeapi.Task{ID: "broken", Status: "failed", CreatedAt: now, UpdatedAt: now, LastError: "the turn failed 3 times"})
	p := page(t)
	// The browser's notifications are replaced by a recorder, granted, before the page loads.
	if err := p.Do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: `
			window.__notes = [];
			window.Notification = class { constructor(title, opts) { window.__notes.push(title + " | " + (opts && opts.body)); }
				static get permission() { return "granted"; } static requestPermission() { return Promise.resolve("granted"); } };`})
		return err
	})); err != nil {
		t.Fatal(err)
	}
	navigate(t, p, url+"/#/inbox")
	waitFor(t, p, `document.querySelectorAll("#inbox-list .inbox-item").length == 2`)
	waitFor(t, p, `document.getElementById("inbox-count").textContent == "2"`)
	if !eval[bool](t, p, `!!document.querySelector('#attention-list li[data-task-id="broken"]')`) {
		t.Error("the failed task is not in the inbox")
	}
	if err := p.Do(chromedp.Click(chromedp.ID("notify-toggle"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.getElementById("notify-toggle").checked`)
	api.UpdateTask("b", func(tk *fakeapi.Task) {
		tk.Pending = append(tk.Pending, fakeapi.PendingRequest{TaskID: "b", RequestID: "req-new", Kind: "question", Tool: "AskUserQuestion",
			Summary: "Which database?", Since: now, Deadline: now.Add(time.Hour)})
		tk.PendingApprovals = len(tk.Pending)
	})
	waitFor(t, p, `window.__notes.length > 0`)
	notes := eval[[]string](t, p, `window.__notes`)
	if len(notes) != 1 || !strings.Contains(notes[0], "Which database?") {
		t.Errorf("notifications: %q, want one for the new question", notes)
	}
	waitFor(t, p, `document.getElementById("inbox-count").textContent == "3"`)
	screenshot(t, p, "inbox")

	// A reason typed in the inbox survives its refreshes, and goes with the denial.
	item := `.inbox-item[data-request-id="req-a"] `
	if err := p.Do(chromedp.SendKeys(chromedp.CSS(item+"input.reason"), "not on a Friday")); err != nil {
		t.Fatal(err)
	}
	// The inbox changes under it (a request comes and goes, pushed by the API): the item and its
	// reason stay.
	api.UpdateTask("b", func(tk *fakeapi.Task) {
		tk.Pending = append(tk.Pending, fakeapi.PendingRequest{TaskID: "b", RequestID: "req-more", Kind: "tool", Tool: "Bash",
			Summary: "ls", Since: now, Deadline: now.Add(time.Hour)})
		tk.PendingApprovals = len(tk.Pending)
	})
	waitFor(t, p, `document.querySelector('.inbox-item[data-request-id="req-more"]')`)
	api.UpdateTask("b", func(tk *fakeapi.Task) {
		tk.Pending = tk.Pending[:len(tk.Pending)-1]
		tk.PendingApprovals = len(tk.Pending)
	})
	waitFor(t, p, `!document.querySelector('.inbox-item[data-request-id="req-more"]')`)
	if got := eval[string](t, p, `document.querySelector('`+item+`input.reason').value`); got != "not on a Friday" {
		t.Errorf("the reason typed reads %q after the inbox changed", got)
	}
	if err := p.Do(chromedp.Click(chromedp.CSS(item + "button.deny"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `!document.querySelector('.inbox-item[data-request-id="req-a"]')`)
	var sent string
	for _, c := range api.Calls() {
		if c.Method == "POST" && c.Path == "/api/v1/tasks/a/approvals/req-a" {
			sent = string(c.Body)
		}
	}
	if sent != `{"decision":"deny","message":"not on a Friday"}` {
		t.Errorf("the inbox's denial sent %s", sent)
	}
}

// TestLongTaskShowsEarlierOnRequest: a task of more stored events than the page shows at first
// opens on its last ones; the earlier ones come, each once, when asked for.
func TestLongTaskShowsEarlierOnRequest(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	evs, err := fakeapi.Repeat(1500)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	api.PutTask(fakeapi.Task{ID: "long", Status: "idle", CreatedAt: now, UpdatedAt: now})
	if _, err := api.Append("long", 1, 1, evs...); err != nil {
		t.Fatal(err)
	}
	p := page(t)
	navigate(t, p, url+"/#/tasks/long")
	waitFor(t, p, `document.body.dataset.lastSeq == "1500"`)
	got := domSeqs(t, p)
	if len(got) != 500 || slices.Min(got) != 1001 || slices.Max(got) != 1500 {
		t.Fatalf("at first the page shows %d events, %d..%d; want the last 500", len(got), slices.Min(got), slices.Max(got))
	}
	// It read only those: one page read backwards from the log's end.
	for _, c := range api.Calls() {
		if c.Path == "/api/v1/tasks/long/events" && c.LastEventID == "" && !strings.Contains(c.Query, "before=") && !strings.Contains(c.Query, "after=1500") {
			t.Errorf("the page read the log from its start at first: %s?%s", c.Path, c.Query)
		}
	}
	if got := eval[string](t, p, `document.querySelector("button.earlier").textContent`); !strings.Contains(got, "1,000 earlier") {
		t.Errorf("the earlier events are offered as %q", got)
	}
	if err := p.Do(chromedp.Click(chromedp.CSS("button.earlier"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.querySelectorAll("#timeline [data-seq]").length >= 1500`)
	checkSeqs(t, domSeqs(t, p), 1500)
}

// TestPromptAndInterrupt: a prompt sent while a turn runs is said to be queued; Interrupt sends
// the interrupt; Approve in the inbox sends the decision. The fake API's ledger is the witness.
func TestPromptAndInterrupt(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	api.PutTask(fakeapi.Task{ID: "busy", Status: "running", Mode: "supervised", CreatedAt: now, UpdatedAt: now, PendingApprovals: 1,
		Pending: []fakeapi.PendingRequest{{TaskID: "busy", RequestID: "req-1", Kind: "tool", Tool: "Bash", Summary: "make test",
			Since: now, Deadline: now.Add(time.Hour)}}})
	p := page(t)
	navigate(t, p, url+"/#/tasks/busy")
	waitFor(t, p, `document.querySelector(".prompt-note").textContent.includes("queued")`)
	if err := p.Do(chromedp.SendKeys(chromedp.CSS("form.prompt textarea"), "and then <b>this</b>"),
		chromedp.Click(chromedp.CSS("form.prompt button[type=submit]"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.querySelector(".prompt-note").textContent.startsWith("Queued: 1 ahead")`)
	waitFor(t, p, `!document.querySelector("form.prompt button.deny").disabled`)
	if err := p.Do(chromedp.Click(chromedp.CSS("form.prompt button.deny"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.querySelector(".prompt-note").textContent == "Interrupt sent."`)
	navigate(t, p, url+"/#/inbox")
	waitFor(t, p, `document.querySelector('.inbox-item[data-request-id="req-1"] button.approve')`)
	if err := p.Do(chromedp.Click(chromedp.CSS(`.inbox-item[data-request-id="req-1"] button.approve`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `!document.querySelector('.inbox-item[data-request-id="req-1"]')`)
	want := map[string]string{
		"/api/v1/tasks/busy/prompts":         `{"text":"and then <b>this</b>"}`,
		"/api/v1/tasks/busy/interrupt":       `{}`,
		"/api/v1/tasks/busy/approvals/req-1": `{"decision":"allow"}`,
	}
	got := map[string]string{}
	for _, c := range api.Calls() {
		if c.Method == "POST" {
			got[c.Path] += string(c.Body)
		}
	}
	for path, body := range want {
		if got[path] != body {
			t.Errorf("POST %s: sent %q, want %q", path, got[path], body)
		}
	}
}

// TestNeedsAttentionBox: a task whose session could not be resumed shows a red box that says
// why, with its two choices; a choice is sent to the API (its ledger is the witness), and the
// inbox lists the task.
func TestNeedsAttentionBox(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	now := time.Now().UTC()
	api.PutTask(fakeapi.Task{ID: "stuck", Status: "needs_attention", Mode: "supervised", CreatedAt: now, UpdatedAt: now, Turns: 3,
		Attention: json.RawMessage(`{"turn":3,"session_id":"s1","error":"No message found with message.uuid of: u9","at":"` + now.Format(time.RFC3339) + `"}`)})
	p := page(t)
	navigate(t, p, url+"/#/inbox")
	waitFor(t, p, `[...document.querySelectorAll("li[data-task-id]")].some((li) => li.dataset.taskId == "stuck")`)
	navigate(t, p, url+"/#/tasks/stuck")
	waitFor(t, p, `document.querySelector(".alert.needs-attention")`)
	if got := eval[string](t, p, `document.querySelector(".alert.needs-attention").textContent`); !strings.Contains(got, "could not be resumed") ||
		!strings.Contains(got, "No message found") {
		t.Errorf("the attention box says %q", got)
	}
	screenshot(t, p, "needs-attention")
	if err := p.Do(chromedp.Click(chromedp.CSS(".alert.needs-attention button.resolve-new"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.body.textContent.includes("the waiting prompt runs as turn 4")`)
	var sent []string
	for _, c := range api.Calls() {
		if c.Method == "POST" && c.Path == "/api/v1/tasks/stuck/resolve" {
			sent = append(sent, string(c.Body))
		}
	}
	if len(sent) != 1 || sent[0] != `{"choice":"new_session"}` {
		t.Errorf("POST /resolve sent %q, want one {\"choice\":\"new_session\"}", sent)
	}
}

// TestStalledTurnIsShown: a running task that writes nothing for longer than the console's stall
// threshold is shown as possibly stalled, not as silence; the next event clears the banner. The
// page's clock is moved forward rather than the test waiting for it.
func TestStalledTurnIsShown(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	evs, err := fakeapi.Repeat(2)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	api.PutTask(fakeapi.Task{ID: "quiet", Status: "running", Mode: "autonomous", CreatedAt: now, UpdatedAt: now})
	if _, err := api.Append("quiet", 1, 1, evs[0]); err != nil {
		t.Fatal(err)
	}
	p := page(t)
	navigate(t, p, url+"/#/tasks/quiet")
	waitFor(t, p, `document.body.dataset.lastSeq == "1"`)
	if !eval[bool](t, p, `document.querySelector(".alert.stall").hidden`) {
		t.Fatal("a task that has just written an event is shown as stalled")
	}
	// Two minutes pass on the page's clock with no event.
	eval[bool](t, p, `(() => { const real = Date.now; Date.now = () => real() + 120000; return true; })()`)
	waitFor(t, p, `!document.querySelector(".alert.stall").hidden`)
	if got := eval[string](t, p, `document.querySelector(".alert.stall").textContent`); !strings.Contains(got, "may be stalled") {
		t.Errorf("the stall banner says %q", got)
	}
	screenshot(t, p, "stalled")
	if _, err := api.Append("quiet", 1, 1, evs[1]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.body.dataset.lastSeq == "2"`)
	waitFor(t, p, `document.querySelector(".alert.stall").hidden`)
}

// TestStartTaskFromThePage: the new-task form sends the creation once, with an Idempotency-Key,
// and opens the task; an input the API refuses shows its message and opens nothing; the next
// form offers the workspace used last. The fake API's ledger is the witness.
func TestStartTaskFromThePage(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	p := page(t)
	navigate(t, p, url+"/#/")
	waitFor(t, p, `document.querySelector("a.new-task")`)
	if err := p.Do(chromedp.Click(chromedp.CSS("a.new-task"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.querySelector("form.new-task")`)

	// A relative workspace: the API refuses it, and the page says why.
	if err := p.Do(
		chromedp.SendKeys(chromedp.CSS(`form.new-task textarea[name=prompt]`), "fix <b>the</b> build"),
		chromedp.SendKeys(chromedp.CSS(`form.new-task input[name=workspace]`), "relative/dir"),
		chromedp.Click(chromedp.CSS(`form.new-task button[type=submit]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.querySelector("form.new-task .alert")`)
	if got := eval[string](t, p, `document.querySelector("form.new-task .alert").textContent`); !strings.Contains(got, "absolute workspace") {
		t.Errorf("the refusal shows %q", got)
	}
	if got := eval[string](t, p, `location.hash`); got != "#/new" {
		t.Fatalf("after a refusal the page went to %q", got)
	}
	screenshot(t, p, "new-task-refused")

	// A person clears the workspace, types another and picks supervised.
	eval[bool](t, p, `(() => { const w = document.querySelector("form.new-task input[name=workspace]"); w.value = ""; w.focus(); return true; })()`)
	if err := p.Do(chromedp.SendKeys(chromedp.CSS(`form.new-task input[name=workspace]`), "/srv/work/new")); err != nil {
		t.Fatal(err)
	}
	eval[bool](t, p, `(() => { const m = document.querySelector("form.new-task select[name=mode]"); m.value = "supervised";
		m.dispatchEvent(new Event("change", { bubbles: true })); return m.value == "supervised"; })()`)
	if err := p.Do(chromedp.Click(chromedp.CSS(`form.new-task button[type=submit]`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `location.hash == "#/tasks/task-1"`)
	// The task is named by the first line of its prompt, as text, with its id beside.
	waitFor(t, p, `document.querySelector("h1") && document.querySelector("h1").textContent == "fix <b>the</b> build"`)
	waitFor(t, p, `document.querySelector(".task-id") && !document.querySelector(".task-id").hidden && document.querySelector(".task-id").textContent.includes("task-1")`)

	var creations []fakeapi.Call
	for _, c := range api.Calls() {
		if c.Method == "POST" && c.Path == "/api/v1/tasks" {
			creations = append(creations, c)
		}
	}
	if len(creations) != 2 {
		t.Fatalf("%d creations sent, want the refused one and the accepted one", len(creations))
	}
	var body map[string]any
	if err := json.Unmarshal(creations[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"prompt": "fix <b>the</b> build", "workspace": "/srv/work/new", "mode": "supervised"}
	if len(body) != len(want) {
		t.Errorf("sent %v, want %v", body, want)
	}
	for k, v := range want {
		if body[k] != v {
			t.Errorf("sent %s = %v, want %v", k, body[k], v)
		}
	}
	key := creations[1].IdempotencyKey
	if _, err := uuid.Parse(key); err != nil {
		t.Errorf("the creation's Idempotency-Key %q is not a uuid: %v", key, err)
	}
	if key == creations[0].IdempotencyKey {
		t.Error("a changed form was sent with the key of the refused one")
	}

	navigate(t, p, url+"/#/new")
	waitFor(t, p, `document.querySelector("form.new-task input[name=workspace]").value == "/srv/work/new"`)
}

// TestStartManagedTaskFromThePage: a repository filled in on the new-task form sets the
// workspace aside, and the creation carries the repository and its base, not a workspace. The
// fake API's ledger is the witness; the task's page names the repository.
func TestStartManagedTaskFromThePage(t *testing.T) {
	t.Parallel()
	api, url := stack(t, fakeapi.Config{})
	p := page(t)
	navigate(t, p, url+"/#/new")
	waitFor(t, p, `document.querySelector("form.new-task input[name=repo]")`)
	if err := p.Do(
		chromedp.SendKeys(chromedp.CSS(`form.new-task textarea[name=prompt]`), "fix the build"),
		chromedp.SendKeys(chromedp.CSS(`form.new-task input[name=workspace]`), "/srv/work/unused"),
		chromedp.SendKeys(chromedp.CSS(`form.new-task input[name=repo]`), "https://git.example/app.git"),
		chromedp.SendKeys(chromedp.CSS(`form.new-task input[name=base]`), "release-1"),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `document.querySelector("form.new-task input[name=workspace]").disabled`)
	if err := p.Do(chromedp.Click(chromedp.CSS(`form.new-task button[type=submit]`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, `location.hash == "#/tasks/task-1"`)
	waitFor(t, p, `document.querySelector(".repo") && document.querySelector(".repo").textContent.includes("app.git @ release-1")`)
	var body map[string]any
	for _, c := range api.Calls() {
		if c.Method == "POST" && c.Path == "/api/v1/tasks" {
			if err := json.Unmarshal(c.Body, &body); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]any{"prompt": "fix the build", "repo": "https://git.example/app.git", "base": "release-1", "mode": "autonomous"}
	if len(body) != len(want) {
		t.Errorf("sent %v, want %v", body, want)
	}
	for k, v := range want {
		if body[k] != v {
			t.Errorf("sent %s = %v, want %v", k, body[k], v)
		}
	}
}

// TestPageOffersTheGoNames reads the names a person can pick on the page, the list's status
// filter and the new task's modes, and compares them with package task's lists.
func TestPageOffersTheGoNames(t *testing.T) {
	t.Parallel()
	_, url := stack(t, fakeapi.Config{})
	p := page(t)
	navigate(t, p, url+"/#/")
	waitFor(t, p, `document.querySelector(".filters select")`)
	got := eval[[]string](t, p, `[...document.querySelectorAll(".filters select option")].map(o => o.value).filter(v => v)`)
	var want []string
	for _, s := range task.Statuses() {
		want = append(want, string(s))
	}
	if !slices.Equal(got, want) {
		t.Errorf("the status filter offers %q, want %q", got, want)
	}
	navigate(t, p, url+"/#/new")
	waitFor(t, p, `document.querySelector("form.new-task select[name=mode]")`)
	got = eval[[]string](t, p, `[...document.querySelectorAll("form.new-task select[name=mode] option")].map(o => o.value)`)
	want = nil
	for _, m := range task.PermissionModes() {
		want = append(want, string(m))
	}
	if !slices.Equal(got, want) {
		t.Errorf("the new task's form offers the modes %q, want %q", got, want)
	}
}

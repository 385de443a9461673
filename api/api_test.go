package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/taskview"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder is the write side of these tests: it records what reaches it, so that a test of
// refused input can show that nothing was sent.
type recorder struct {
	mu    sync.Mutex
	calls []string
	// authors are "what by" for every command that names who sent it.
	authors []string
}

func (r *recorder) author(what, by string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.authors = append(r.authors, what+" by "+by)
}

func (r *recorder) record(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
}

func (r *recorder) sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func (r *recorder) Create(_ context.Context, id string, p task.Params, pr task.Prompt, updateID string) (task.PromptAccepted, error) {
	if p.Repo != "" {
		r.record("start %s repo %s@%s %q %s", id, p.Repo, p.Base, pr.Text, updateID)
		return task.PromptAccepted{Turn: 1, PromptUUID: "uuid-" + id}, nil
	}
	r.record("start %s %s %q %s", id, p.Workspace, pr.Text, updateID)
	r.author("start", pr.By)
	return task.PromptAccepted{Turn: 1, PromptUUID: "uuid-" + id}, nil
}

func (r *recorder) Prompt(_ context.Context, id string, pr task.Prompt, updateID string) (task.PromptAccepted, error) {
	r.record("prompt %s %q", id, pr.Text)
	r.author("prompt", pr.By)
	return task.PromptAccepted{Turn: 2}, nil
}

func (r *recorder) InterruptBy(_ context.Context, id, by string) (task.InterruptResult, error) {
	r.record("interrupt %s", id)
	r.author("interrupt", by)
	return task.InterruptResult{}, nil
}

func (r *recorder) Close(_ context.Context, id string) error {
	r.record("close %s", id)
	return nil
}

func (r *recorder) CancelBy(_ context.Context, id, by string) error {
	r.record("cancel %s", id)
	r.author("cancel", by)
	return nil
}

func (r *recorder) UpdateBudget(_ context.Context, id string, c task.BudgetChange) (task.Budget, error) {
	r.record("budget %s", id)
	r.author("budget", c.By)
	return task.BudgetChange{}.Apply(task.Budget{}), nil
}

func (r *recorder) Rewind(_ context.Context, id string, turn int) (task.Rewound, error) {
	r.record("rewind %s %d", id, turn)
	return task.Rewound{Turn: turn}, nil
}

func (r *recorder) Fork(_ context.Context, src, dst string, turn int, p task.Prompt) (task.PromptAccepted, error) {
	r.record("fork %s %s %d %q", src, dst, turn, p.Text)
	return task.PromptAccepted{Turn: 1}, nil
}

func (r *recorder) Resolve(_ context.Context, id string, c task.AttentionChoice) (int, error) {
	r.record("resolve %s %s", id, c.Choice)
	return 2, nil
}

// Decide checks d as taskclient.Decider does, against the request the reader shows.
func (r *recorder) Decide(ctx context.Context, id string, d task.Decision, _ time.Duration) (task.DecisionRecord, bool, error) {
	ps, _ := reader{}.Pending(ctx, id, 0)
	for _, p := range ps {
		if p.RequestID != d.RequestID {
			continue
		}
		ask := task.PendingRequest{RequestID: p.RequestID, Kind: p.Kind, Suggestions: p.Suggestions, Questions: p.Questions}
		if err := d.Check(ask); err != nil {
			return task.DecisionRecord{}, false, &taskclient.InvalidDecisionError{TaskID: id, RequestID: d.RequestID, Err: err}
		}
	}
	r.record("decide %s %s allow=%v always=%s", id, d.RequestID, d.Allow, d.Always)
	r.author("decide", d.By)
	return task.DecisionRecord{TaskID: id, RequestID: d.RequestID, Outcome: task.OutcomeAllowed}, true, nil
}

// reader knows one task, "known", with one pending request "req-1" offering one suggestion.
type reader struct{}

func (reader) List(context.Context, taskview.Filter) ([]taskview.Summary, error) {
	return []taskview.Summary{{ID: "known", Status: task.StatusIdle}}, nil
}

func (reader) Show(_ context.Context, id string) (taskview.Detail, error) {
	if id != "known" {
		return taskview.Detail{}, fmt.Errorf("showing %s: %w", id, &taskview.NotFoundError{TaskID: id})
	}
	return taskview.Detail{Summary: taskview.Summary{ID: id, Status: task.StatusIdle}}, nil
}

func (reader) Pending(_ context.Context, id string, _ int) ([]taskview.PendingRequest, error) {
	if id != "" && id != "known" {
		return nil, nil
	}
	return []taskview.PendingRequest{{TaskID: "known", RequestID: "req-1", Tool: "Bash",
		Suggestions: []task.Suggestion{{Key: "1", Label: "Bash(ls:*)"}}}}, nil
}

// newServer serves the API with cfg's zero fields filled in: the recorder, the reader and a
// fresh database.
func newServer(t *testing.T, cfg api.Config) (*httptest.Server, *recorder) {
	t.Helper()
	rec := &recorder{}
	if cfg.Tasks == nil {
		cfg.Tasks = rec
	}
	if cfg.Decider == nil {
		cfg.Decider = rec
	}
	if cfg.Reader == nil {
		cfg.Reader = reader{}
	}
	if cfg.DB == nil {
		cfg.DB = pgtest.NewPool(t)
	}
	if cfg.Workspaces == nil {
		cfg.Workspaces = readerOf(t, "")
	}
	s, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts, rec
}

type answer struct {
	status int
	header http.Header
	body   []byte
	err    struct {
		Code, Message string
	}
}

func do(t *testing.T, ts *httptest.Server, method, path, body string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == "" {
		req.Body = http.NoBody
		req.ContentLength = 0
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
		if header[i] == "Host" {
			req.Host = header[i+1]
		}
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	a.body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 {
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(a.body, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Fatalf("%s %s: %d with a body that is not a JSON error: %q", method, path, resp.StatusCode, a.body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: error with Content-Type %q", method, path, ct)
		}
		a.err.Code, a.err.Message = e.Error.Code, e.Error.Message
	}
	return a
}

// Input that cannot run is refused with a 4xx, a stable code and a message, and nothing
// reaches the task.
func TestBadInputIsRefusedBeforeAnythingIsSent(t *testing.T) {
	t.Parallel()
	ts, rec := newServer(t, api.Config{MaxBodyBytes: 4096})
	ws := t.TempDir()
	big := `{"prompt":"` + strings.Repeat("x", 5000) + `","workspace":"` + ws + `"}`
	cases := []struct {
		name, method, path, body string
		header                   []string
		status                   int
		code                     string
	}{
		{"malformed json", "POST", "/api/v1/tasks", `{"prompt":`, nil, 400, api.CodeInvalidJSON},
		{"not an object", "POST", "/api/v1/tasks", `[1,2]`, nil, 400, api.CodeInvalidJSON},
		{"two values", "POST", "/api/v1/tasks", `{"prompt":"a","workspace":"` + ws + `"} {}`, nil, 400, api.CodeInvalidJSON},
		{"empty body", "POST", "/api/v1/tasks", ``, nil, 400, api.CodeInvalidJSON},
		{"unknown field", "POST", "/api/v1/tasks", `{"prompt":"a","workspace":"` + ws + `","sudo":true}`, nil, 400, api.CodeUnknownField},
		{"wrong type", "POST", "/api/v1/tasks", `{"prompt":"a","workspace":"` + ws + `","max_turns":"ten"}`, nil, 400, api.CodeInvalidJSON},
		{"bad duration", "POST", "/api/v1/tasks", `{"prompt":"a","workspace":"` + ws + `","idle_timeout":"soon"}`, nil, 400, api.CodeInvalidJSON},
		{"oversize body", "POST", "/api/v1/tasks", big, nil, 413, api.CodeBodyTooLarge},
		{"not json", "POST", "/api/v1/tasks", `prompt=a`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, api.CodeUnsupportedMedia},
		{"empty prompt", "POST", "/api/v1/tasks", `{"prompt":"  ","workspace":"` + ws + `"}`, nil, 400, api.CodeInvalidInput},
		{"no workspace", "POST", "/api/v1/tasks", `{"prompt":"a"}`, nil, 400, api.CodeInvalidInput},
		{"relative workspace", "POST", "/api/v1/tasks", `{"prompt":"a","workspace":"src"}`, nil, 400, api.CodeInvalidInput},
		{"attachment outside", "POST", "/api/v1/tasks", `{"prompt":"a","workspace":"` + ws + `","attachments":["../../etc/passwd"]}`, nil, 400, api.CodeInvalidInput},
		{"absolute attachment", "POST", "/api/v1/tasks", `{"prompt":"a","workspace":"` + ws + `","attachments":["/etc/passwd"]}`, nil, 400, api.CodeInvalidInput},
		{"unknown mode", "POST", "/api/v1/tasks", `{"prompt":"a","workspace":"` + ws + `","mode":"yolo"}`, nil, 400, api.CodeInvalidInput},
		{"negative max turns", "POST", "/api/v1/tasks", `{"prompt":"a","workspace":"` + ws + `","max_turns":-1}`, nil, 400, api.CodeInvalidInput},
		{"negative budget", "POST", "/api/v1/tasks", `{"prompt":"a","workspace":"` + ws + `","budget":{"max_cost_usd":-1}}`, nil, 400, api.CodeInvalidInput},
		{"bad task id", "POST", "/api/v1/tasks", `{"id":"-x","prompt":"a","workspace":"` + ws + `"}`, nil, 400, api.CodeInvalidInput},
		{"control key", "POST", "/api/v1/tasks", `{"prompt":"a","workspace":"` + ws + `"}`, []string{"Idempotency-Key", "a\tb"}, 400, api.CodeInvalidInput},
		{"long key", "POST", "/api/v1/tasks", `{"prompt":"a","workspace":"` + ws + `"}`, []string{"Idempotency-Key", strings.Repeat("k", 300)}, 400, api.CodeInvalidInput},
		{"bad id in path", "POST", "/api/v1/tasks/-x/prompts", `{"text":"a"}`, nil, 400, api.CodeInvalidID},
		{"id with a space", "GET", "/api/v1/tasks/a%20b", ``, nil, 400, api.CodeInvalidID},
		{"prompt unknown field", "POST", "/api/v1/tasks/known/prompts", `{"prompt":"a"}`, nil, 400, api.CodeUnknownField},
		{"prompt empty", "POST", "/api/v1/tasks/known/prompts", `{"text":""}`, nil, 400, api.CodeInvalidInput},
		{"prompt attachment outside", "POST", "/api/v1/tasks/known/prompts", `{"text":"a","attachments":["../x.png"]}`, nil, 400, api.CodeInvalidInput},
		{"control with a body", "POST", "/api/v1/tasks/known/cancel", `{"now":true}`, nil, 400, api.CodeUnknownField},
		{"unknown task", "GET", "/api/v1/tasks/nobody", ``, nil, 404, api.CodeNotFound},
		{"events of an unknown task", "GET", "/api/v1/tasks/nobody/events", ``, nil, 404, api.CodeNotFound},
		{"bad Last-Event-ID", "GET", "/api/v1/tasks/known/events", ``, []string{"Last-Event-ID", "abc"}, 400, api.CodeInvalidInput},
		{"negative after", "GET", "/api/v1/tasks/known/events?after=-1", ``, nil, 400, api.CodeInvalidInput},
		{"bad limit", "GET", "/api/v1/tasks/known/events?limit=0", ``, []string{"Accept", "application/json"}, 400, api.CodeInvalidInput},
		{"bad status", "GET", "/api/v1/tasks?status=sleeping", ``, nil, 400, api.CodeInvalidInput},
		{"bad awaiting", "GET", "/api/v1/tasks?awaiting_approval=maybe", ``, nil, 400, api.CodeInvalidInput},
		{"unknown decision", "POST", "/api/v1/tasks/known/approvals/req-1", `{"decision":"perhaps"}`, nil, 400, api.CodeInvalidInput},
		{"deny without message", "POST", "/api/v1/tasks/known/approvals/req-1", `{"decision":"deny"}`, nil, 400, api.CodeInvalidInput},
		{"always without allow_always", "POST", "/api/v1/tasks/known/approvals/req-1", `{"decision":"allow","always":"1"}`, nil, 400, api.CodeInvalidInput},
		{"allow_always of a request not pending", "POST", "/api/v1/tasks/known/approvals/req-9", `{"decision":"allow_always"}`, nil, 409, api.CodeNotPending},
		{"empty budget change", "POST", "/api/v1/tasks/known/budget", `{}`, nil, 400, api.CodeInvalidInput},
		{"negative budget change", "POST", "/api/v1/tasks/known/budget", `{"max_turns":-2}`, nil, 400, api.CodeInvalidInput},
		{"budget change unknown field", "POST", "/api/v1/tasks/known/budget", `{"max_tokens":2}`, nil, 400, api.CodeUnknownField},
		{"unknown route", "GET", "/api/v1/nothing", ``, nil, 404, api.CodeNotFound},
		{"wrong method", "DELETE", "/api/v1/tasks", ``, nil, 405, api.CodeMethodNotAllowed},
		{"no console", "GET", "/", ``, nil, 404, api.CodeNotFound},
	}
	for _, c := range cases {
		a := do(t, ts, c.method, c.path, c.body, c.header...)
		if a.status != c.status || a.err.Code != c.code {
			t.Errorf("%s: %d %s (%s), want %d %s", c.name, a.status, a.err.Code, a.err.Message, c.status, c.code)
		}
	}
	if sent := rec.sent(); len(sent) != 0 {
		t.Errorf("refused input reached the task: %q", sent)
	}
}

// The messages of refused input name the field and what is allowed.
func TestBadInputMessagesSayWhatToDo(t *testing.T) {
	t.Parallel()
	ts, _ := newServer(t, api.Config{})
	a := do(t, ts, "POST", "/api/v1/tasks", `{"prompt":"a","workspace":"/w","attachments":["../x.png"]}`)
	if !strings.Contains(a.err.Message, "attachments[0]") || !strings.Contains(a.err.Message, "relative path inside the workspace") {
		t.Errorf("attachment outside the workspace: %q", a.err.Message)
	}
	a = do(t, ts, "POST", "/api/v1/tasks", `{"prompt":"a","workspace":"/w","extra":1}`)
	if !strings.Contains(a.err.Message, `"extra"`) {
		t.Errorf("unknown field: %q", a.err.Message)
	}
	a = do(t, ts, "POST", "/api/v1/tasks/known/approvals/req-1", `{"decision":"deny"}`)
	if !strings.Contains(a.err.Message, "message") {
		t.Errorf("denial without message: %q", a.err.Message)
	}
}

// What the API sends for valid input is what the request said.
func TestValidRequestsReachTheTask(t *testing.T) {
	t.Parallel()
	ts, rec := newServer(t, api.Config{})
	ws := t.TempDir()
	if a := do(t, ts, "POST", "/api/v1/tasks", `{"id":"t1","prompt":"hello","cwd":"`+ws+`"}`); a.status != 201 {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	if a := do(t, ts, "POST", "/api/v1/tasks/t1/prompts", `{"text":"again"}`); a.status != 202 {
		t.Fatalf("prompt: %d %s", a.status, a.body)
	}
	for _, verb := range []string{"interrupt", "close", "cancel"} {
		if a := do(t, ts, "POST", "/api/v1/tasks/t1/"+verb, ``); a.status != 202 {
			t.Fatalf("%s: %d %s", verb, a.status, a.body)
		}
	}
	if a := do(t, ts, "POST", "/api/v1/tasks/t1/cancel", `{}`, "Content-Type", "application/json"); a.status != 202 {
		t.Fatalf("cancel with {}: %d %s", a.status, a.body)
	}
	if a := do(t, ts, "POST", "/api/v1/tasks/t1/budget", `{"max_cost_usd":2.5,"max_duration":"1h"}`); a.status != 200 {
		t.Fatalf("budget: %d %s", a.status, a.body)
	}
	if a := do(t, ts, "POST", "/api/v1/tasks/known/approvals/req-1", `{"decision":"allow_always"}`); a.status != 200 {
		t.Fatalf("decide: %d %s", a.status, a.body)
	}
	want := []string{
		`start t1 ` + ws + ` "hello" `, `prompt t1 "again"`, "interrupt t1", "close t1", "cancel t1", "cancel t1", "budget t1",
		"decide known req-1 allow=true always=1",
	}
	if got := rec.sent(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A managed task's creation carries its repository and base to the task; a relative path, a
// repository with a workspace, or an id that cannot name a branch is refused before anything
// is sent.
func TestCreateManagedTask(t *testing.T) {
	t.Parallel()
	ts, rec := newServer(t, api.Config{})
	if a := do(t, ts, "POST", "/api/v1/tasks", `{"id":"m1","prompt":"hello","repo":"https://git.example/a.git","base":"v1"}`); a.status != 201 {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	for _, bad := range []struct{ body, says string }{
		{`{"id":"m2","prompt":"hello","repo":"rel/dir"}`, "neither a URL nor an absolute path"},
		{`{"id":"m2","prompt":"hello","repo":"/r","workspace":"/w"}`, "is given with workspace"},
		{`{"id":"m.2","prompt":"hello","repo":"/r"}`, "cannot name a managed task's folder and branch"},
		{`{"id":"m2","prompt":"hello","workspace":"/w","base":"main"}`, "is given without repo"},
	} {
		a := do(t, ts, "POST", "/api/v1/tasks", bad.body)
		if a.status != 400 || !strings.Contains(a.err.Message, bad.says) {
			t.Errorf("%s: %d %q, want 400 saying %q", bad.body, a.status, a.err.Message, bad.says)
		}
	}
	want := []string{`start m1 repo https://git.example/a.git@v1 "hello" `}
	if got := rec.sent(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sent %q, want %q", got, want)
	}
}

const token = "0123456789abcdef-token-one"

// With tokens, every API route but /healthz and the OpenAPI document refuses a request without
// one of them, and nothing reaches the task.
func TestTokensAreRequired(t *testing.T) {
	t.Parallel()
	ts, rec := newServer(t, api.Config{Tokens: []string{"another-token-0123456789", token}})
	body := `{"prompt":"a","workspace":"/w"}`
	for _, h := range [][]string{
		nil,
		{"Authorization", "Bearer wrong-token-0123456789"},
		{"Authorization", "Bearer " + token + "x"},
		{"Authorization", "Basic " + token},
		{"Authorization", token},
	} {
		for _, r := range [][2]string{{"POST", "/api/v1/tasks"}, {"GET", "/api/v1/tasks"}, {"GET", "/api/v1/approvals"}, {"GET", "/api/v1/tasks/known/events"}} {
			a := do(t, ts, r[0], r[1], body, h...)
			if a.status != 401 || a.err.Code != api.CodeUnauthorized || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s with %q: %d %s", r[0], r[1], h, a.status, a.err.Code)
			}
			if strings.Contains(string(a.body), token) {
				t.Errorf("the answer shows the token: %s", a.body)
			}
		}
	}
	if sent := rec.sent(); len(sent) != 0 {
		t.Fatalf("an unauthorized request reached the task: %q", sent)
	}
	if a := do(t, ts, "GET", "/api/v1/tasks", "", "Authorization", "Bearer "+token); a.status != 200 {
		t.Errorf("with the token: %d %s", a.status, a.body)
	}
	if a := do(t, ts, "GET", "/api/v1/tasks", "", "Authorization", "bearer "+token); a.status != 200 {
		t.Errorf("with the scheme in lower case: %d %s", a.status, a.body)
	}
	for _, p := range []string{"/healthz", "/api/v1/openapi.json"} {
		if a := do(t, ts, "GET", p, ""); a.status != 200 {
			t.Errorf("%s without a token: %d", p, a.status)
		}
	}
}

func TestShortTokensAreRefused(t *testing.T) {
	t.Parallel()
	if _, err := api.New(api.Config{Tasks: &recorder{}, Decider: &recorder{}, Reader: reader{}, DB: pgtest.NewPool(t), Tokens: []string{"short"}}); err == nil {
		t.Fatal("a 5-byte token was accepted")
	}
}

func TestCheckExposure(t *testing.T) {
	t.Parallel()
	for addr, loopback := range map[string]bool{
		"127.0.0.1:8090": true, "127.0.0.2:80": true, "[::1]:8090": true, "localhost:8090": true,
		":8090": false, "0.0.0.0:8090": false, "[::]:8090": false, "192.168.1.10:8090": false, "example.com:80": false,
	} {
		err := api.CheckExposure(addr, 0)
		if loopback != (err == nil) {
			t.Errorf("%s without tokens: %v", addr, err)
		}
		if err != nil && !errors.Is(err, api.ErrExposedWithoutTokens) {
			t.Errorf("%s: %v", addr, err)
		}
		if err := api.CheckExposure(addr, 1); err != nil {
			t.Errorf("%s with a token: %v", addr, err)
		}
	}
}

// The OpenAPI document lists exactly the routes the server registers, and every route it lists
// answers: none is a 404 of an unknown route or a 405.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	ts, _ := newServer(t, api.Config{})
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	a := do(t, ts, "GET", "/api/v1/openapi.json", "")
	if err := json.Unmarshal(a.body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(documented)
	registered := api.Routes()
	sort.Strings(registered)
	if strings.Join(documented, "\n") != strings.Join(registered, "\n") {
		t.Fatalf("documented:\n%s\nregistered:\n%s", strings.Join(documented, "\n"), strings.Join(registered, "\n"))
	}
	param := regexp.MustCompile(`\{[a-z_]+\}`)
	for _, r := range documented {
		method, path, _ := strings.Cut(r, " ")
		path = param.ReplaceAllStringFunc(path, func(p string) string {
			if p == "{id}" {
				return "known"
			}
			return "req-1"
		})
		body := ""
		if method == "POST" {
			body = "{}"
		}
		hdr := []string{"Accept", "application/json"}
		a := do(t, ts, method, path, body, hdr...)
		if a.status == 405 || a.err.Code == api.CodeNotFound || a.status >= 500 {
			t.Errorf("%s: %d %s %s", r, a.status, a.err.Code, a.err.Message)
		}
	}
}

// The console, when given, answers every path outside the API; the API's paths stay the API's.
func TestConsoleIsMountedBehindTheAPI(t *testing.T) {
	t.Parallel()
	console := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "console "+r.URL.Path) })
	ts, _ := newServer(t, api.Config{Console: console})
	if a := do(t, ts, "GET", "/", ""); a.status != 200 || string(a.body) != "console /" {
		t.Errorf("/: %d %q", a.status, a.body)
	}
	if a := do(t, ts, "GET", "/tasks/x", ""); string(a.body) != "console /tasks/x" {
		t.Errorf("/tasks/x: %q", a.body)
	}
	if a := do(t, ts, "GET", "/api/v1/unknown", ""); a.status != 404 || a.err.Code != api.CodeNotFound {
		t.Errorf("an unknown API path went elsewhere: %d %q", a.status, a.body)
	}
	if a := do(t, ts, "GET", "/healthz", ""); a.status != 200 || !strings.Contains(string(a.body), "ok") {
		t.Errorf("/healthz: %d %q", a.status, a.body)
	}
}

// A page of another origin cannot drive the API, and without tokens a request must name a
// loopback host: nothing reaches the task.
func TestBrowsersOfOtherOriginsAreRefused(t *testing.T) {
	t.Parallel()
	ts, rec := newServer(t, api.Config{})
	host := strings.TrimPrefix(ts.URL, "http://")
	for _, c := range []struct {
		header []string
		status int
		code   string
	}{
		{[]string{"Origin", "https://evil.example"}, 403, api.CodeForbiddenOrigin},
		{[]string{"Origin", "http://localhost.evil.example:" + strings.Split(host, ":")[1]}, 403, api.CodeForbiddenOrigin},
		{[]string{"Host", "evil.example"}, 403, api.CodeForbiddenHost},
		{[]string{"Content-Type", "text/plain"}, 415, api.CodeUnsupportedMedia},
	} {
		if a := do(t, ts, "POST", "/api/v1/tasks/known/cancel", `{}`, c.header...); a.status != c.status || a.err.Code != c.code {
			t.Errorf("%q: %d %s", c.header, a.status, a.err.Code)
		}
	}
	if a := do(t, ts, "POST", "/api/v1/tasks/known/cancel", "", "Content-Type", "text/plain"); a.status != 415 {
		t.Errorf("an empty text/plain body: %d %s", a.status, a.err.Code)
	}
	if sent := rec.sent(); len(sent) != 0 {
		t.Fatalf("reached the task: %q", sent)
	}
	if a := do(t, ts, "POST", "/api/v1/tasks/known/cancel", ``, "Origin", "http://"+host); a.status != 202 {
		t.Errorf("the same origin: %d %s", a.status, a.body)
	}
}

// With the Temporal UI's address, every task names its page there.
func TestTemporalURL(t *testing.T) {
	t.Parallel()
	ts, _ := newServer(t, api.Config{TemporalUI: "http://127.0.0.1:8233/", Namespace: "prod"})
	var list struct {
		Tasks []struct {
			ID          string `json:"id"`
			TemporalURL string `json:"temporal_url"`
		} `json:"tasks"`
	}
	a := do(t, ts, "GET", "/api/v1/tasks", "")
	if err := json.Unmarshal(a.body, &list); err != nil || len(list.Tasks) != 1 ||
		list.Tasks[0].TemporalURL != "http://127.0.0.1:8233/namespaces/prod/workflows/known" {
		t.Fatalf("%s: %v", a.body, err)
	}
	a = do(t, ts, "GET", "/api/v1/tasks/known", "")
	if !strings.Contains(string(a.body), `"temporal_url":"http://127.0.0.1:8233/namespaces/prod/workflows/known"`) {
		t.Fatalf("show: %s", a.body)
	}
}

// A token's name is who the API records as doing what its requests do: a decision (whatever
// the body's by says), a prompt, a creation's first prompt, an interrupt, a cancel and a budget
// change; a bare token is named by its place; two tokens of one name are refused.
func TestTokensNameWhoActs(t *testing.T) {
	t.Parallel()
	ana, bare := "ana:0123456789abcdef-ana", "0123456789abcdef-bare"
	ts, rec := newServer(t, api.Config{Tokens: []string{ana, bare}})
	as := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	for _, c := range []struct{ path, body, tok string }{
		{"/api/v1/tasks/known/approvals/req-1", `{"decision":"allow","by":"somebody else"}`, "0123456789abcdef-ana"},
		{"/api/v1/tasks/known/prompts", `{"text":"go on"}`, "0123456789abcdef-ana"},
		{"/api/v1/tasks", `{"prompt":"a","workspace":"/w"}`, bare},
		{"/api/v1/tasks/known/interrupt", ``, bare},
		{"/api/v1/tasks/known/cancel", ``, "0123456789abcdef-ana"},
		{"/api/v1/tasks/known/budget", `{"max_turns":3}`, bare},
	} {
		if a := do(t, ts, "POST", c.path, c.body, as(c.tok)...); a.status >= 300 {
			t.Fatalf("%s: %d %s", c.path, a.status, a.body)
		}
	}
	// The full token is no name: "ana:…" as a bearer token is refused.
	if a := do(t, ts, "GET", "/api/v1/tasks", "", as(ana)...); a.status != 401 {
		t.Errorf("name:token as the bearer token: %d", a.status)
	}
	want := []string{"decide by ana", "prompt by ana", "start by token-2", "interrupt by token-2", "cancel by ana", "budget by token-2"}
	rec.mu.Lock()
	got := append([]string(nil), rec.authors...)
	rec.mu.Unlock()
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("recorded authors:\n%q\nwant:\n%q", got, want)
	}
	if _, err := api.New(api.Config{Tasks: &recorder{}, Decider: &recorder{}, Reader: reader{}, DB: pgtest.NewPool(t),
		Tokens: []string{"ci:0123456789abcdef-one", "ci:0123456789abcdef-two"}}); err == nil || !strings.Contains(err.Error(), "ci") {
		t.Errorf("two tokens named ci: %v", err)
	}
}

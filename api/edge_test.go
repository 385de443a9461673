package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/taskview"
)

// Every string a request carries is text: a NUL byte or invalid UTF-8 in a body field, a path
// segment, a query parameter or a header is refused with a 400 that names where it was, and
// nothing reaches the task. The reads go to Postgres, which stores neither.
func TestTextIsCheckedAtTheEdge(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	ts, rec := newServer(t, api.Config{DB: db, Reader: taskview.New(db)})
	ws := t.TempDir()
	create := func(field string) string {
		return `{"prompt":"a","workspace":"` + ws + `",` + field + `}`
	}
	cases := []struct {
		name, method, path, body string
		header                   []string
		field                    string
	}{
		{"NUL in a prompt", "POST", "/api/v1/tasks", `{"prompt":"a\u0000b","workspace":"` + ws + `"}`, nil, "prompt"},
		{"NUL in a model", "POST", "/api/v1/tasks", create(`"model":"m\u0000"`), nil, "model"},
		{"NUL in a system prompt", "POST", "/api/v1/tasks", create(`"system_prompt":"\u0000"`), nil, "system_prompt"},
		{"NUL in a workspace", "POST", "/api/v1/tasks", `{"prompt":"a","workspace":"` + ws + `\u0000x"}`, nil, "workspace"},
		{"NUL in an attachment", "POST", "/api/v1/tasks", create(`"attachments":["a.png","b\u0000.png"]`), nil, "attachments[1]"},
		{"bad UTF-8 in a prompt", "POST", "/api/v1/tasks", "{\"prompt\":\"a\xffb\",\"workspace\":\"" + ws + "\"}", nil, "prompt"},
		{"bad UTF-8 in a model", "POST", "/api/v1/tasks", create("\"model\":\"\xc3\""), nil, "model"},
		{"bad UTF-8 in a budget", "POST", "/api/v1/tasks", create("\"budget\":{\"max_duration\":\"1\xffh\"}"), nil, "budget.max_duration"},
		{"NUL in a prompt sent", "POST", "/api/v1/tasks/known/prompts", `{"text":"\u0000"}`, nil, "text"},
		{"bad UTF-8 in a prompt sent", "POST", "/api/v1/tasks/known/prompts", "{\"text\":\"\xfe\"}", nil, "text"},
		{"NUL in an answer", "POST", "/api/v1/tasks/known/approvals/req-1", `{"decision":"allow","answers":{"q":["\u0000"]}}`, nil, "answers.q[0]"},
		{"NUL in a denial", "POST", "/api/v1/tasks/known/approvals/req-1", `{"decision":"deny","message":"no\u0000"}`, nil, "message"},
		{"NUL in a request id", "POST", "/api/v1/tasks/known/approvals/a%00b", `{"decision":"allow"}`, nil, "path"},
		{"bad UTF-8 in a request id", "POST", "/api/v1/tasks/known/approvals/%FF", `{"decision":"allow"}`, nil, "path"},
		{"bad UTF-8 in a task id", "GET", "/api/v1/tasks/%FF", ``, nil, "path"},
		{"NUL in a listing's q", "GET", "/api/v1/tasks?q=a%00b", ``, nil, "query parameter q"},
		{"bad UTF-8 in a listing's q", "GET", "/api/v1/tasks?q=%FF", ``, nil, "query parameter q"},
		{"bad UTF-8 in a status", "GET", "/api/v1/tasks?status=%C3", ``, nil, "query parameter status"},
		{"a broken query", "GET", "/api/v1/tasks?q=%zz", ``, nil, "query"},
		{"non-ASCII Idempotency-Key", "POST", "/api/v1/tasks", create(`"model":"m"`), []string{"Idempotency-Key", "cl\xe9"}, "header Idempotency-Key"},
		{"UTF-8 Idempotency-Key", "POST", "/api/v1/tasks", create(`"model":"m"`), []string{"Idempotency-Key", "clé"}, "header Idempotency-Key"},
		{"bad UTF-8 in Last-Event-ID", "GET", "/api/v1/tasks/known/events", ``, []string{"Last-Event-ID", "\xff"}, "header Last-Event-Id"},
		{"bad UTF-8 in any header", "GET", "/api/v1/tasks", ``, []string{"User-Agent", "probe\xff"}, "header User-Agent"},
	}
	for _, c := range cases {
		a := do(t, ts, c.method, c.path, c.body, c.header...)
		if a.status != 400 || a.err.Code != api.CodeInvalidInput || !strings.HasPrefix(a.err.Message, c.field+": ") {
			t.Errorf("%s: %d %s %q, want 400 invalid_input naming %s", c.name, a.status, a.err.Code, a.err.Message, c.field)
		}
	}
	if sent := rec.sent(); len(sent) != 0 {
		t.Errorf("refused input reached the task: %q", sent)
	}
	// Text that is text passes: a NUL's escape as characters, and UTF-8 beyond ASCII.
	if a := do(t, ts, "POST", "/api/v1/tasks", `{"prompt":"é \\u0000 ✓","workspace":"`+ws+`"}`); a.status != 201 {
		t.Errorf("a prompt of plain text: %d %s", a.status, a.body)
	}
	if a := do(t, ts, "GET", "/api/v1/tasks?q=%C3%A9", ""); a.status != 200 {
		t.Errorf("a query in UTF-8: %d %s", a.status, a.body)
	}
}

// Every answer of the API tells caches not to keep it.
func TestAnswersAreNotCached(t *testing.T) {
	t.Parallel()
	ts, _ := newServer(t, api.Config{})
	for _, p := range []string{"/api/v1/tasks", "/api/v1/tasks/known", "/api/v1/tasks/nobody", "/api/v1/nothing", "/healthz", "/api/v1/openapi.json"} {
		if a := do(t, ts, "GET", p, ""); a.header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: %d with Cache-Control %q", p, a.status, a.header.Get("Cache-Control"))
		}
	}
}

// panicGuard turns a panic of the handler into a failure of the fuzz test rather than a
// dropped connection.
type panicGuard struct {
	h  http.Handler
	mu sync.Mutex
	p  []string
}

func (g *panicGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			g.mu.Lock()
			g.p = append(g.p, fmt.Sprintf("%s %q: %v", r.Method, r.URL.String(), v))
			g.mu.Unlock()
			panic(v)
		}
	}()
	g.h.ServeHTTP(w, r)
}

func (g *panicGuard) panics() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.p...)
}

// FuzzHandler sends the API any method, path, header and body: whatever comes, the answer is
// never a 5xx, and the handler never panics. The reads go to Postgres. make test runs the
// seeds; make fuzz runs it for longer.
func FuzzHandler(f *testing.F) {
	db := pgtest.NewPool(f)
	s, err := api.New(api.Config{Tasks: &recorder{}, Decider: &recorder{}, Reader: taskview.New(db), DB: db,
		StreamIdleTimeout: 20 * time.Millisecond, RequestTimeout: 10 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	guard := &panicGuard{h: s.Handler()}
	ts := httptest.NewServer(guard)
	f.Cleanup(ts.Close)
	for _, seed := range []struct{ method, path, hname, hvalue, body string }{
		{"POST", "/api/v1/tasks", "Idempotency-Key", "k1", `{"prompt":"a","workspace":"/w"}`},
		{"POST", "/api/v1/tasks", "Idempotency-Key", "cl\xe9", `{"prompt":"a\u0000","workspace":"/w","model":"\xff"}`},
		{"GET", "/api/v1/tasks?q=a%00b", "Accept", "application/json", ``},
		{"GET", "/api/v1/tasks?q=%FF&status=idle", "", "", ``},
		{"GET", "/api/v1/tasks/known/events?after=1", "Last-Event-ID", "\xff", ``},
		{"GET", "/api/v1/tasks/known/events?limit=2", "Accept", "application/json", ``},
		{"POST", "/api/v1/tasks/known/approvals/%FF", "Content-Type", "application/json", `{"decision":"allow_always"}`},
		{"POST", "/api/v1/tasks/known/approvals/a%00b", "", "", `{"decision":"deny","message":"x"}`},
		{"POST", "/api/v1/tasks/known/prompts", "Content-Type", "text/plain", `{"text":"x"}`},
		{"POST", "/api/v1/tasks/known/budget", "", "", `{"max_duration":"-1h","max_cost_usd":1e309}`},
		{"POST", "/api/v1/tasks/known/interrupt", "Origin", "http://elsewhere", ``},
		{"DELETE", "/api/v1/tasks/%2F..%2F", "Authorization", "Bearer \x00", `[]`},
		{"GET", "/api/v1/approvals", "Accept", "*/*;q=\xff", ``},
	} {
		f.Add(seed.method, seed.path, seed.hname, seed.hvalue, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, method, path, hname, hvalue string, body []byte) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a client can send
		}
		if hname != "" {
			req.Header.Set(hname, hvalue)
		}
		resp, err := ts.Client().Do(req)
		if p := guard.panics(); len(p) > 0 {
			t.Fatalf("the handler panicked: %s", p[0])
		}
		if err != nil {
			return // refused by the client or by net/http before the handler
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 500 {
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			t.Fatalf("%s %q (%s: %q) %q: %d %s", method, path, hname, hvalue, body, resp.StatusCode, b.String())
		}
	})
}

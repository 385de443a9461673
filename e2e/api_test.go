package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.yaml.in/yaml/v3"

	"github.com/drover-run/drover/events"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// apiToken is the token the tests' API servers accept; no log may show it.
const apiToken = "e2e-api-token-0123456789abcdef"

// apiServer is a `drover serve` process of a test.
type apiServer struct {
	e    *env
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	log  *lockedBuffer
	// token is sent with every request; empty sends none.
	token string
}

// serveEnv is the environment of `drover serve` in the test's world.
func (e *env) serveEnv(extra ...string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + e.home,
		"DROVER_DATABASE_URL=" + e.dsn,
		"TEMPORAL_ADDRESS=" + e.temporal,
		"TEMPORAL_NAMESPACE=" + e.namespace,
		"DROVER_TASK_QUEUE=" + e.queue,
		"DROVER_LOG_LEVEL=debug",
	}, extra...)
}

// startAPI runs `drover serve` on a free loopback port and waits until it listens.
func (e *env) startAPI(extraEnv ...string) *apiServer {
	e.t.Helper()
	return e.startAPIWith([]string{"serve", "--listen", "127.0.0.1:0"}, extraEnv...)
}

// startAPIWith runs drover with args (a serve command) and waits until it listens.
func (e *env) startAPIWith(args []string, extraEnv ...string) *apiServer {
	e.t.Helper()
	cmd := exec.Command(suite.drover, args...)
	cmd.Env = e.serveEnv(extraEnv...)
	s := &apiServer{e: e, cmd: cmd, done: make(chan struct{}), log: &lockedBuffer{}}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stderr = s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			_, _ = s.log.Write([]byte(line + "\n"))
			if rest, ok := strings.CutPrefix(line, "drover api listening on "); ok {
				urls <- strings.Fields(rest)[0]
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(s.done) }()
	e.t.Cleanup(func() {
		s.stop()
		if e.t.Failed() {
			e.t.Logf("drover serve log:\n%s", s.log.String())
		}
		if strings.Contains(s.log.String(), apiToken) {
			e.t.Errorf("drover serve logged its token")
		}
	})
	select {
	case s.url = <-urls:
	case <-s.done:
		e.t.Fatalf("drover serve exited:\n%s", s.log.String())
	case <-time.After(60 * time.Second):
		e.t.Fatalf("drover serve did not listen:\n%s", s.log.String())
	}
	return s
}

func (s *apiServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// reply is an answer of the API.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) errCode() string {
	var e struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

// call sends one request and reads the whole answer. header is name, value pairs.
func (s *apiServer) call(method, path, body string, header ...string) reply {
	s.e.t.Helper()
	req, err := http.NewRequestWithContext(s.e.ctx, method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// must is call, failing the test unless the answer has status want; it decodes the body into out.
func (s *apiServer) must(want int, out any, method, path, body string, header ...string) reply {
	s.e.t.Helper()
	r := s.call(method, path, body, header...)
	if r.status != want {
		s.e.t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, want)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			s.e.t.Fatalf("%s %s: %v in %s", method, path, err, r.body)
		}
	}
	return r
}

type createdJSON struct {
	Task struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"task"`
	Prompt struct {
		TaskID     string `json:"task_id"`
		Turn       int    `json:"turn"`
		PromptUUID string `json:"prompt_uuid"`
	} `json:"prompt"`
}

// A creation sent again with the same Idempotency-Key and body answers the first task and
// creates nothing more: the fake API is asked the prompt once, and the task has one turn. The
// same key with another body is refused, and nothing is sent.
func TestAPICreateIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	s := e.startAPI()
	const prompt = "say the idempotent word"
	body := fmt.Sprintf(`{"prompt":%q,"workspace":%q,"mode":"autonomous"}`, prompt, e.workspace)
	key := uuid.NewString()

	var first, again createdJSON
	s.must(201, &first, "POST", "/api/v1/tasks", body, "Idempotency-Key", key)
	if first.Task.ID == "" || first.Prompt.TaskID != first.Task.ID || first.Prompt.Turn != 1 {
		t.Fatalf("created: %+v", first)
	}
	// The same request, spaced differently: the same task.
	r := s.must(201, &again, "POST", "/api/v1/tasks", " "+strings.ReplaceAll(body, ",", ", ")+"\n", "Idempotency-Key", key)
	if again != first || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("sent again: %+v (replayed %q), first %+v", again, r.header.Get("Idempotent-Replayed"), first)
	}
	other := fmt.Sprintf(`{"prompt":"another prompt","workspace":%q}`, e.workspace)
	if r := s.call("POST", "/api/v1/tasks", other, "Idempotency-Key", key); r.status != 422 || r.errCode() != "idempotency_key_reused" {
		t.Fatalf("the key with another body: %d %s", r.status, r.body)
	}
	id := first.Task.ID
	st := e.waitTurns(id, 1)
	// Sent a third time after the turn ran: still the first answer, and no second turn.
	s.must(201, &again, "POST", "/api/v1/tasks", body, "Idempotency-Key", key)
	if again.Prompt != first.Prompt {
		t.Fatalf("after the turn: %+v, first %+v", again.Prompt, first.Prompt)
	}
	// Without a key, the same body is a new task.
	var fresh createdJSON
	s.must(201, &fresh, "POST", "/api/v1/tasks", body)
	if fresh.Task.ID == id {
		t.Fatal("a creation without a key got the keyed task")
	}
	e.waitTurns(fresh.Task.ID, 1)

	st, err := e.tc.State(e.ctx, id)
	if err != nil || st.Turn != 1 || st.Totals.Turns != 1 {
		t.Fatalf("state: %+v, %v", st, err)
	}
	// The witness: the fake API saw the prompt in two conversations' first requests (the keyed
	// task's and the fresh one's), never a third, and never "another prompt".
	asked := 0
	for _, req := range e.fake.MainRequests() {
		if strings.Contains(req.LastUserText(), "another prompt") {
			t.Fatal("the refused body reached the model")
		}
		if strings.Contains(req.LastUserText(), prompt) {
			asked++
		}
	}
	if asked != 2 {
		t.Fatalf("the model was asked the prompt %d times, want 2 (one per task)", asked)
	}
	var show struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	s.must(200, &show, "GET", "/api/v1/tasks/"+id, "")
	if show.ID != id {
		t.Fatalf("show: %+v", show)
	}
}

// sseEvent is one event of a stream.
type sseEvent struct {
	id, event, data string
}

// readEvents reads n events from an event stream of the API, from after (as Last-Event-ID
// when header is true, else ?after), and closes it.
func (s *apiServer) readEvents(taskID string, after int64, n int) []sseEvent {
	s.e.t.Helper()
	ctx, cancel := context.WithTimeout(s.e.ctx, time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/api/v1/tasks/"+taskID+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	if after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		s.e.t.Fatalf("events: %d %s", resp.StatusCode, b)
	}
	br := bufio.NewReader(resp.Body)
	var out []sseEvent
	var cur sseEvent
	for len(out) < n {
		line, err := br.ReadString('\n')
		if err != nil {
			s.e.t.Fatalf("after %d of %d events: %v", len(out), n, err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && cur.id != "":
			out = append(out, cur)
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return out
}

// An event stream gives the task's log with id = seq; a client that leaves and reconnects with
// Last-Event-ID gets exactly the events it missed. The witnesses: the log in Postgres, the
// command line's drover task watch, and the fake API, whose answers the streamed messages carry.
func TestAPIEventStreamResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	s := e.startAPI()
	e.fake.Enqueue(fa.Reply(fa.Text("first answer from the model")), fa.Reply(fa.Text("second answer from the model")))
	id := e.taskID("stream")
	body := fmt.Sprintf(`{"id":%q,"prompt":"one","workspace":%q}`, id, e.workspace)
	s.must(201, nil, "POST", "/api/v1/tasks", body)
	e.waitTurns(id, 1)
	log1 := e.events(id)

	// A stream opened before the second turn sees it live.
	half := len(log1) / 2
	head := s.readEvents(id, 0, half)
	s.must(202, nil, "POST", "/api/v1/tasks/"+id+"/prompts", `{"text":"two"}`)
	e.waitTurns(id, 2)
	log := e.events(id)
	last := head[len(head)-1].id
	lastSeq, _ := strconv.ParseInt(last, 10, 64)
	rest := s.readEvents(id, lastSeq, len(log)-half)
	streamed := append(head, rest...)

	// Against the log: the same seqs, in order, with nothing missing or repeated.
	if len(streamed) != len(log) {
		t.Fatalf("streamed %d events, the log has %d", len(streamed), len(log))
	}
	var texts strings.Builder
	for i, ev := range streamed {
		want := log[i]
		var data struct {
			Seq   int64           `json:"seq"`
			Type  string          `json:"type"`
			Event json.RawMessage `json:"event"`
		}
		if err := json.Unmarshal([]byte(ev.data), &data); err != nil {
			t.Fatal(err)
		}
		if ev.id != strconv.FormatInt(want.Seq, 10) || data.Seq != want.Seq || ev.event != want.Type || data.Type != want.Type {
			t.Fatalf("event %d: id %s type %s, the log has seq %d type %s", i, ev.id, ev.event, want.Seq, want.Type)
		}
		var a events.AgentEvent
		if err := json.Unmarshal(data.Event, &a); err != nil {
			t.Fatal(err)
		}
		texts.WriteString(a.Text)
	}
	// Against the command line: drover task watch prints the same events.
	out := e.mustDrover("task", "watch", id, "--follow=false", "--output", "json")
	var seqs []string
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		var l struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("watch line %q: %v", line, err)
		}
		seqs = append(seqs, strconv.FormatInt(l.Seq, 10))
	}
	var ids []string
	for _, ev := range streamed {
		ids = append(ids, ev.id)
	}
	if strings.Join(seqs, ",") != strings.Join(ids, ",") {
		t.Fatalf("drover task watch: %v, the stream: %v", seqs, ids)
	}
	// Against the fake API: what it answered is what the stream carries.
	for _, answer := range []string{"first answer from the model", "second answer from the model"} {
		if !strings.Contains(texts.String(), answer) {
			t.Errorf("the stream does not carry the model's %q", answer)
		}
	}
	// Pages of JSON give the same log.
	var page struct {
		Events []struct {
			Seq int64 `json:"seq"`
		} `json:"events"`
		NextAfter int64 `json:"next_after"`
	}
	s.must(200, &page, "GET", "/api/v1/tasks/"+id+"/events?after="+last+"&limit=2", "", "Accept", "application/json")
	if len(page.Events) != 2 || page.Events[0].Seq != lastSeq+1 || page.NextAfter != lastSeq+2 {
		t.Fatalf("page after %s: %+v", last, page)
	}
}

// A supervised task's requests are listed across tasks and decided through the API: an
// approval lets the tool run (the file it writes appears), a denial keeps it from running and
// the model reads the denial's message.
func TestAPIApproveAndDeny(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker("host-" + e.queue)
	s := e.startAPI()
	id := e.taskID("api-supervised")
	marker := filepath.Join(e.workspace, "approved.txt")
	e.fake.Enqueue(
		fa.Reply(fa.Text("I will write the marker."), fa.UseBash("echo approved > "+marker)),
		fa.Reply(fa.Text("Marker written.")),
		fa.Reply(fa.UseBash("rm -rf "+e.workspace)),
		fa.Reply(fa.Text("Understood, I will not delete it.")),
	)
	body := fmt.Sprintf(`{"id":%q,"prompt":"write the marker","workspace":%q,"mode":"supervised"}`, id, e.workspace)
	s.must(201, nil, "POST", "/api/v1/tasks", body)

	type approvals struct {
		Approvals []struct {
			TaskID    string `json:"task_id"`
			RequestID string `json:"request_id"`
			Tool      string `json:"tool"`
			Summary   string `json:"summary"`
		} `json:"approvals"`
	}
	waitRequest := func(what string) string {
		var found string
		e.waitFor("the API to list a request about "+what, func() bool {
			var a approvals
			s.must(200, &a, "GET", "/api/v1/approvals", "")
			for _, r := range a.Approvals {
				if r.TaskID == id && strings.Contains(r.Summary, what) {
					found = r.RequestID
				}
			}
			return found != ""
		})
		return found
	}
	req := waitRequest("echo approved")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the tool ran before anybody approved it")
	}
	e.waitFor("the task to be listed as awaiting approval", func() bool {
		var awaiting struct {
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
		}
		s.must(200, &awaiting, "GET", "/api/v1/tasks?awaiting_approval=true", "")
		return len(awaiting.Tasks) == 1 && awaiting.Tasks[0].ID == id
	})
	var decided struct {
		Delivered bool `json:"delivered"`
		Decision  struct {
			Outcome string `json:"outcome"`
			By      string `json:"by"`
		} `json:"decision"`
	}
	s.must(200, &decided, "POST", "/api/v1/tasks/"+id+"/approvals/"+req, `{"decision":"allow","by":"alice"}`)
	if !decided.Delivered || decided.Decision.Outcome != "allowed" || decided.Decision.By != "alice" {
		t.Fatalf("decision: %+v", decided)
	}
	e.waitTurns(id, 1)
	if b, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(b)) != "approved" {
		t.Fatalf("the approved tool did not run: %q, %v", b, err)
	}
	// Deciding it again is refused with a code a client can branch on.
	if r := s.call("POST", "/api/v1/tasks/"+id+"/approvals/"+req, `{"decision":"deny","message":"late"}`); r.status != 409 || r.errCode() != "not_pending" {
		t.Fatalf("a second decision: %d %s", r.status, r.body)
	}

	s.must(202, nil, "POST", "/api/v1/tasks/"+id+"/prompts", `{"text":"clean up"}`)
	req = waitRequest("rm -rf")
	const why = "never delete the workspace"
	s.must(200, &decided, "POST", "/api/v1/tasks/"+id+"/approvals/"+req, fmt.Sprintf(`{"decision":"deny","message":%q,"by":"bob"}`, why))
	e.waitTurns(id, 2)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the denied command ran: %v", err)
	}
	reqs := e.fake.MainRequests()
	var sawReason bool
	for _, tr := range reqs[len(reqs)-1].ToolResults() {
		sawReason = sawReason || (tr.IsError && strings.Contains(tr.Content, why))
	}
	if !sawReason {
		t.Fatalf("the model did not read the denial's message: %+v", reqs[len(reqs)-1].ToolResults())
	}
	rows, err := store.ListTaskPermissions(e.ctx, e.db(), id)
	if err != nil || len(rows) != 2 || rows[0].DecidedBy != "alice" || rows[1].DecidedBy != "bob" {
		t.Fatalf("request rows: %+v, %v", rows, err)
	}
}

// Input that cannot run is a 4xx with a JSON error against the real stack too, and nothing
// reaches Temporal: no task is created.
func TestAPIBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.startAPI()
	id := e.taskID("never")
	for _, c := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/api/v1/tasks", `{"id":"` + id + `","prompt":`, 400, "invalid_json"},
		{"POST", "/api/v1/tasks", `{"id":"` + id + `","prompt":"a","workspace":"` + e.workspace + `","admin":true}`, 400, "unknown_field"},
		{"POST", "/api/v1/tasks", `{"id":"` + id + `","prompt":"a","workspace":"` + e.workspace + `","attachments":["../../etc/passwd"]}`, 400, "invalid_input"},
		{"POST", "/api/v1/tasks", `{"id":"` + id + `","prompt":"` + strings.Repeat("x", task.MaxPromptBytes+100<<10) + `","workspace":"/w"}`, 413, "body_too_large"},
		{"POST", "/api/v1/tasks", `{"id":"` + id + `","prompt":"` + strings.Repeat("\\\\", task.MaxPromptBytes/2+10) + `","workspace":"/w"}`, 400, "invalid_input"},
		{"POST", "/api/v1/tasks/-bad/prompts", `{"text":"a"}`, 400, "invalid_id"},
		{"POST", "/api/v1/tasks/" + id + "/prompts", `{"text":"a"}`, 404, "not_found"},
		{"POST", "/api/v1/tasks/" + id + "/interrupt", ``, 404, "not_found"},
		{"POST", "/api/v1/tasks/" + id + "/cancel", ``, 404, "not_found"},
		{"GET", "/api/v1/tasks/" + id, ``, 404, "not_found"},
		{"GET", "/api/v1/tasks/" + id + "/events", ``, 404, "not_found"},
		{"POST", "/api/v1/tasks/" + id + "/approvals/req", `{"decision":"allow"}`, 404, "not_found"},
	} {
		r := s.call(c.method, c.path, c.body)
		if r.status != c.status || r.errCode() != c.code {
			t.Errorf("%s %s: %d %.300s, want %d %s", c.method, c.path, r.status, r.body, c.status, c.code)
		}
	}
	if _, err := e.tc.State(e.ctx, id); err == nil {
		t.Fatal("a refused creation made the task")
	}
}

// With tokens, a request without one or with a wrong one is refused and reaches nothing; the
// right one passes. No token shows in the server's log.
func TestAPITokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tokenFile := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokenFile, []byte("# the API's tokens\n"+apiToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := e.startAPI("DROVER_API_TOKEN_FILE=" + tokenFile)
	id := e.taskID("token")
	body := fmt.Sprintf(`{"id":%q,"prompt":"a","workspace":%q}`, id, e.workspace)
	for _, tok := range []string{"", "wrong-token-0123456789abcdef", apiToken + "x"} {
		s.token = tok
		for _, r := range [][3]string{{"POST", "/api/v1/tasks", body}, {"GET", "/api/v1/tasks", ""}, {"GET", "/api/v1/approvals", ""}} {
			if a := s.call(r[0], r[1], r[2]); a.status != 401 || a.errCode() != "unauthorized" {
				t.Errorf("%s %s with token %q: %d %s", r[0], r[1], tok, a.status, a.body)
			}
		}
	}
	if _, err := e.tc.State(e.ctx, id); err == nil {
		t.Fatal("an unauthorized creation made the task")
	}
	s.token = apiToken
	s.must(200, nil, "GET", "/api/v1/tasks", "")
	s.token = ""
	s.must(200, nil, "GET", "/healthz", "")
}

// drover serve on an address beyond loopback refuses to start without tokens, and starts with
// them (DROVER_API_TOKENS).
func TestAPIRefusesExposureWithoutTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite.drover, "serve", "--listen", "0.0.0.0:0")
	cmd.Env = e.serveEnv()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refusing to listen beyond loopback without credentials") ||
		!strings.Contains(string(out), "DROVER_API_TOKENS") {
		t.Fatalf("drover serve --listen 0.0.0.0:0 without tokens: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "listening on") {
		t.Fatalf("it listened:\n%s", out)
	}

	cmd = exec.Command(suite.drover, "serve", "--listen", "0.0.0.0:0")
	cmd.Env = e.serveEnv("DROVER_API_TOKENS=" + apiToken)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "drover api listening on http://") {
		t.Fatalf("with a token: %q, %v\n%s", line, err, stderr.String())
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("drover serve did not stop cleanly on SIGTERM: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), apiToken) {
		t.Fatal("drover serve logged its token")
	}
}

// A decision through the API needs no running worker: with the task's only worker killed, the
// API records the approval and answers that it is not delivered yet; a second decision is
// refused as already decided; a worker comes back and the tool runs (the file it writes exists).
func TestAPIDecisionWithoutWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := "host-" + e.queue
	w := e.startWorker(host)
	s := e.startAPI()
	ran := filepath.Join(e.workspace, "ran.txt")
	e.setResponder(func(r *fa.Request) (fa.Response, bool) {
		if r.Class != fa.ClassMain || len(r.Messages) == 0 {
			return fa.Response{}, false
		}
		if trs := r.Messages[len(r.Messages)-1].ToolResults(); len(trs) > 0 {
			return fa.Reply(fa.Text("It ran.")), true
		}
		return fa.Reply(fa.Text("I will run it."), fa.UseBash("echo ran-approved | tee -a "+ran)), true
	})
	id := e.taskID("api-noworker")
	s.must(201, nil, "POST", "/api/v1/tasks", fmt.Sprintf(`{"id":%q,"prompt":"run the command","workspace":%q,"mode":"supervised"}`, id, e.workspace))
	req := e.waitAsked(id, "echo ran-approved")
	w.kill()
	e.waitWithin(reapBound, "the CLI to die with its worker", func() bool { return len(taggedProcesses(host)) == 0 })

	var decided struct {
		Delivered bool            `json:"delivered"`
		Decision  json.RawMessage `json:"decision"`
	}
	s.must(200, &decided, "POST", "/api/v1/tasks/"+id+"/approvals/"+req.RequestID, `{"decision":"allow","by":"carol"}`)
	if decided.Delivered || decided.Decision != nil {
		t.Fatalf("with no worker: %+v", decided)
	}
	if r := s.call("POST", "/api/v1/tasks/"+id+"/approvals/"+req.RequestID, `{"decision":"deny","message":"no"}`); r.status != 409 || r.errCode() != "already_decided" {
		t.Fatalf("a second decision: %d %s", r.status, r.body)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the tool ran with no worker")
	}
	e.startWorker(host)
	e.waitTurns(id, 1)
	if b, err := os.ReadFile(ran); err != nil || strings.TrimSpace(string(b)) != "ran-approved" {
		t.Fatalf("the approved tool did not run once: %q, %v", b, err)
	}
	if row := e.row(id, req.RequestID); row.Status != task.OutcomeAllowed || row.DecidedBy != "carol" {
		t.Fatalf("the request's row: %s by %q", row.Status, row.DecidedBy)
	}
}

// The api service of docker-compose.yml, run as compose runs it (its command, its tokens from the
// environment; the database and Temporal are the test's): it serves the console at /, /healthz
// without a token, and the API only with one.
func TestComposeAPIServesConsole(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	args := slices.Clone(doc.Services["api"].Command)
	i := slices.Index(args, "--listen")
	if i < 0 {
		t.Fatalf("the api service runs %v, with no --listen", args)
	}
	args[i+1] = "0.0.0.0:0" // the container's every interface, on a free port
	e := newEnv(t)
	s := e.startAPIWith(args, "DROVER_API_TOKENS="+apiToken)
	s.url = strings.Replace(s.url, "0.0.0.0", "127.0.0.1", 1)
	page := s.must(200, nil, "GET", "/", "")
	if !strings.Contains(string(page.body), "<html") || !strings.Contains(page.header.Get("Content-Type"), "text/html") {
		t.Errorf("/ is not the console: %s %q", page.header.Get("Content-Type"), page.body)
	}
	s.must(200, nil, "GET", "/healthz", "")
	if a := s.call("GET", "/api/v1/tasks", ""); a.status != 401 {
		t.Errorf("the API without a token: %d %s", a.status, a.body)
	}
	s.token = apiToken
	s.must(200, nil, "GET", "/api/v1/tasks", "")
}

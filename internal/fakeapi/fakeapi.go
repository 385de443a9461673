// Package fakeapi serves drover's HTTP API contract (/api/v1) from memory, for the web console's
// browser tests and benchmark: tasks, their event logs (JSON pages and text/event-stream with
// Last-Event-ID), pending requests and decisions. It keeps a ledger of every call it was sent,
// the witness of what the page did. Events are stored as the events package encodes them; the
// recorded timeline (Timeline) comes from the adapter's golden outputs of real CLI sessions.
package fakeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Task is a task as the API lists it (the contract's Task summary), with the details of
// GET /api/v1/tasks/{id}.
type Task struct {
	ID               string           `json:"id"`
	Title            string           `json:"title,omitempty"`
	Status           string           `json:"status"`
	Mode             string           `json:"mode,omitempty"`
	Model            string           `json:"model,omitempty"`
	Workspace        string           `json:"workspace,omitempty"`
	Repo             string           `json:"repo,omitempty"`
	Base             string           `json:"base,omitempty"`
	CreatedAt        time.Time        `json:"created_at"`
	UpdatedAt        time.Time        `json:"updated_at"`
	Turns            int              `json:"turns"`
	CostUSD          float64          `json:"cost_usd"`
	PendingApprovals int              `json:"pending_approvals"`
	WaitingSince     *time.Time       `json:"waiting_since,omitempty"`
	LastError        string           `json:"last_error,omitempty"`
	Wait             json.RawMessage  `json:"wait,omitempty"`
	BudgetExhausted  json.RawMessage  `json:"budget_exhausted,omitempty"`
	Attention        json.RawMessage  `json:"attention,omitempty"`
	TemporalURL      string           `json:"temporal_url,omitempty"`
	ContextWindow    *ContextWindow   `json:"context_window,omitempty"`
	Pending          []PendingRequest `json:"pending,omitempty"`
}

// ContextWindow is a task's context window use.
type ContextWindow struct {
	Used  int64 `json:"used"`
	Limit int64 `json:"limit"`
}

// PendingRequest is a request waiting for a person, as GET /api/v1/approvals lists it.
type PendingRequest struct {
	TaskID      string       `json:"task_id"`
	TaskTitle   string       `json:"task_title,omitempty"`
	RequestID   string       `json:"request_id"`
	Turn        int          `json:"turn"`
	Kind        string       `json:"kind"`
	Tool        string       `json:"tool"`
	Summary     string       `json:"summary"`
	Suggestions []Suggestion `json:"suggestions,omitempty"`
	Since       time.Time    `json:"since"`
	Deadline    time.Time    `json:"deadline"`
}

// Suggestion is an "allow always" choice of a pending request.
type Suggestion struct {
	Key   string `json:"key"`
	Label string `json:"label"`
}

// Record is one stored event of a task's log, as the API sends it.
type Record struct {
	Seq     int64           `json:"seq"`
	Turn    int             `json:"turn"`
	Attempt int             `json:"attempt"`
	Type    string          `json:"type"`
	Time    time.Time       `json:"time"`
	Event   json.RawMessage `json:"event"`
}

// Call is one request the server was sent, as its ledger keeps it.
type Call struct {
	Method string
	Path   string
	Query  string
	// Body is the request's body, when it had one.
	Body json.RawMessage
	// LastEventID is the Last-Event-ID header of an event-stream request.
	LastEventID string
	// IdempotencyKey is the request's Idempotency-Key header.
	IdempotencyKey string
	// Authorized says whether the request carried the right token (always true without one).
	Authorized bool
	// TokenInURL is set when the token appeared in the request's URL.
	TokenInURL bool
}

// Config configures a Server.
type Config struct {
	// Token, when set, is the bearer token every API call must carry; others get 401.
	Token string
	// Console is served for every path the API does not take, as the real server mounts it.
	Console http.Handler
	// StreamLimit, when positive, ends each event-stream connection after that many events, so
	// that a client must resume with Last-Event-ID.
	StreamLimit int
	// KeepAlive is the interval of the stream's keep-alive comments. Defaults to 15s.
	KeepAlive time.Duration
	// HideCreated keeps a task created through the API unknown to every read until Reveal, as
	// the real API is for a moment while the task's row is written.
	HideCreated bool
}

// Server is the fake API.
type Server struct {
	cfg     Config
	mu      sync.Mutex
	tasks   map[string]*Task
	order   []string
	events  map[string][]Record
	changed chan struct{} // closed and replaced on every append
	ledger  []Call
	keys    map[string]string // Idempotency-Key → task id
	hidden  map[string]bool   // tasks created but not yet readable (Config.HideCreated)
	hold    chan struct{}     // while set, JSON reads wait for it to close (HoldReads)
	held    int               // JSON reads waiting now
}

// New returns a Server with no tasks.
func New(cfg Config) *Server {
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	return &Server{cfg: cfg, tasks: map[string]*Task{}, events: map[string][]Record{}, keys: map[string]string{}, hidden: map[string]bool{}, changed: make(chan struct{})}
}

// PutTask adds or replaces a task.
func (s *Server) PutTask(t Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tasks[t.ID]; !ok {
		s.order = append(s.order, t.ID)
	}
	s.tasks[t.ID] = &t
	s.bump()
}

// bump wakes every stream (events and lists): something changed. The caller holds the lock.
func (s *Server) bump() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// UpdateTask changes a stored task under the server's lock.
func (s *Server) UpdateTask(id string, f func(*Task)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tasks[id]; ok {
		f(t)
		s.bump()
	}
}

// HoldReads makes every JSON read of a task or a list (not a stream) wait, its answer already
// taken, until release runs: the browser gets it after the changes made meanwhile were pushed.
func (s *Server) HoldReads() (release func()) {
	hold := make(chan struct{})
	s.mu.Lock()
	s.hold = hold
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.hold == hold {
			s.hold = nil
		}
		s.mu.Unlock()
		close(hold)
	}
}

// HeldReads is how many reads wait for HoldReads's release now.
func (s *Server) HeldReads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// Reveal makes a task created while Config.HideCreated was set readable.
func (s *Server) Reveal(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.hidden, id)
	s.bump()
}

// notFound answers as the real API does for a task it does not know.
func notFound(w http.ResponseWriter, id string) {
	writeError(w, http.StatusNotFound, "not_found", "no task "+id+" is known; run drover task list to see the tasks")
}

// Append stores events (each an events.AgentEvent's JSON) at the end of a task's log and wakes
// its streams; it returns the seq of the last one.
func (s *Server) Append(taskID string, turn, attempt int, evs ...json.RawMessage) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.events[taskID]
	for _, ev := range evs {
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(ev, &head); err != nil || head.Type == "" {
			return 0, fmt.Errorf("appending to %s: an event without a type: %s", taskID, ev)
		}
		log = append(log, Record{Seq: int64(len(log)) + 1, Turn: turn, Attempt: attempt, Type: head.Type,
			Time: time.Now().UTC(), Event: ev})
	}
	s.events[taskID] = log
	s.bump()
	return int64(len(log)), nil
}

// Calls returns the ledger: every request so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.ledger...)
}

// Handler serves the API and, for every other path, the console.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/tasks", s.createTask)
	mux.HandleFunc("GET /api/v1/tasks", s.listTasks)
	mux.HandleFunc("GET /api/v1/tasks/{id}", s.getTask)
	mux.HandleFunc("GET /api/v1/tasks/{id}/events", s.getEvents)
	mux.HandleFunc("GET /api/v1/approvals", s.listApprovals)
	mux.HandleFunc("POST /api/v1/tasks/{id}/approvals/{request}", s.decide)
	mux.HandleFunc("POST /api/v1/tasks/{id}/prompts", s.prompt)
	mux.HandleFunc("POST /api/v1/tasks/{id}/interrupt", s.accepted)
	mux.HandleFunc("POST /api/v1/tasks/{id}/rewind", s.rewind)
	mux.HandleFunc("POST /api/v1/tasks/{id}/fork", s.fork)
	mux.HandleFunc("POST /api/v1/tasks/{id}/resolve", s.resolve)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such API route")
	})
	if s.cfg.Console != nil {
		mux.Handle("/", s.cfg.Console)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			mux.ServeHTTP(w, r)
			return
		}
		call := Call{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, LastEventID: r.Header.Get("Last-Event-ID"),
			IdempotencyKey: r.Header.Get("Idempotency-Key")}
		if r.Body != nil && r.Method == http.MethodPost {
			var body json.RawMessage
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body); err != nil {
				writeError(w, http.StatusBadRequest, "bad_request", "the body is not JSON: "+err.Error())
				return
			}
			call.Body = body
			r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, body))
		}
		call.Authorized = s.cfg.Token == "" || r.Header.Get("Authorization") == "Bearer "+s.cfg.Token
		call.TokenInURL = s.cfg.Token != "" && strings.Contains(r.URL.String(), s.cfg.Token)
		s.mu.Lock()
		s.ledger = append(s.ledger, call)
		s.mu.Unlock()
		if !call.Authorized {
			writeError(w, http.StatusUnauthorized, "unauthorized", "send Authorization: Bearer <token>")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// bodyKey keeps a request's body, read once for the ledger, for its handler.
type bodyKey struct{}

// bodyOf is the request's body as the ledger read it.
func bodyOf(r *http.Request) json.RawMessage {
	raw, _ := r.Context().Value(bodyKey{}).(json.RawMessage)
	return raw
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	status, q := r.URL.Query().Get("status"), strings.ToLower(r.URL.Query().Get("q"))
	awaiting := r.URL.Query().Get("awaiting_approval") == "true"
	after, limit := pageOf(r)
	s.answerList(w, r, "tasks", func() any {
		out := []Task{}
		for i := len(s.order) - 1; i >= 0; i-- {
			t := *s.tasks[s.order[i]]
			if s.hidden[t.ID] {
				continue
			}
			if status != "" && t.Status != status || q != "" && !strings.Contains(strings.ToLower(t.ID+"\n"+t.Title), q) || awaiting && t.PendingApprovals == 0 {
				continue
			}
			t.Pending, t.ContextWindow = nil, nil
			out = append(out, t)
		}
		page, next := cut(out, after, limit, func(t Task) string { return "t:" + t.ID })
		return map[string]any{"tasks": page, "next": next}
	})
}

// pageOf reads a listing's ?after= and ?limit= (50 when absent), as the real API does.
func pageOf(r *http.Request) (after string, limit int) {
	limit = 50
	if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n > 0 {
		limit = n
	}
	return r.URL.Query().Get("after"), limit
}

// cut returns the page of items after the cursor after (key names each item's cursor) and the
// next page's cursor, "" when none is left.
func cut[T any](items []T, after string, limit int, key func(T) string) ([]T, string) {
	start := 0
	if after != "" {
		for i, it := range items {
			if key(it) == after {
				start = i + 1
			}
		}
	}
	items = items[start:]
	if len(items) <= limit {
		return items, ""
	}
	return items[:limit], key(items[limit-1])
}

// answerList answers a list's GET: its JSON, or with Accept: text/event-stream the list now and
// again whenever it changes, as the real API does. read runs under the server's lock.
func (s *Server) answerList(w http.ResponseWriter, r *http.Request, name string, read func() any) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		s.mu.Lock()
		b, err := json.Marshal(read())
		hold := s.hold
		if hold != nil {
			s.held++
		}
		s.mu.Unlock()
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
			}
			s.mu.Lock()
			s.held--
			s.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(b, '\n'))
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "internal", "streaming unsupported")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	tick := time.NewTicker(s.cfg.KeepAlive)
	defer tick.Stop()
	var last []byte
	for {
		s.mu.Lock()
		b, err := json.Marshal(read())
		wake := s.changed
		s.mu.Unlock()
		if err != nil {
			return
		}
		if !bytes.Equal(b, last) {
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b); err != nil {
				return
			}
			flusher.Flush()
			last = b
		}
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	t, ok := s.tasks[id]
	ok = ok && !s.hidden[id]
	s.mu.Unlock()
	if !ok {
		notFound(w, id)
		return
	}
	s.answerList(w, r, "task", func() any { return *t })
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	after, limit := pageOf(r)
	s.answerList(w, r, "approvals", func() any {
		out := []PendingRequest{}
		for _, id := range s.order {
			for _, p := range s.tasks[id].Pending {
				p.TaskTitle = s.tasks[id].Title
				out = append(out, p)
			}
		}
		page, next := cut(out, after, limit, func(p PendingRequest) string { return "r:" + p.TaskID + "/" + p.RequestID })
		return map[string]any{"approvals": page, "next": next}
	})
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[r.PathValue("id")]
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no task "+r.PathValue("id"))
		return
	}
	var body struct {
		Decision string `json:"decision"`
		Message  string `json:"message"`
	}
	if raw, ok := r.Context().Value(bodyKey{}).(json.RawMessage); ok {
		_ = json.Unmarshal(raw, &body)
	}
	if body.Decision == "deny" && strings.TrimSpace(body.Message) == "" {
		writeError(w, http.StatusBadRequest, "invalid_input", "message: a denial needs a message; it is what the agent reads")
		return
	}
	for i, p := range t.Pending {
		if p.RequestID == r.PathValue("request") {
			t.Pending = append(t.Pending[:i:i], t.Pending[i+1:]...)
			t.PendingApprovals = len(t.Pending)
			s.bump()
			writeJSON(w, http.StatusOK, map[string]any{"request_id": p.RequestID})
			return
		}
	}
	writeError(w, http.StatusConflict, "not_pending", "the request is not waiting: reload the task")
}

func (s *Server) prompt(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	t, ok := s.tasks[r.PathValue("id")]
	running := ok && t.Status == "running"
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no task "+r.PathValue("id"))
		return
	}
	queued := 0
	if running {
		queued = 1
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"task_id": r.PathValue("id"), "queued": queued})
}

// createTask creates a running task as the real API does, once per Idempotency-Key; it checks
// only what the console must send.
func (s *Server) createTask(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ID        string `json:"id"`
		Title     string `json:"title"`
		Prompt    string `json:"prompt"`
		Workspace string `json:"workspace"`
		Repo      string `json:"repo"`
		Base      string `json:"base"`
		Mode      string `json:"mode"`
		Model     string `json:"model"`
	}
	raw, _ := r.Context().Value(bodyKey{}).(json.RawMessage)
	err := json.Unmarshal(raw, &body)
	if err != nil || strings.TrimSpace(body.Prompt) == "" || (body.Repo == "") == !strings.HasPrefix(body.Workspace, "/") {
		writeError(w, http.StatusBadRequest, "invalid_input", "a task needs a prompt and an absolute workspace or a repo")
		return
	}
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	id, seen := s.keys[key]
	if !seen || key == "" {
		id = body.ID
		if id == "" {
			id = fmt.Sprintf("task-%d", len(s.order)+1)
		}
		if key != "" {
			s.keys[key] = id
		}
	}
	s.mu.Unlock()
	now := time.Now().UTC()
	if !seen {
		title := body.Title
		if title == "" {
			title = strings.TrimSpace(strings.SplitN(strings.TrimSpace(body.Prompt), "\n", 2)[0])
		}
		s.PutTask(Task{ID: id, Title: title, Status: "running", Mode: body.Mode, Model: body.Model, Workspace: body.Workspace, Repo: body.Repo, Base: body.Base, CreatedAt: now, UpdatedAt: now})
		if s.cfg.HideCreated {
			s.mu.Lock()
			s.hidden[id] = true
			s.bump()
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	t := *s.tasks[id]
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"task": t, "prompt": map[string]any{"task_id": id, "turn": 1}})
}

// fork answers as the real API does for a managed task: a new idle task on its repository.
func (s *Server) fork(w http.ResponseWriter, r *http.Request) {
	src := r.PathValue("id")
	var body struct {
		Turn *int   `json:"turn"`
		ID   string `json:"id"`
	}
	s.mu.Lock()
	t, ok := s.tasks[src]
	s.mu.Unlock()
	switch {
	case !ok:
		notFound(w, src)
	case json.Unmarshal(bodyOf(r), &body) != nil || body.Turn == nil || *body.Turn < 0:
		writeError(w, http.StatusBadRequest, "invalid_input", "turn is required")
	case t.Repo == "":
		writeError(w, http.StatusBadRequest, "invalid_input", "the task has no managed workspace")
	default:
		if body.ID == "" {
			body.ID = src + "-fork"
		}
		now := time.Now().UTC()
		s.PutTask(Task{ID: body.ID, Status: "idle", Repo: t.Repo, Mode: t.Mode, CreatedAt: now, UpdatedAt: now})
		writeJSON(w, http.StatusCreated, map[string]any{"task_id": body.ID, "forked_from": src, "at_turn": *body.Turn})
	}
}

// rewind answers as the real API does for an idle managed task: back at the turn asked for, the
// later turns set aside; a task with no repository is refused.
func (s *Server) rewind(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var body struct {
		Turn *int `json:"turn"`
	}
	s.mu.Lock()
	t, ok := s.tasks[id]
	s.mu.Unlock()
	switch {
	case !ok:
		notFound(w, id)
	case json.Unmarshal(bodyOf(r), &body) != nil || body.Turn == nil || *body.Turn < 0:
		writeError(w, http.StatusBadRequest, "invalid_input", "turn is required")
	case t.Repo == "":
		writeError(w, http.StatusConflict, "cannot_rewind", "the task has no managed workspace")
	default:
		var aside []int
		for n := *body.Turn + 1; n <= t.Turns; n++ {
			aside = append(aside, n)
		}
		writeJSON(w, http.StatusOK, map[string]any{"task_id": id, "turn": *body.Turn, "checkpoint": "c", "set_aside": aside})
	}
}

// resolve answers a choice for a task that needs attention: its waiting prompt runs as the turn
// after its last, and the attention is gone.
func (s *Server) resolve(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var body struct {
		Choice string `json:"choice"`
	}
	raw, _ := r.Context().Value(bodyKey{}).(json.RawMessage)
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	switch {
	case !ok || s.hidden[id]:
		notFound(w, id)
	case len(t.Attention) == 0:
		writeError(w, http.StatusConflict, "not_pending", "the task does not need attention")
	default:
		t.Attention, t.Status = nil, "running"
		t.Turns++
		writeJSON(w, http.StatusOK, map[string]any{"task_id": id, "choice": body.Choice, "turn": t.Turns})
	}
}

func (s *Server) accepted(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusAccepted, map[string]any{})
}

func (s *Server) getEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	_, ok := s.tasks[id]
	ok = ok && !s.hidden[id]
	s.mu.Unlock()
	if !ok {
		notFound(w, id)
		return
	}
	after, err := afterOf(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		limit := 1000
		if v := r.URL.Query().Get("limit"); v != "" {
			if limit, err = strconv.Atoi(v); err != nil || limit <= 0 {
				writeError(w, http.StatusBadRequest, "bad_request", "limit must be a positive number")
				return
			}
		}
		s.mu.Lock()
		page := s.since(id, after, limit)
		if v := r.URL.Query().Get("before"); v != "" {
			before, err := strconv.ParseInt(v, 10, 64)
			if err != nil || before < 1 {
				s.mu.Unlock()
				writeError(w, http.StatusBadRequest, "invalid_input", "before must be a sequence number")
				return
			}
			page = s.before(id, before, limit)
		}
		s.mu.Unlock()
		next := after
		if len(page) > 0 {
			next = page[len(page)-1].Seq
		}
		writeJSON(w, http.StatusOK, map[string]any{"events": page, "next_after": next})
		return
	}
	s.stream(w, r, id, after)
}

// before returns the last limit records before seq, in order; the caller holds the lock.
func (s *Server) before(id string, before int64, limit int) []Record {
	log := s.events[id]
	end := min(before-1, int64(len(log)))
	start := max(end-int64(limit), 0)
	return append([]Record{}, log[start:end]...)
}

// since returns up to limit records after seq; the caller holds the lock.
func (s *Server) since(id string, after int64, limit int) []Record {
	log := s.events[id]
	if after >= int64(len(log)) {
		return []Record{}
	}
	out := log[max(after, 0):]
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return append([]Record(nil), out...)
}

func afterOf(r *http.Request) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("after %q: want a sequence number", v)
	}
	return n, nil
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, id string, after int64) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "internal", "streaming unsupported")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	sent := 0
	tick := time.NewTicker(s.cfg.KeepAlive)
	defer tick.Stop()
	for {
		s.mu.Lock()
		page := s.since(id, after, 0)
		wake := s.changed
		s.mu.Unlock()
		for _, rec := range page {
			b, err := json.Marshal(rec)
			if err != nil {
				return
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", rec.Seq, rec.Type, b); err != nil {
				return
			}
			after = rec.Seq
			sent++
			if s.cfg.StreamLimit > 0 && sent >= s.cfg.StreamLimit {
				flusher.Flush()
				return
			}
		}
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}

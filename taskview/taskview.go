// Package taskview is the read side of drover's tasks, shared by the command line and the HTTP
// API: it lists tasks, shows one, lists the permission requests that wait for a person, and
// reads a task's event log, from Postgres alone. No Temporal call is made, so every read
// answers while no worker runs.
//
// Where each figure comes from:
//
//   - status, mode, last error, wait and budget: the task's state as its workflow recorded it
//     in the tasks table whenever what it publishes changes (a task no worker has recorded yet
//     shows running while a turn runs, else idle);
//   - turns, cost and tokens: the accounting rows of task_turns (cost is what the API billed for
//     the turns that finished);
//   - workspace, model, session and resume point: the recorded state, else the executor row;
//   - pending requests: permission_requests that are pending with no decision recorded;
//   - context window: the task's last context_window event;
//   - events: task_events, gap-free, by sequence number.
package taskview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// View reads tasks from Postgres. Pool must be set; View is safe for concurrent use.
type View struct {
	Pool *pgxpool.Pool
}

// New returns a View on pool.
func New(pool *pgxpool.Pool) *View { return &View{Pool: pool} }

// NotFoundError says that Postgres knows nothing of a task, or of one of its requests.
type NotFoundError struct {
	TaskID    string
	RequestID string // empty: the task itself
}

func (e *NotFoundError) Error() string {
	if e.RequestID != "" {
		return fmt.Sprintf("task %s has no permission request %q", e.TaskID, e.RequestID)
	}
	return fmt.Sprintf("no task %q is known", e.TaskID)
}

// Is makes errors.Is(err, store.ErrNotFound) hold.
func (e *NotFoundError) Is(target error) bool { return target == store.ErrNotFound }

// Filter narrows List. The zero Filter lists every task, newest first.
type Filter struct {
	Status           task.Status // only tasks with this status
	AwaitingApproval bool        // only tasks with a request waiting for a person
	Text             string      // only tasks whose id, title, workspace, model or a prompt contains it
	Limit            int         // at most this many; 0: all
}

// Summary is one task in a listing: the HTTP API's Task.
type Summary struct {
	ID string `json:"id"`
	// Title names the task: the one it was given, else the first line of its first prompt.
	Title     string              `json:"title,omitempty"`
	Status    task.Status         `json:"status"`
	Mode      task.PermissionMode `json:"mode,omitempty"`
	Model     string              `json:"model,omitempty"`
	Workspace string              `json:"workspace,omitempty"`
	// Repo and Base are a managed task's repository and base; its Workspace is its worktree on
	// the host that last ran it.
	Repo      string    `json:"repo,omitempty"`
	Base      string    `json:"base,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Turns counts the turns begun; CostUSD adds up what the finished ones cost.
	Turns   int     `json:"turns"`
	CostUSD float64 `json:"cost_usd"`
	// PendingApprovals counts the requests that wait for a person; WaitingSince is when the
	// oldest of them was asked.
	PendingApprovals int        `json:"pending_approvals"`
	WaitingSince     *time.Time `json:"waiting_since,omitempty"`
	LastError        string     `json:"last_error,omitempty"`
	// Wait says why and until when the task waits for its account (a waiting status).
	Wait   *task.Wait   `json:"wait,omitempty"`
	Budget *task.Budget `json:"budget,omitempty"`
	// BudgetBy names who changed the budget last; empty: as the task was started.
	BudgetBy        string                `json:"budget_by,omitempty"`
	BudgetExhausted *task.BudgetExhausted `json:"budget_exhausted,omitempty"`
	// Attention says why the task waits for a person (status needs_attention): its session
	// could not be resumed. Answer with POST /api/v1/tasks/{id}/resolve (drover task resolve).
	Attention *task.Attention `json:"attention,omitempty"`
}

// Tokens adds up the tokens of a task's turns.
type Tokens struct {
	Input         int64 `json:"input"`
	Output        int64 `json:"output"`
	CacheRead     int64 `json:"cache_read"`
	CacheCreation int64 `json:"cache_creation"`
}

// ContextWindow is how full the session's context window was at its last report.
type ContextWindow struct {
	Used  int64 `json:"used"`
	Limit int64 `json:"limit"`
}

// Turn is one turn's accounting row.
type Turn struct {
	Turn       int             `json:"turn"`
	Status     task.TurnStatus `json:"status"`
	Attempts   int             `json:"attempts"`
	Prompt     string          `json:"prompt"`
	CostUSD    float64         `json:"cost_usd"`
	Tokens     Tokens          `json:"tokens"`
	DurationMS int64           `json:"duration_ms"`
	Error      string          `json:"error,omitempty"`
	// Checkpoint is the commit that recorded a managed task's worktree when the turn committed.
	Checkpoint string     `json:"checkpoint,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// Detail is one task in full: the HTTP API's TaskDetail. Its Turns (the list) hides
// Summary.Turns (the count) in JSON.
type Detail struct {
	Summary
	Turns         []Turn           `json:"turns"`
	FailedTurns   int              `json:"failed_turns"`
	RunningTurn   int              `json:"running_turn,omitempty"`
	Tokens        Tokens           `json:"tokens"`
	ContextWindow *ContextWindow   `json:"context_window,omitempty"`
	Pending       []PendingRequest `json:"pending"`
	// Deciding are the requests whose decision is recorded and waits for the task's worker to
	// apply it.
	Deciding []RecordedDecision `json:"deciding,omitempty"`
	// Queued are the prompts waiting for their turn, as the workflow last recorded them.
	Queued    []task.QueuedPrompt `json:"queued,omitempty"`
	SessionID string              `json:"session_id,omitempty"`
	ResumeAt  string              `json:"resume_at,omitempty"` // the committed resume point
	Host      string              `json:"host,omitempty"`
	Grants    []task.Grant        `json:"grants,omitempty"`
	// Totals are the workflow's own, as it recorded them: with the cost of failed attempts and
	// the time turns ran (nil until a state is recorded).
	Totals *task.Totals `json:"totals,omitempty"`
	// CancelledBy names who asked for the task's cancel, and CancelledAt when; both empty when
	// nobody did.
	CancelledBy string     `json:"cancelled_by,omitempty"`
	CancelledAt *time.Time `json:"cancelled_at,omitempty"`
}

// PendingRequest is a permission request waiting for a person.
type PendingRequest struct {
	TaskID string `json:"task_id"`
	// TaskTitle is the title of the request's task (Summary.Title).
	TaskTitle string           `json:"task_title,omitempty"`
	RequestID string           `json:"request_id"`
	Turn      int              `json:"turn"`
	Kind      task.RequestKind `json:"kind"`
	Tool      string           `json:"tool"`
	// Summary says in one line what is asked: the command, the file, the question.
	Summary string          `json:"summary"`
	Input   json.RawMessage `json:"input"`
	// Suggestions are what an approval may also grant for the rest of the task, by key.
	Suggestions []task.Suggestion `json:"suggestions,omitempty"`
	Questions   []task.Question   `json:"questions,omitempty"`
	Reasked     bool              `json:"reasked,omitempty"`
	// Since is when it was asked: it has been waiting since then.
	Since    time.Time `json:"since"`
	Deadline time.Time `json:"deadline"`
}

// RecordedDecision is a decision recorded on a request that the task has not applied yet.
type RecordedDecision struct {
	RequestID string    `json:"request_id"`
	Tool      string    `json:"tool"`
	Summary   string    `json:"summary"`
	Allow     bool      `json:"allow"`
	By        string    `json:"by"`
	At        time.Time `json:"at"`
}

// List returns the tasks the filter keeps, newest first.
func (v *View) List(ctx context.Context, f Filter) ([]Summary, error) {
	rows, err := store.ListTasks(ctx, v.Pool, store.TaskFilter{Status: f.Status,
		AwaitingApproval: f.AwaitingApproval, Text: strings.TrimSpace(f.Text), Limit: f.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]Summary, 0, len(rows))
	for _, r := range rows {
		s, _ := summarize(r)
		out = append(out, s)
	}
	return out, nil
}

// Show returns one task in full, or a *NotFoundError.
func (v *View) Show(ctx context.Context, taskID string) (Detail, error) {
	r, err := store.GetTask(ctx, v.Pool, taskID)
	if errors.Is(err, store.ErrNotFound) {
		return Detail{}, &NotFoundError{TaskID: taskID}
	}
	if err != nil {
		return Detail{}, err
	}
	s, st := summarize(r)
	d := Detail{Summary: s, FailedTurns: r.FailedTurns, RunningTurn: r.RunningTurn,
		Tokens: Tokens{Input: r.Totals.InputTokens, Output: r.Totals.OutputTokens,
			CacheRead: r.Totals.CacheReadTokens, CacheCreation: r.Totals.CacheCreationTokens},
		SessionID: r.SessionID, ResumeAt: r.ResumeAt, Host: r.HostID, Turns: []Turn{}}
	if st != nil {
		d.Queued, d.Grants = st.Pending, st.Grants
		totals := st.Totals
		d.Totals = &totals
		d.SessionID = first(r.SessionID, st.SessionID)
		d.ResumeAt = first(r.ResumeAt, st.LastMessageUUID)
	}
	turns, err := store.ListTurns(ctx, v.Pool, taskID)
	if err != nil {
		return Detail{}, err
	}
	for _, t := range turns {
		tv := Turn{Turn: t.Turn, Status: t.Status, Attempts: t.Attempts, Prompt: t.Prompt, CostUSD: t.CostUSD,
			Tokens: Tokens{Input: t.InputTokens, Output: t.OutputTokens, CacheRead: t.CacheReadTokens,
				CacheCreation: t.CacheCreationTokens}, DurationMS: t.DurationMS, Error: t.Error, Checkpoint: t.Checkpoint, StartedAt: t.StartedAt}
		if !t.FinishedAt.IsZero() {
			at := t.FinishedAt
			tv.FinishedAt = &at
		}
		d.Turns = append(d.Turns, tv)
	}
	if ev, err := store.LastEvent(ctx, v.Pool, taskID, string(events.TypeContextWindow)); err == nil {
		var a events.AgentEvent
		if json.Unmarshal(ev.Payload, &a) == nil && a.ContextWindow != nil {
			d.ContextWindow = &ContextWindow{Used: a.ContextWindow.Used, Limit: a.ContextWindow.Size}
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return Detail{}, err
	}
	if d.Pending, err = v.Pending(ctx, taskID, 0); err != nil {
		return Detail{}, err
	}
	if by, at, found, err := store.CancelOf(ctx, v.Pool, taskID); err != nil {
		return Detail{}, err
	} else if found {
		d.CancelledBy, d.CancelledAt = by, &at
	}
	reqs, err := store.ListTaskPermissions(ctx, v.Pool, taskID)
	if err != nil {
		return Detail{}, err
	}
	for _, r := range reqs {
		var dec task.Decision
		if r.Status != task.OutcomePending || len(r.Requested) == 0 || json.Unmarshal(r.Requested, &dec) != nil {
			continue
		}
		d.Deciding = append(d.Deciding, RecordedDecision{RequestID: r.RequestID, Tool: r.ToolName, Summary: r.Summary,
			Allow: dec.Allow, By: r.RequestedBy, At: r.RequestedAt})
	}
	return d, nil
}

// summarize makes a row's Summary, and returns the recorded state it read (nil when none).
func summarize(r store.TaskRow) (Summary, *task.State) {
	s := Summary{ID: r.TaskID, Title: task.TitleOf(r.Title), Status: r.Status, Model: r.Model, Workspace: r.Workspace,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Turns: r.Totals.Turns, CostUSD: r.Totals.CostUSD,
		PendingApprovals: r.PendingApprovals}
	if !r.WaitingSince.IsZero() {
		since := r.WaitingSince
		s.WaitingSince = &since
	}
	if len(r.State) == 0 {
		return s, nil
	}
	var st task.State
	if err := json.Unmarshal(r.State, &st); err != nil {
		return s, nil
	}
	s.Mode, s.LastError = st.PermissionMode, st.LastError
	s.Model, s.Workspace = first(st.Model, s.Model), first(st.Workspace, s.Workspace)
	s.Repo, s.Base = st.Repo, st.Base
	s.Wait, s.BudgetExhausted, s.Attention, s.BudgetBy = st.Wait, st.BudgetExhausted, st.Attention, st.BudgetBy
	if !st.Budget.IsZero() {
		b := st.Budget
		s.Budget = &b
	}
	return s, &st
}

func first(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// Pending returns the requests waiting for a person, of one task (taskID) or of all (""),
// oldest first, at most limit (0: all). A request whose decision is recorded but not yet
// applied by its task waits for nobody and is left out.
func (v *View) Pending(ctx context.Context, taskID string, limit int) ([]PendingRequest, error) {
	rows, err := store.ListPendingPermissions(ctx, v.Pool, taskID, limit)
	if err != nil {
		return nil, err
	}
	out := make([]PendingRequest, 0, len(rows))
	var ids []string
	for _, r := range rows {
		out = append(out, pendingOf(r))
		if !slices.Contains(ids, r.TaskID) {
			ids = append(ids, r.TaskID)
		}
	}
	titles, err := store.TaskTitles(ctx, v.Pool, ids)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].TaskTitle = task.TitleOf(titles[out[i].TaskID])
	}
	return out, nil
}

// Request returns one of a task's permission requests as it stands, whatever its status, or a
// *NotFoundError.
func (v *View) Request(ctx context.Context, taskID, requestID string) (store.PermissionRequest, error) {
	r, err := store.GetPermission(ctx, v.Pool, taskID, requestID)
	if errors.Is(err, store.ErrNotFound) {
		return r, &NotFoundError{TaskID: taskID, RequestID: requestID}
	}
	return r, err
}

// pendingOf makes the view of a request's row.
func pendingOf(r store.PermissionRequest) PendingRequest {
	p := PendingRequest{TaskID: r.TaskID, RequestID: r.RequestID, Turn: r.Turn, Kind: r.Kind,
		Tool: r.ToolName, Summary: r.Summary, Input: r.Input, Reasked: r.Reasked, Since: r.CreatedAt,
		Deadline: r.Deadline}
	p.Suggestions = SuggestionsOf(r.Suggestions)
	p.Questions = QuestionsOf(r)
	return p
}

// QuestionsOf reads the questions of a question request, with their options' labels; nil for
// another kind.
func QuestionsOf(r store.PermissionRequest) []task.Question {
	if r.Kind != task.KindQuestion {
		return nil
	}
	var out []task.Question
	for _, q := range claudecode.QuestionsOf(r.Input) {
		tq := task.Question{Question: q.Question, Header: q.Header, MultiSelect: q.MultiSelect}
		for _, o := range q.Options {
			tq.Options = append(tq.Options, o.Label)
		}
		out = append(out, tq)
	}
	return out
}

// SuggestionsOf reads a request's stored suggestions (a JSON array, in the order the CLI gave
// them) with their keys ("1", "2", …) and labels.
func SuggestionsOf(raw json.RawMessage) []task.Suggestion {
	var raws []json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &raws) != nil {
		return nil
	}
	out := make([]task.Suggestion, 0, len(raws))
	for i, r := range raws {
		out = append(out, task.Suggestion{Key: fmt.Sprint(i + 1), Label: task.SuggestionLabel(r), Raw: r})
	}
	return out
}

// OnlyPendingError says why a task's request could not be picked without its id: none waits
// (Waiting empty), or more than one does.
type OnlyPendingError struct {
	TaskID  string
	Waiting []PendingRequest
	// Last is, when none waits, the task's request decided last (its decision recorded or
	// applied), so that the error says who decided it; nil when the task has none.
	Last *store.PermissionRequest
}

func (e *OnlyPendingError) Error() string {
	if len(e.Waiting) == 0 {
		msg := fmt.Sprintf("task %s has no request waiting for a decision", e.TaskID)
		if e.Last != nil {
			msg += "; " + decidedText(*e.Last)
		}
		return msg
	}
	ids := make([]string, 0, len(e.Waiting))
	for _, r := range e.Waiting {
		ids = append(ids, r.RequestID+" ("+r.Tool+")")
	}
	return fmt.Sprintf("task %s has %d requests waiting; name one: %s", e.TaskID, len(ids), strings.Join(ids, ", "))
}

// OnlyPending returns the task's one request that waits for a person: what a decision that
// names no request is about. None, or more than one, is an *OnlyPendingError; a task Postgres
// knows nothing of, a *NotFoundError.
func (v *View) OnlyPending(ctx context.Context, taskID string) (PendingRequest, error) {
	reqs, err := v.Pending(ctx, taskID, 0)
	if err != nil {
		return PendingRequest{}, err
	}
	if len(reqs) == 1 {
		return reqs[0], nil
	}
	if len(reqs) == 0 {
		if _, err := store.GetTask(ctx, v.Pool, taskID); errors.Is(err, store.ErrNotFound) {
			return PendingRequest{}, &NotFoundError{TaskID: taskID}
		}
		all, err := store.ListTaskPermissions(ctx, v.Pool, taskID)
		if err != nil {
			return PendingRequest{}, err
		}
		return PendingRequest{}, &OnlyPendingError{TaskID: taskID, Waiting: reqs, Last: lastDecided(all)}
	}
	return PendingRequest{}, &OnlyPendingError{TaskID: taskID, Waiting: reqs}
}

// lastDecided is the request whose decision was recorded or applied last, or nil.
func lastDecided(reqs []store.PermissionRequest) *store.PermissionRequest {
	var last *store.PermissionRequest
	at := func(r store.PermissionRequest) time.Time {
		if r.RequestedAt.After(r.DecidedAt) {
			return r.RequestedAt
		}
		return r.DecidedAt
	}
	for i := range reqs {
		if !at(reqs[i]).IsZero() && (last == nil || at(reqs[i]).After(at(*last))) {
			last = &reqs[i]
		}
	}
	return last
}

// decidedText says who decided a request and when: "request R (Bash) was already decided by
// carol at 15:04:05 (allowed)", or, for a decision recorded but not yet applied, "… (allow,
// recorded; the task's worker applies it)".
func decidedText(r store.PermissionRequest) string {
	by, at, what := r.DecidedBy, r.DecidedAt, string(r.Status)
	if r.Requested != nil && (r.DecidedAt.IsZero() || r.RequestedAt.After(r.DecidedAt)) {
		var d task.Decision
		_ = json.Unmarshal(r.Requested, &d)
		what = "deny"
		if d.Allow {
			what = "allow"
		}
		by, at, what = r.RequestedBy, r.RequestedAt, what+", recorded; the task's worker applies it"
	}
	if by == "" {
		by = "somebody"
	}
	return fmt.Sprintf("request %s (%s) was already decided by %s at %s (%s)", r.RequestID, r.ToolName, by, at.Local().Format(time.TimeOnly), what)
}

// Event is one event of a task's log, as callers read it: the line drover task watch --output
// json prints, an event of the HTTP API's page, and the data of its Server-Sent Event.
type Event struct {
	Seq     int64           `json:"seq"`
	Time    time.Time       `json:"time"`
	Turn    int             `json:"turn"`
	Attempt int             `json:"attempt"`
	Type    string          `json:"type"`
	Event   json.RawMessage `json:"event"`
}

// EventOf is the stored event e as callers read it; an event with no payload has a JSON null.
func EventOf(e store.Event) Event {
	payload := e.Payload
	if payload == nil {
		payload = json.RawMessage("null")
	}
	return Event{Seq: e.Seq, Time: e.CreatedAt, Turn: e.Turn, Attempt: e.Attempt, Type: e.Type, Event: payload}
}

// Events returns up to limit of the task's events after the sequence number afterSeq, in
// order (limit 0: all). The next page starts after the last one's Seq.
func (v *View) Events(ctx context.Context, taskID string, afterSeq int64, limit int) ([]Event, error) {
	if afterSeq < 0 {
		return nil, fmt.Errorf("reading the events of task %s: %d is not a sequence number", taskID, afterSeq)
	}
	evs, err := store.ListEvents(ctx, v.Pool, taskID, afterSeq, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Event, 0, len(evs))
	for _, e := range evs {
		out = append(out, EventOf(e))
	}
	return out, nil
}

// Watch calls fn with each of the task's events after afterSeq, in order, with no gap and no
// repeat, and then with each new one as it is stored, until ctx ends (ctx.Err() is returned) or
// fn fails. It holds one Postgres connection while it runs.
func (v *View) Watch(ctx context.Context, taskID string, afterSeq int64, fn func(Event) error) error {
	if afterSeq < 0 {
		return fmt.Errorf("watching task %s: %d is not a sequence number", taskID, afterSeq)
	}
	return store.WatchEvents(ctx, v.Pool, taskID, afterSeq, func(e store.Event) error { return fn(EventOf(e)) })
}

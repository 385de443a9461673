package taskview

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// Page is one page of a listing of tasks, newest first.
type Page struct {
	Tasks []Summary `json:"tasks"`
	// Next is the cursor of the page after this one (Filter.After); "" when this page is the
	// last.
	Next string `json:"next,omitempty"`
}

// PendingPage is one page of the requests that wait for a person, oldest first.
type PendingPage struct {
	Requests []PendingRequest `json:"approvals"`
	// Next is the cursor of the page after this one; "" when this page is the last.
	Next string `json:"next,omitempty"`
}

// cursor is what a cursor holds, before it is made opaque (JSON in URL-safe base64): the
// place of the last item of a page in its listing's order.
type cursor struct {
	Kind      string `json:"k"` // "t": a task listing's, "r": the inbox's
	CreatedAt int64  `json:"c"` // Unix microseconds: Postgres's own precision
	TaskID    string `json:"t"`
	RequestID string `json:"r,omitempty"`
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor of the kind; a cursor that is not one is an *task.InvalidError.
func decodeCursor(s, kind string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(s))
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.Kind != kind || c.TaskID == "" || (kind == "r") != (c.RequestID != "") {
		return cursor{}, &task.InvalidError{Field: "after",
			Reason: "is not a cursor of this listing; use the next cursor a page of it returned"}
	}
	return c, nil
}

// ListPage returns one page of the tasks the filter keeps, newest first, starting after
// f.After (a page's Next), and the cursor of the page after it. A page holds at most f.Limit
// tasks (0: all of them).
func (v *View) ListPage(ctx context.Context, f Filter) (Page, error) {
	sf := store.TaskFilter{Status: f.Status, AwaitingApproval: f.AwaitingApproval, Text: strings.TrimSpace(f.Text)}
	if f.After != "" {
		c, err := decodeCursor(f.After, "t")
		if err != nil {
			return Page{}, err
		}
		sf.After = &store.TaskCursor{CreatedAt: time.UnixMicro(c.CreatedAt), TaskID: c.TaskID}
	}
	if f.Limit > 0 {
		sf.Limit = f.Limit + 1 // one more says whether a next page exists
	}
	rows, err := store.ListTasks(ctx, v.Pool, sf)
	if err != nil {
		return Page{}, err
	}
	p := Page{Tasks: make([]Summary, 0, len(rows))}
	if f.Limit > 0 && len(rows) > f.Limit {
		rows = rows[:f.Limit]
		last := rows[len(rows)-1]
		p.Next = cursor{Kind: "t", CreatedAt: last.CreatedAt.UnixMicro(), TaskID: last.TaskID}.encode()
	}
	for _, r := range rows {
		s, _ := summarize(r)
		p.Tasks = append(p.Tasks, s)
	}
	return p, nil
}

// PendingPage returns one page of the requests that wait for a person, of every task, oldest
// first, starting after after (a page's Next; "" for the first page), at most limit (0: all).
func (v *View) PendingPage(ctx context.Context, after string, limit int) (PendingPage, error) {
	f := store.WaitingFilter{}
	if after != "" {
		c, err := decodeCursor(after, "r")
		if err != nil {
			return PendingPage{}, err
		}
		f.After = &store.WaitingCursor{CreatedAt: time.UnixMicro(c.CreatedAt), TaskID: c.TaskID, RequestID: c.RequestID}
	}
	if limit > 0 {
		f.Limit = limit + 1
	}
	rows, err := store.ListWaiting(ctx, v.Pool, f)
	if err != nil {
		return PendingPage{}, err
	}
	p := PendingPage{Requests: make([]PendingRequest, 0, len(rows))}
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
		last := rows[len(rows)-1]
		p.Next = cursor{Kind: "r", CreatedAt: last.CreatedAt.UnixMicro(), TaskID: last.TaskID, RequestID: last.RequestID}.encode()
	}
	for _, r := range rows {
		p.Requests = append(p.Requests, pendingOf(r))
	}
	return p, v.addTitles(ctx, p.Requests)
}

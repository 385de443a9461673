package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/drover-run/drover/task"
)

// Reader is the read side the API lists and shows tasks and their requests from: a
// *taskview.View.
type Reader interface {
	// List lists tasks, newest first, as f filters them.
	List(ctx context.Context, f Filter) ([]Summary, error)
	// Show is one task with its turns, tokens, context window and pending requests; an unknown
	// task is an error that fromError maps to task_not_found.
	Show(ctx context.Context, taskID string) (Detail, error)
	// Pending lists the requests waiting for a person, of one task or of all (""), oldest
	// first, at most limit (0: all).
	Pending(ctx context.Context, taskID string, limit int) ([]PendingRequest, error)
}

// Filter selects tasks in a listing.
type Filter struct {
	Status           task.Status
	AwaitingApproval bool
	Text             string
	Limit            int
}

// Summary is one task in a listing.
type Summary struct {
	ID               string                `json:"id"`
	Status           task.Status           `json:"status"`
	Mode             task.PermissionMode   `json:"mode,omitempty"`
	Model            string                `json:"model,omitempty"`
	Workspace        string                `json:"workspace,omitempty"`
	CreatedAt        time.Time             `json:"created_at"`
	UpdatedAt        time.Time             `json:"updated_at"`
	Turns            int                   `json:"turns"`
	CostUSD          float64               `json:"cost_usd"`
	PendingApprovals int                   `json:"pending_approvals"`
	WaitingSince     *time.Time            `json:"waiting_since,omitempty"`
	LastError        string                `json:"last_error,omitempty"`
	Wait             *task.Wait            `json:"wait,omitempty"`
	Budget           *task.Budget          `json:"budget,omitempty"`
	BudgetExhausted  *task.BudgetExhausted `json:"budget_exhausted,omitempty"`
}

// Detail is one task shown whole.
type Detail struct {
	Summary
	Turns         []json.RawMessage `json:"turns"`
	Tokens        json.RawMessage   `json:"tokens"`
	ContextWindow json.RawMessage   `json:"context_window,omitempty"`
	Pending       []PendingRequest  `json:"pending"`
}

// PendingRequest is a permission request waiting for a person, with its task.
type PendingRequest struct {
	TaskID      string            `json:"task_id"`
	RequestID   string            `json:"request_id"`
	Turn        int               `json:"turn"`
	Kind        task.RequestKind  `json:"kind"`
	Tool        string            `json:"tool"`
	Summary     string            `json:"summary"`
	Suggestions []task.Suggestion `json:"suggestions,omitempty"`
	Since       time.Time         `json:"since"`
	Deadline    time.Time         `json:"deadline"`
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := Filter{Status: task.Status(q.Get("status")), Text: q.Get("q")}
	if f.Status != "" && !knownStatus(f.Status) {
		s.writeError(w, r, errorf(http.StatusBadRequest, CodeInvalidInput,
			fmt.Sprintf("status %q is unknown; use one of %s", f.Status, statusList())))
		return
	}
	if v := q.Get("awaiting_approval"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.writeError(w, r, errorf(http.StatusBadRequest, CodeInvalidInput, "awaiting_approval is true or false, not "+strconv.Quote(v)))
			return
		}
		f.AwaitingApproval = b
	}
	if len(f.Text) > MaxQueryBytes {
		s.writeError(w, r, errorf(http.StatusBadRequest, CodeInvalidInput, fmt.Sprintf("q is %d bytes; use at most %d", len(f.Text), MaxQueryBytes)))
		return
	}
	ts, err := s.cfg.Reader.List(r.Context(), f)
	if err != nil {
		s.writeError(w, r, fromError(err))
		return
	}
	if ts == nil {
		ts = []Summary{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tasks": ts})
}

func knownStatus(st task.Status) bool {
	for _, s := range task.Statuses() {
		if s == st {
			return true
		}
	}
	return false
}

func statusList() string {
	var s []string
	for _, st := range task.Statuses() {
		s = append(s, string(st))
	}
	return strings.Join(s, ", ")
}

func (s *Server) showTask(w http.ResponseWriter, r *http.Request) {
	id, e := taskID(r)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	d, err := s.cfg.Reader.Show(r.Context(), id)
	if err != nil {
		s.writeError(w, r, fromError(err))
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	ps, err := s.cfg.Reader.Pending(r.Context(), "", 0)
	if err != nil {
		s.writeError(w, r, fromError(err))
		return
	}
	if ps == nil {
		ps = []PendingRequest{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": ps})
}

func pathEscape(s string) string { return url.PathEscape(s) }

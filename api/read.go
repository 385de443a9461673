package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskview"
)

// Reader is the read side the API lists and shows tasks and their requests from: a
// *taskview.View.
type Reader interface {
	List(ctx context.Context, f taskview.Filter) ([]taskview.Summary, error)
	Show(ctx context.Context, taskID string) (taskview.Detail, error)
	Pending(ctx context.Context, taskID string, limit int) ([]taskview.PendingRequest, error)
}

// Task is one task as the API shows it: the read side's summary, with the task's page in the
// Temporal UI when the server knows the UI's address.
type Task struct {
	taskview.Summary
	TemporalURL string `json:"temporal_url,omitempty"`
}

// TaskDetail is one task shown whole.
type TaskDetail struct {
	taskview.Detail
	TemporalURL string `json:"temporal_url,omitempty"`
}

// temporalURL is the task's page in the Temporal UI, or "" when the UI's address is unknown.
func (s *Server) temporalURL(taskID string) string {
	if s.cfg.TemporalUI == "" {
		return ""
	}
	ns := s.cfg.Namespace
	if ns == "" {
		ns = task.DefaultNamespace
	}
	return strings.TrimRight(s.cfg.TemporalUI, "/") + "/namespaces/" + url.PathEscape(ns) + "/workflows/" + url.PathEscape(taskID)
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := taskview.Filter{Status: task.Status(q.Get("status")), Text: q.Get("q")}
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
	read := func(ctx context.Context) (any, error) {
		ts, err := s.cfg.Reader.List(ctx, f)
		if err != nil {
			return nil, err
		}
		out := make([]Task, 0, len(ts))
		for _, t := range ts {
			out = append(out, Task{Summary: t, TemporalURL: s.temporalURL(t.ID)})
		}
		return map[string]any{"tasks": out}, nil
	}
	s.answerList(w, r, "tasks", read)
}

// answerList answers a list's GET: its JSON, or, with Accept: text/event-stream, a stream of
// it as it changes (streamSnapshots).
func (s *Server) answerList(w http.ResponseWriter, r *http.Request, name string, read func(ctx context.Context) (any, error)) {
	if wantsStream(r) {
		s.streamSnapshots(w, r, name, "", read)
		return
	}
	v, err := read(r.Context())
	if err != nil {
		s.writeError(w, r, fromError(err))
		return
	}
	writeJSON(w, http.StatusOK, v)
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
	read := func(ctx context.Context) (any, error) {
		d, err := s.cfg.Reader.Show(ctx, id)
		if err != nil {
			return nil, err
		}
		return TaskDetail{Detail: d, TemporalURL: s.temporalURL(id)}, nil
	}
	if wantsStream(r) {
		s.streamSnapshots(w, r, "task", id, read)
		return
	}
	v, err := read(r.Context())
	if err != nil {
		s.writeError(w, r, fromError(err))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	s.answerList(w, r, "approvals", func(ctx context.Context) (any, error) {
		ps, err := s.cfg.Reader.Pending(ctx, "", 0)
		if err != nil {
			return nil, err
		}
		if ps == nil {
			ps = []taskview.PendingRequest{}
		}
		return map[string]any{"approvals": ps}, nil
	})
}

func pathEscape(s string) string { return url.PathEscape(s) }

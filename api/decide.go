package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskerr"
)

// Decider records a person's decision on a pending request and tells its task, with or without a
// worker running: *taskclient.Decider. delivered says whether a worker applied it within wait.
type Decider interface {
	Decide(ctx context.Context, taskID string, d task.Decision, deliver time.Duration) (rec task.DecisionRecord, delivered bool, err error)
}

// The decisions of POST /api/v1/tasks/{id}/approvals/{request_id}.
const (
	DecisionAllow       = "allow"
	DecisionDeny        = "deny"
	DecisionAllowAlways = "allow_always"
)

// DecideRequest is the body of POST /api/v1/tasks/{id}/approvals/{request_id}.
type DecideRequest struct {
	// Decision is allow, deny or allow_always.
	Decision string `json:"decision"`
	// Message says why; a denial's message is what the agent reads, and a denial needs one.
	Message string `json:"message,omitempty"`
	// Always, with allow_always, is the key of the request's suggestion to grant for the rest
	// of the task; it may be left out when the request offers exactly one.
	Always string `json:"always,omitempty"`
	// Answers, for a question, are the chosen options per question.
	Answers map[string][]string `json:"answers,omitempty"`
	// By names who decides on a server without tokens (default "api"); a server with tokens
	// records its token's name instead.
	By string `json:"by,omitempty"`
}

// Decided is the answer to a decision.
type Decided struct {
	TaskID    string `json:"task_id"`
	RequestID string `json:"request_id"`
	// Delivered is false when the decision is recorded but has not reached the agent yet (no
	// worker runs); the task applies it as soon as one does.
	Delivered bool                 `json:"delivered"`
	Decision  *task.DecisionRecord `json:"decision,omitempty"`
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	id, e := taskID(r)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	reqID := r.PathValue("request_id")
	if strings.TrimSpace(reqID) == "" || len(reqID) > 255 {
		s.writeError(w, r, errorf(http.StatusBadRequest, CodeInvalidID, "the request id is empty or too long; take it from GET /api/v1/approvals"))
		return
	}
	var body DecideRequest
	if e := decode(r, &body); e != nil {
		s.writeError(w, r, e)
		return
	}
	d := task.Decision{RequestID: reqID, Reason: strings.TrimSpace(body.Message), By: body.By, Answers: body.Answers}
	switch body.Decision {
	case DecisionAllow:
		d.Allow = true
	case DecisionAllowAlways:
		d.Allow, d.Always = true, body.Always
	case DecisionDeny:
	default:
		s.writeError(w, r, &taskerr.Error{Status: http.StatusBadRequest, Code: CodeInvalidInput,
			Message:  fmt.Sprintf("decision: %q is unknown; use allow, deny or allow_always", body.Decision),
			Problems: []taskerr.Problem{{Field: "decision", Reason: "use allow, deny or allow_always"}}})
		return
	}
	if body.Always != "" && body.Decision != DecisionAllowAlways {
		s.writeError(w, r, errorf(http.StatusBadRequest, CodeInvalidInput, "always goes with the decision allow_always"))
		return
	}
	if len(s.tokens) > 0 || d.By == "" {
		// With tokens, who decides is the token's holder, whatever the body says.
		d.By = actor(r)
	}
	if body.Decision == DecisionAllowAlways && d.Always == "" {
		key, e := s.onlySuggestion(r.Context(), id, reqID)
		if e != nil {
			s.writeError(w, r, e)
			return
		}
		d.Always = key
	}
	rec, delivered, err := s.cfg.Decider.Decide(r.Context(), id, d, s.cfg.DecideWait)
	if err != nil {
		s.writeError(w, r, decisionError(err))
		return
	}
	out := Decided{TaskID: id, RequestID: reqID, Delivered: delivered}
	if delivered {
		out.Decision = &rec
	}
	writeJSON(w, http.StatusOK, out)
}

// decisionError is the answer to a decision the Decider refused. Its content is checked there
// (task.Decision.Check), in the decision's words: the reason it names is the body's message.
func decisionError(err error) *taskerr.Error {
	e := fromError(err)
	for i, p := range e.Problems {
		if p.Field == "reason" {
			e.Problems[i].Field = "message"
			if len(e.Problems) == 1 {
				e.Message = "message: " + p.Reason
			}
		}
	}
	return e
}

// onlySuggestion is the key of the one suggestion the pending request offers.
func (s *Server) onlySuggestion(ctx context.Context, taskID, reqID string) (string, *taskerr.Error) {
	ps, err := s.cfg.Reader.Pending(ctx, taskID, 0)
	if err != nil {
		return "", fromError(err)
	}
	for _, p := range ps {
		if p.RequestID != reqID {
			continue
		}
		switch len(p.Suggestions) {
		case 0:
			return "", errorf(http.StatusBadRequest, CodeInvalidInput, "the request offers nothing to allow always; allow it once")
		case 1:
			return p.Suggestions[0].Key, nil
		}
		var keys []string
		for _, sg := range p.Suggestions {
			keys = append(keys, sg.Key+" ("+sg.Label+")")
		}
		return "", errorf(http.StatusBadRequest, CodeInvalidInput, "the request offers several grants; name one in always: "+strings.Join(keys, ", "))
	}
	return "", errorf(http.StatusConflict, CodeNotPending, fmt.Sprintf("request %s is not pending in task %s; see GET /api/v1/approvals", reqID, taskID))
}

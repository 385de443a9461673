package api

import (
	"context"
	"net/http"

	"github.com/drover-run/drover/task"
)

// ResolveRequest is the body of POST /api/v1/tasks/{id}/resolve: what a task that needs
// attention (its session could not be resumed) does. choice is retry (resume the session
// again) or new_session (start the waiting prompt in a new session seeded with summary, or with
// a summary of the old session's turns when summary is empty).
type ResolveRequest struct {
	Choice  task.Resolution `json:"choice"`
	Summary string          `json:"summary,omitempty"`
}

// Resolved answers a ResolveRequest: the turn that runs the waiting prompt.
type Resolved struct {
	TaskID string          `json:"task_id"`
	Choice task.Resolution `json:"choice"`
	Turn   int             `json:"turn"`
}

func (s *Server) resolve(w http.ResponseWriter, r *http.Request) {
	id, e := taskID(r)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	var body ResolveRequest
	if e := decode(r, &body); e != nil {
		s.writeError(w, r, e)
		return
	}
	c := task.AttentionChoice{Choice: body.Choice, Summary: body.Summary}
	if err := c.Validate(); err != nil {
		s.writeError(w, r, invalidInput(err))
		return
	}
	var turn int
	if e := s.command(r, id, true, func(ctx context.Context) (err error) {
		turn, err = s.cfg.Tasks.Resolve(ctx, id, c)
		return err
	}); e != nil {
		s.writeError(w, r, e)
		return
	}
	writeJSON(w, http.StatusOK, Resolved{TaskID: id, Choice: c.Choice, Turn: turn})
}

package api

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/drover-run/drover/taskerr"
)

// workerCheck remembers for a moment whether a worker polls, so that a burst of commands asks
// Temporal once.
type workerCheck struct {
	mu sync.Mutex
	at time.Time
	ok bool
}

// workerCheckFresh is how long an answer of Config.Workers is reused.
const workerCheckFresh = time.Second

// checkWorkers answers 503 when Config.Workers says no worker polls: nothing is sent then, so
// nothing runs later that the client was not told of.
func (s *Server) checkWorkers(ctx context.Context) *taskerr.Error {
	if s.cfg.Workers == nil {
		return nil
	}
	s.workers.mu.Lock()
	defer s.workers.mu.Unlock()
	if !s.workers.ok || time.Since(s.workers.at) > workerCheckFresh {
		cctx, cancel := context.WithTimeout(ctx, s.cfg.CommandTimeout)
		ok, err := s.cfg.Workers(cctx)
		cancel()
		if err != nil {
			e := fromError(err)
			if e.Code == CodeInternal {
				e = &taskerr.Error{Status: http.StatusServiceUnavailable, Code: taskerr.CodeUnavailable, Err: err}
			}
			e.Message = "Temporal did not say whether a worker runs; nothing was sent: try again"
			return e
		}
		s.workers.ok, s.workers.at = ok, time.Now()
	}
	if !s.workers.ok {
		return errorf(http.StatusServiceUnavailable, taskerr.CodeUnavailable,
			"no worker is running, so nothing was sent; start one (drover worker) and send the command again")
	}
	return nil
}

// command sends one command to task id within the command deadline: do gets a context that
// ends with it. When needsWorker, the command is sent only if a worker polls. The answer for a
// failure says what the client can know: a command sent and not confirmed in time may still
// apply, and the same Idempotency-Key or request_id learns its answer without applying it twice.
func (s *Server) command(r *http.Request, id string, needsWorker bool, do func(ctx context.Context) error) *taskerr.Error {
	if needsWorker {
		if e := s.checkWorkers(r.Context()); e != nil {
			return s.unsentBecause(r.Context(), id, e)
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CommandTimeout)
	defer cancel()
	err := do(ctx)
	if err == nil {
		return nil
	}
	e := s.commandError(r.Context(), id, err)
	if e.Code == taskerr.CodeUnavailable && r.Context().Err() == nil {
		e.Message = fmt.Sprintf("task %s did not confirm the command within %s (no worker took it); it may still apply once one does: "+
			"send it again with the same Idempotency-Key (or request_id) to learn its answer, it applies once", id, s.cfg.CommandTimeout)
	}
	return e
}

// unsentBecause is the answer for a command not sent because no worker could take it: about the
// task itself when it has ended (task_closed) or does not exist (not_found), which the read side
// and Temporal tell with no worker; else e.
func (s *Server) unsentBecause(ctx context.Context, id string, e *taskerr.Error) *taskerr.Error {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CommandTimeout)
	defer cancel()
	if d, err := s.cfg.Reader.Show(cctx, id); err == nil {
		if d.Status.Final() {
			return errorf(http.StatusConflict, taskerr.CodeTaskClosed,
				fmt.Sprintf("task %s has ended (%s); it takes no more commands: create a new task", id, d.Status))
		}
		return e
	}
	if s.cfg.Exists != nil {
		if err := s.cfg.Exists(cctx, id); err != nil && fromError(err).Code == CodeNotFound {
			return fromError(err)
		}
	}
	return e
}

package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/taskerr"
	"github.com/drover-run/drover/taskview"
)

// EventPage is the answer to GET /api/v1/tasks/{id}/events with Accept: application/json.
type EventPage struct {
	Events []taskview.Event `json:"events"`
	// NextAfter is the cursor of the next page: the last event's seq, or the request's after.
	NextAfter int64 `json:"next_after"`
}

// taskEvents serves a task's event log: a page of JSON, or a Server-Sent Event stream that
// follows the log from Last-Event-ID (or ?after) until the client leaves or the server stops.
func (s *Server) taskEvents(w http.ResponseWriter, r *http.Request) {
	id, e := taskID(r)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	after, e := eventCursor(r)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	if err := s.exists(r.Context(), id); err != nil {
		s.writeError(w, r, fromError(err))
		return
	}
	if wantsJSON(r) {
		s.eventPage(w, r, id, after)
		return
	}
	s.streamEvents(w, r, id, after)
}

// exists reports errTaskNotFound, or what the read side says, for a task with no events that
// the read side does not know either.
func (s *Server) exists(ctx context.Context, id string) error {
	evs, err := store.ListEvents(ctx, s.cfg.DB, id, 0, 1)
	if err != nil {
		return err
	}
	if len(evs) > 0 {
		return nil
	}
	_, err = s.cfg.Reader.Show(ctx, id)
	if err != nil && s.cfg.Exists != nil && fromError(err).Code == CodeNotFound {
		return s.cfg.Exists(ctx, id)
	}
	return err
}

// eventCursor is the seq after which events are sent: Last-Event-ID, else ?after, else 0.
func eventCursor(r *http.Request) (int64, *taskerr.Error) {
	v, what := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if v == "" {
		v, what = r.URL.Query().Get("after"), "after"
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, errorf(http.StatusBadRequest, CodeInvalidInput,
			fmt.Sprintf("%s %q is not a sequence number; use 0 (from the first event) or the seq of the last event seen", what, v))
	}
	return n, nil
}

// wantsJSON reports whether the client asks for a page of JSON rather than a stream.
func wantsJSON(r *http.Request) bool {
	for part := range strings.SplitSeq(r.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "text/event-stream":
			return false
		case "application/json":
			return true
		}
	}
	return false
}

func (s *Server) eventPage(w http.ResponseWriter, r *http.Request, id string, after int64) {
	limit := DefaultEventsPage
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxEventsPage {
			s.writeError(w, r, errorf(http.StatusBadRequest, CodeInvalidInput, fmt.Sprintf("limit %q is not a number from 1 to %d", v, MaxEventsPage)))
			return
		}
		limit = n
	}
	var evs []store.Event
	var err error
	if v := r.URL.Query().Get("before"); v != "" {
		// A page read backwards: the last events before a seq (the log's last page when the seq
		// is past its end).
		before, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || before < 1 || after != 0 {
			s.writeError(w, r, errorf(http.StatusBadRequest, CodeInvalidInput,
				fmt.Sprintf("before %q is not a sequence number of 1 or more, or comes with after: give one of them", v)))
			return
		}
		evs, err = store.ListEventsBefore(r.Context(), s.cfg.DB, id, before, limit)
	} else {
		evs, err = store.ListEvents(r.Context(), s.cfg.DB, id, after, limit)
	}
	if err != nil {
		s.writeError(w, r, fromError(err))
		return
	}
	page := EventPage{Events: make([]taskview.Event, 0, len(evs)), NextAfter: after}
	for _, ev := range evs {
		page.Events = append(page.Events, taskview.EventOf(ev))
		page.NextAfter = ev.Seq
	}
	writeJSON(w, http.StatusOK, page)
}

// errStreamEnded ends a watch whose stream is gone.
var errStreamEnded = errors.New("the event stream ended")

// streamEvents sends the events after `after` as Server-Sent Events, each with id: its seq, so
// that a client that reconnects with Last-Event-ID gets exactly what it missed. Delivery comes
// from store.Watch: every event once, in order, with no gap. A comment goes out every
// KeepAlive while no event does.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, id string, after int64) {
	write, done := s.openStream(w, r)
	if write == nil {
		return
	}
	defer done()
	// The retry hint tells EventSource how long to wait before it reconnects.
	if err := write("retry: 2000\n: events of task %s after %d\n\n", oneLine(id), after); err != nil {
		return
	}
	s.followEvents(r.Context(), id, after, write)
}

// openStream begins an answer of Server-Sent Events within the server's bound of open streams:
// it returns the stream's write (each write flushed, with a deadline of its own) and the call
// that ends the stream's count; nil when it answered 503 or an error instead.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request) (write func(format string, args ...any) error, done func()) {
	if n := s.streams.Add(1); n > int64(s.cfg.MaxStreams) {
		s.streams.Add(-1)
		w.Header().Set("Retry-After", "5")
		s.writeError(w, r, errorf(http.StatusServiceUnavailable, taskerr.CodeUnavailable,
			fmt.Sprintf("this server has %d event streams open, its maximum; close one, or read pages with Accept: application/json", s.cfg.MaxStreams)))
		return nil, nil
	}
	done = func() { s.streams.Add(-1) }
	rc := http.NewResponseController(w)
	// A stream lasts as long as the client stays; each write has a deadline of its own.
	if err := rc.SetWriteDeadline(time.Time{}); err != nil {
		done()
		s.writeError(w, r, fromError(fmt.Errorf("clearing the write deadline: %w", err)))
		return nil, nil
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write = func(format string, args ...any) error {
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.RequestTimeout))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return err
		}
		return rc.Flush()
	}
	return write, done
}

// followEvents writes the events of the task after `after` until the client leaves, the
// server stops, the log cannot be read, or no event came for the stream's idle timeout.
func (s *Server) followEvents(ctx context.Context, id string, after int64, write func(string, ...any) error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	evc := make(chan store.Event)
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- s.hub.Watch(ctx, store.WatchConfig{TaskID: id, AfterSeq: after, PollInterval: s.cfg.WatchPoll},
			func(ev store.Event) error {
				select {
				case evc <- ev:
					return nil
				case <-ctx.Done():
					return errStreamEnded
				}
			})
	}()
	defer func() {
		cancel()
		<-watchErr
	}()
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	idle := time.NewTimer(s.cfg.StreamIdleTimeout)
	defer idle.Stop()
	for {
		select {
		case ev := <-evc:
			data, err := json.Marshal(taskview.EventOf(ev))
			if err != nil {
				s.cfg.Logger.ErrorContext(ctx, "encoding an event failed", "task_id", id, "seq", ev.Seq, "error", err)
				return
			}
			if err := write("id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, oneLine(ev.Type), data); err != nil {
				return
			}
			keepAlive.Reset(s.cfg.KeepAlive)
			idle.Reset(s.cfg.StreamIdleTimeout)
		case <-keepAlive.C:
			if err := write(": keep-alive\n\n"); err != nil {
				return
			}
		case <-idle.C:
			_ = write(": idle for %s; reconnect with Last-Event-ID to go on\n\n", s.cfg.StreamIdleTimeout)
			return
		case err := <-watchErr:
			watchErr <- err // for the deferred wait
			if ctx.Err() == nil {
				s.cfg.Logger.ErrorContext(ctx, "watching events failed", "task_id", id, "error", err)
				_ = write("event: error\ndata: %s\n\n", mustJSON(map[string]string{"code": taskerr.CodeUnavailable,
					"message": "the event log cannot be read; reconnect with Last-Event-ID to resume"}))
			}
			return
		case <-s.stopping:
			return
		case <-ctx.Done():
			return
		}
	}
}

// oneLine keeps a value on one line of the event stream.
func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

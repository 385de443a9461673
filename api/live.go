package api

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/drover-run/drover/taskerr"
)

// liveGap is the least time between two snapshots of one live list: the changes of a busy
// moment (a turn's rows and requests, written one after another) go out as one snapshot.
const liveGap = 100 * time.Millisecond

// wantsStream reports whether the client asks for a stream (Accept: text/event-stream) rather
// than one answer of JSON.
func wantsStream(r *http.Request) bool {
	for part := range strings.SplitSeq(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
			return true
		}
	}
	return false
}

// streamSnapshots answers a list (or one task: taskID) with Server-Sent Events: what it reads
// now (event name, data the JSON answer a GET would have), then again whenever Postgres announces
// a change of a task's row (of taskID's, when set; store.Hub.WatchTasks) and it reads
// differently, until the client leaves or the server stops. A comment goes out every KeepAlive
// while nothing changes. A first read that fails is answered as the GET would be (a 404 for a
// task not known), with no stream.
func (s *Server) streamSnapshots(w http.ResponseWriter, r *http.Request, name, taskID string, read func(ctx context.Context) (any, error)) {
	if _, err := read(r.Context()); err != nil {
		s.writeError(w, r, fromError(err))
		return
	}
	write, done := s.openStream(w, r)
	if write == nil {
		return
	}
	defer done()
	if err := write("retry: 2000\n: %s, now and as they change\n\n", name); err != nil {
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	snaps := make(chan []byte)
	watchErr := make(chan error, 1)
	go func() {
		var last []byte
		watchErr <- s.hub.WatchTasks(ctx, taskID, func(ctx context.Context) error {
			v, err := read(ctx)
			if err != nil {
				return err
			}
			b, err := json.Marshal(v)
			if err != nil || bytes.Equal(b, last) {
				return err
			}
			last = b
			select {
			case snaps <- b:
			case <-ctx.Done():
				return ctx.Err()
			}
			t := time.NewTimer(liveGap)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	defer func() {
		cancel()
		<-watchErr
	}()
	s.sendSnapshots(ctx, name, snaps, watchErr, write)
}

// sendSnapshots writes each snapshot as one event, and keep-alive comments between them.
func (s *Server) sendSnapshots(ctx context.Context, name string, snaps <-chan []byte, watchErr chan error, write func(string, ...any) error) {
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case b := <-snaps:
			if err := write("event: %s\ndata: %s\n\n", name, b); err != nil {
				return
			}
			keepAlive.Reset(s.cfg.KeepAlive)
		case <-keepAlive.C:
			if err := write(": keep-alive\n\n"); err != nil {
				return
			}
		case err := <-watchErr:
			watchErr <- err // for the deferred wait
			if ctx.Err() == nil {
				s.cfg.Logger.ErrorContext(ctx, "watching tasks failed", "list", name, "error", err)
				_ = write("event: error\ndata: %s\n\n", mustJSON(map[string]string{"code": taskerr.CodeUnavailable,
					"message": "the tasks cannot be read; reconnect to go on"}))
			}
			return
		case <-s.stopping:
			return
		case <-ctx.Done():
			return
		}
	}
}

package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-run/drover/store"
)

// Server serves the API. Make one with New.
type Server struct {
	cfg     Config
	tokens  tokenSet
	api     *http.ServeMux
	handler http.Handler

	// stopping is closed when the server begins to shut down: event streams end.
	stopping chan struct{}
	stopOnce sync.Once

	// hub fans the event log's notifications out to every open stream over one connection.
	hub *store.Hub
	// streams counts the open event streams, bounded by cfg.MaxStreams.
	streams atomic.Int64
	// workers remembers the last answer of cfg.Workers.
	workers workerCheck
}

// routeTable is every route of the API: its pattern, whether it answers without a token, and
// its handler.
var routeTable = []struct {
	pattern string
	open    bool
	handler func(*Server) http.HandlerFunc
}{
	{"GET /healthz", true, func(s *Server) http.HandlerFunc { return s.healthz }},
	{"GET /api/v1/openapi.json", true, func(s *Server) http.HandlerFunc { return s.openapi }},
	{"POST /api/v1/tasks", false, func(s *Server) http.HandlerFunc { return s.createTask }},
	{"GET /api/v1/tasks", false, func(s *Server) http.HandlerFunc { return s.listTasks }},
	{"GET /api/v1/tasks/{id}", false, func(s *Server) http.HandlerFunc { return s.showTask }},
	{"POST /api/v1/tasks/{id}/prompts", false, func(s *Server) http.HandlerFunc { return s.promptTask }},
	{"POST /api/v1/tasks/{id}/interrupt", false, func(s *Server) http.HandlerFunc { return s.interruptTask }},
	{"POST /api/v1/tasks/{id}/close", false, func(s *Server) http.HandlerFunc { return s.closeTask }},
	{"POST /api/v1/tasks/{id}/cancel", false, func(s *Server) http.HandlerFunc { return s.cancelTask }},
	{"POST /api/v1/tasks/{id}/budget", false, func(s *Server) http.HandlerFunc { return s.changeBudget }},
	{"POST /api/v1/tasks/{id}/resolve", false, func(s *Server) http.HandlerFunc { return s.resolve }},
	{"GET /api/v1/tasks/{id}/events", false, func(s *Server) http.HandlerFunc { return s.taskEvents }},
	{"GET /api/v1/tasks/{id}/diff", false, func(s *Server) http.HandlerFunc { return s.taskDiff }},
	{"POST /api/v1/tasks/{id}/publish", false, func(s *Server) http.HandlerFunc { return s.publishTask }},
	{"POST /api/v1/tasks/{id}/rewind", false, func(s *Server) http.HandlerFunc { return s.rewindTask }},
	{"POST /api/v1/tasks/{id}/fork", false, func(s *Server) http.HandlerFunc { return s.forkTask }},
	{"GET /api/v1/approvals", false, func(s *Server) http.HandlerFunc { return s.listApprovals }},
	{"POST /api/v1/tasks/{id}/approvals/{request_id}", false, func(s *Server) http.HandlerFunc { return s.decide }},
}

// New checks cfg and returns a server.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("api config: %w", err)
	}
	s := &Server{cfg: cfg, tokens: newTokenSet(cfg.Tokens), api: http.NewServeMux(), stopping: make(chan struct{}),
		hub: store.NewHub(cfg.DB, store.HubConfig{Logger: cfg.Logger})}
	for _, rt := range routeTable {
		s.handle(rt.pattern, rt.open, rt.handler(s))
	}
	s.handler = s.logRequests(http.HandlerFunc(s.route))
	return s, nil
}

// handle registers one route; the handlers of routes that are not open are behind the tokens.
func (s *Server) handle(pattern string, open bool, h http.HandlerFunc) {
	var hh http.Handler = h
	if !open {
		hh = s.authorize(h)
	}
	s.api.Handle(pattern, hh)
}

// Handler is the server's whole handler: the API, and the console at "/".
func (s *Server) Handler() http.Handler { return s.handler }

// isAPIPath reports whether path belongs to the API rather than to the console.
func isAPIPath(path string) bool {
	return path == "/healthz" || path == "/api" || strings.HasPrefix(path, "/api/")
}

// route sends API paths to the API's routes, answering JSON for a path or method it does not
// know, and everything else to the console.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if len(s.tokens) == 0 && !IsLoopback(r.Host) {
		// Without tokens the server trusts whoever reaches loopback; a request naming another
		// host comes through a name rebound to loopback (a web page's), or from elsewhere.
		s.writeError(w, r, errorf(http.StatusForbidden, CodeForbiddenHost,
			"without tokens this server answers requests to 127.0.0.1, [::1] or localhost only; configure tokens to serve other names"))
		return
	}
	if !isAPIPath(r.URL.Path) {
		if s.cfg.Console != nil {
			s.cfg.Console.ServeHTTP(w, r)
			return
		}
		s.writeError(w, r, errorf(http.StatusNotFound, CodeNotFound, "no such page; the API is under /api/v1 (see /api/v1/openapi.json)"))
		return
	}
	// An answer of the API is about the moment it was asked: no cache keeps it.
	w.Header().Set("Cache-Control", "no-store")
	if e := checkEdge(r); e != nil {
		s.writeError(w, r, e)
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" && !sameOrigin(origin, r.Host) {
		// A page of another origin: the API answers no cross-origin request, so that no page
		// can drive a server it reaches (one on loopback without tokens above all).
		s.writeError(w, r, errorf(http.StatusForbidden, CodeForbiddenOrigin,
			"requests from a page of another origin are refused; call the API from the console it serves, or from a program"))
		return
	}
	h, pattern := s.api.Handler(r)
	if pattern != "" {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		}
		s.api.ServeHTTP(w, r) // sets the path's values, which Handler does not
		return
	}
	// The mux's own answer (404, or 405 with Allow), in JSON.
	rec := &statusOnly{header: http.Header{}}
	h.ServeHTTP(rec, r)
	if allow := rec.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if rec.status == http.StatusMethodNotAllowed {
		s.writeError(w, r, errorf(rec.status, CodeMethodNotAllowed, fmt.Sprintf("%s is not allowed here; use %s", r.Method, rec.header.Get("Allow"))))
		return
	}
	s.writeError(w, r, errorf(http.StatusNotFound, CodeNotFound, "no such route; the routes are listed in /api/v1/openapi.json"))
}

// sameOrigin reports whether a request's Origin header names the host it was sent to.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, host)
}

// statusOnly records the status and headers a handler answers, and drops its body.
type statusOnly struct {
	header http.Header
	status int
}

func (s *statusOnly) Header() http.Header         { return s.header }
func (s *statusOnly) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusOnly) WriteHeader(code int)        { s.status = code }

// authorize refuses a request without one of the tokens, when tokens are configured.
func (s *Server) authorize(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.tokens) == 0 {
			h.ServeHTTP(w, r)
			return
		}
		name, ok := s.tokens.holder(r)
		if !ok {
			msg := "this server requires a token: send the header Authorization: Bearer <token>"
			if r.Header.Get("Authorization") != "" {
				msg = "the token is not one this server accepts; check DROVER_API_TOKENS or DROVER_API_TOKEN_FILE where the server runs"
			}
			s.writeError(w, r, errorf(http.StatusUnauthorized, CodeUnauthorized, msg))
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), actorKey{}, name)))
	})
}

// logRequests logs one line per request: never a header, a query's values or a body. It also
// bounds how long writing the answer may take, for every answer but an event stream.
func (s *Server) logRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		_ = http.NewResponseController(w).SetWriteDeadline(start.Add(s.cfg.RequestTimeout))
		h.ServeHTTP(sw, r)
		s.cfg.Logger.LogAttrs(r.Context(), slog.LevelInfo, "http request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", sw.status), slog.Duration("duration", time.Since(start)))
	})
}

// statusWriter remembers the status of the answer.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (Flush, SetWriteDeadline).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Serve serves on ln until ctx ends, then shuts down gracefully: it stops accepting, ends the
// event streams, and waits up to the shutdown timeout for the requests in flight.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ReadTimeout:       s.cfg.RequestTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	srv.RegisterOnShutdown(s.stop)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		s.stop()
		return fmt.Errorf("serving the api: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("stopping the api: %w", err)
	}
	return nil
}

// stop ends the event streams.
func (s *Server) stop() { s.stopOnce.Do(func() { close(s.stopping) }) }

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Routes lists the registered routes as "METHOD /path", in the form of the OpenAPI document's
// paths.
func Routes() []string {
	out := make([]string, 0, len(routeTable))
	for _, r := range routeTable {
		out = append(out, r.pattern)
	}
	return out
}

package worker

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
)

// checkListen refuses an operator endpoint (the scrape, the profiles) that anybody beyond
// loopback could read: beyond loopback it requires the bearer token, which it then asks of every
// request. what names the endpoint in the error.
func checkListen(what, addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("worker: the %s address %q: %w", what, addr, err)
	}
	if token != "" || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("worker: the %s endpoint %s is reachable beyond loopback: set DROVER_METRICS_TOKEN to require a bearer token, or listen on 127.0.0.1", what, addr)
}

// isLoopback reports whether host names only loopback addresses. An empty host listens on
// every interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// endpoint is one of the host's operator endpoints, served beside its turns.
type endpoint struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// serveEndpoint starts serving h at addr, behind the bearer token when one is set; path is the
// URL it logs. An address it cannot listen on is logged: the host's turns go on without the
// endpoint, and the answer is nil. The server sets no write timeout: a CPU profile or a trace
// answers after the seconds it was asked for.
func serveEndpoint(what, addr, path, token string, h http.Handler, log *slog.Logger) *endpoint {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("the "+what+" endpoint could not listen; the worker runs without it", "address", addr, "error", err)
		return nil
	}
	s := &endpoint{
		srv: &http.Server{Handler: requireToken(token, h), ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serving "+what, "error", err)
		}
	}()
	log.Info("serving "+what, "url", "http://"+ln.Addr().String()+path, "token", token != "")
	return s
}

// addr is the address the endpoint listens on.
func (s *endpoint) addr() string { return s.ln.Addr().String() }

// stop shuts the endpoint down within five seconds. A nil endpoint has nothing to stop.
func (s *endpoint) stop(ctx context.Context) {
	if s == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(sctx)
	<-s.done
}

// requireToken lets through only requests that present token as their bearer token; an empty
// token lets every request through.
func requireToken(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(strings.TrimSpace(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="drover metrics"`)
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

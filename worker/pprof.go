package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// PprofPath is where the profiling endpoint serves Go's runtime profiles (net/http/pprof):
// PprofPath + "profile?seconds=N" for CPU, + "heap", + "goroutine?debug=2", and so on.
const PprofPath = "/debug/pprof/"

// checkPprofListen refuses a profiling endpoint beyond loopback that anybody could read: a
// profile shows the host's code paths, its goroutines and what they hold. Beyond loopback it
// requires the metrics token, which it then asks of every request.
func checkPprofListen(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("worker: the profiling address %q: %w", addr, err)
	}
	if token != "" || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("worker: the profiling endpoint %s is reachable beyond loopback: set DROVER_METRICS_TOKEN to require a bearer token, or listen on 127.0.0.1", addr)
}

// pprofServer serves the profiling endpoint.
type pprofServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// addr is the address the endpoint listens on.
func (s *pprofServer) addr() string { return s.ln.Addr().String() }

// pprofHandler serves Go's profiles under PprofPath, behind token when one is set.
func pprofHandler(token string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PprofPath, pprof.Index)
	mux.HandleFunc("GET "+PprofPath+"cmdline", pprof.Cmdline)
	mux.HandleFunc("GET "+PprofPath+"profile", pprof.Profile)
	mux.HandleFunc("GET "+PprofPath+"symbol", pprof.Symbol)
	mux.HandleFunc("POST "+PprofPath+"symbol", pprof.Symbol)
	mux.HandleFunc("GET "+PprofPath+"trace", pprof.Trace)
	return requireToken(token, mux)
}

// servePprof starts serving the profiles at addr. An address it cannot listen on is logged:
// the host's turns go on without the endpoint.
func servePprof(addr, token string, log *slog.Logger) *pprofServer {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("the profiling endpoint could not listen; the worker runs without it", "address", addr, "error", err)
		return nil
	}
	s := &pprofServer{
		// No write timeout: a CPU profile or a trace answers after the seconds it was asked for.
		srv:  &http.Server{Handler: pprofHandler(token), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serving profiles", "error", err)
		}
	}()
	log.Info("serving profiles", "url", "http://"+ln.Addr().String()+PprofPath, "token", token != "")
	return s
}

func (s *pprofServer) stop(ctx context.Context) {
	if s == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(sctx)
	<-s.done
}

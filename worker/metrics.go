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

// DefaultMetricsListen is the address of the worker's Prometheus scrape endpoint unless the
// command line says otherwise.
const DefaultMetricsListen = "127.0.0.1:9464"

// MetricsPath is the path of the scrape endpoint.
const MetricsPath = "/metrics"

// checkMetricsListen refuses an endpoint beyond loopback that anybody could scrape.
func checkMetricsListen(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("worker: the metrics address %q: %w", addr, err)
	}
	if token != "" || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("worker: the metrics endpoint %s is reachable beyond loopback: set DROVER_METRICS_TOKEN to require a bearer token, or listen on 127.0.0.1", addr)
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

// metricsServer serves the scrape endpoint.
type metricsServer struct {
	srv  *http.Server
	done chan struct{}
}

// serveMetrics starts serving h at addr under MetricsPath, behind the bearer token when one is
// set. An address it cannot listen on is logged: the host's turns go on without the endpoint.
func serveMetrics(addr, token string, h http.Handler, log *slog.Logger) *metricsServer {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("the metrics endpoint could not listen; the worker runs without it", "address", addr, "error", err)
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+MetricsPath, requireToken(token, h))
	s := &metricsServer{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serving metrics", "error", err)
		}
	}()
	log.Info("serving metrics", "url", "http://"+ln.Addr().String()+MetricsPath, "token", token != "")
	return s
}

func (s *metricsServer) stop(ctx context.Context) {
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

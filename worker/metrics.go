package worker

import (
	"log/slog"
	"net/http"
)

// DefaultMetricsListen is the address of the worker's Prometheus scrape endpoint unless the
// command line says otherwise.
const DefaultMetricsListen = "127.0.0.1:9464"

// MetricsPath is the path of the scrape endpoint.
const MetricsPath = "/metrics"

// checkMetricsListen refuses a scrape endpoint beyond loopback that anybody could scrape.
func checkMetricsListen(addr, token string) error { return checkListen("metrics", addr, token) }

// serveMetrics starts serving h at addr under MetricsPath, behind the bearer token when one is
// set (see serveEndpoint).
func serveMetrics(addr, token string, h http.Handler, log *slog.Logger) *endpoint {
	mux := http.NewServeMux()
	mux.Handle("GET "+MetricsPath, h)
	return serveEndpoint("metrics", addr, MetricsPath, token, mux, log)
}

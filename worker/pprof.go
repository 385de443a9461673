package worker

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
)

// PprofPath is where the profiling endpoint serves Go's runtime profiles (net/http/pprof):
// PprofPath + "profile?seconds=N" for CPU, + "heap", + "goroutine?debug=2", and so on.
const PprofPath = "/debug/pprof/"

// checkPprofListen refuses a profiling endpoint beyond loopback that anybody could read: a
// profile shows the host's code paths, its goroutines and what they hold.
func checkPprofListen(addr, token string) error { return checkListen("profiling", addr, token) }

// pprofMux routes Go's profiles under PprofPath.
func pprofMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PprofPath, pprof.Index)
	mux.HandleFunc("GET "+PprofPath+"cmdline", pprof.Cmdline)
	mux.HandleFunc("GET "+PprofPath+"profile", pprof.Profile)
	mux.HandleFunc("GET "+PprofPath+"symbol", pprof.Symbol)
	mux.HandleFunc("POST "+PprofPath+"symbol", pprof.Symbol)
	mux.HandleFunc("GET "+PprofPath+"trace", pprof.Trace)
	return mux
}

// servePprof starts serving the profiles at addr, behind the bearer token when one is set (see
// serveEndpoint).
func servePprof(addr, token string, log *slog.Logger) *endpoint {
	return serveEndpoint("profiles", addr, PprofPath, token, pprofMux(), log)
}

// Package console is drover's web console: a page that lists tasks, follows one task's timeline as
// it happens, and lets a person prompt, interrupt and decide waiting requests. It is an
// http.Handler serving embedded, hand-written HTML, CSS and JavaScript (no build step, nothing
// loaded from another origin) that talks only to the HTTP API of the same origin (/api/v1). The
// names the scripts share with the Go code come from assets/enums.js, which go generate writes
// from package task (see Enums).
//
// It promises that what an agent wrote is shown as text and never run: the scripts build the page
// with createElement and textContent only, and every answer carries a Content-Security-Policy that
// allows scripts, styles and connections of the page's own origin alone, forbids inline script and
// framing, with X-Content-Type-Options: nosniff. A bearer token, when the API asks for one, is kept
// in the tab's sessionStorage and sent in the Authorization header, never in a URL.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy is the policy of every answer of the console.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; " +
	"frame-ancestors 'none'"

// Handler returns the console: the page at "/" and its files under "/assets/". Any other path is
// not found. Mount it below the API's own routes, which take precedence.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic("console: embedded assets missing: " + err.Error())
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := path.Clean("/" + r.URL.Path)
		switch {
		case p == "/" || p == "/index.html":
			serveIndex(w, r, sub)
		case strings.HasPrefix(p, "/assets/") && p != "/assets/index.html":
			r2 := r.Clone(r.Context())
			r2.URL.Path = strings.TrimPrefix(p, "/assets")
			files.ServeHTTP(w, r2)
		default:
			http.NotFound(w, r)
		}
	})
}

func serveIndex(w http.ResponseWriter, r *http.Request, sub fs.FS) {
	b, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		http.Error(w, "console: page missing", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b)
}

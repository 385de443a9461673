package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/drover-run/drover/console"
)

// TestHeaders checks what every answer carries and what the handler refuses.
func TestHeaders(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(console.Handler())
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		method, path string
		status       int
		ctype        string
	}{
		{"GET", "/", 200, "text/html"},
		{"GET", "/assets/app.js", 200, "text/javascript"},
		{"GET", "/assets/render.js", 200, "text/javascript"},
		{"GET", "/assets/app.css", 200, "text/css"},
		{"GET", "/assets/", 404, ""},
		{"GET", "/assets/../console.go", 404, ""},
		{"GET", "/elsewhere", 404, ""},
		{"POST", "/", 405, ""},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d (%s)", tc.method, tc.path, resp.StatusCode, tc.status, body)
		}
		if tc.ctype != "" && !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) {
			t.Errorf("%s %s: Content-Type %q, want %s", tc.method, tc.path, resp.Header.Get("Content-Type"), tc.ctype)
		}
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s %s: CSP %q lacks %q", tc.method, tc.path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s %s: CSP %q allows inline or eval'd script", tc.method, tc.path, csp)
		}
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s: X-Content-Type-Options %q", tc.method, tc.path, got)
		}
	}
}

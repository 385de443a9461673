package worker

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

func TestPprofListenBeyondLoopbackNeedsToken(t *testing.T) {
	for _, c := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:6060", "", true},
		{"localhost:6060", "", true},
		{"[::1]:6060", "", true},
		{":6060", "", false},
		{"0.0.0.0:6060", "", false},
		{"0.0.0.0:6060", "secret", true},
		{"no-port", "", false},
	} {
		if err := checkPprofListen(c.addr, c.token); (err == nil) != c.ok {
			t.Errorf("checkPprofListen(%q, token %t) = %v, want ok %t", c.addr, c.token != "", err, c.ok)
		}
	}
}

// get fetches url with the bearer token (none when empty) and returns the status and body.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestPprofServesTheRuntimesProfiles(t *testing.T) {
	for _, token := range []string{"", "secret"} {
		s := servePprof("127.0.0.1:0", token, slog.New(slog.DiscardHandler))
		if s == nil {
			t.Fatal("the profiling endpoint did not listen")
		}
		base := "http://" + s.addr() + PprofPath
		// The goroutine profile in text lists this very test's goroutine.
		status, body := get(t, base+"goroutine?debug=1", token)
		if status != http.StatusOK || !strings.Contains(body, "TestPprofServesTheRuntimesProfiles") {
			t.Errorf("token %q: goroutine profile %d, %.200q", token, status, body)
		}
		if token != "" {
			if status, _ := get(t, base+"goroutine?debug=1", ""); status != http.StatusUnauthorized {
				t.Errorf("without the token: %d, want 401", status)
			}
		}
		s.stop(t.Context())
	}
}

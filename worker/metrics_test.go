package worker

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestMetricsListenBeyondLoopbackNeedsToken(t *testing.T) {
	for _, c := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:9464", "", true},
		{"[::1]:9464", "", true},
		{"localhost:9464", "", true},
		{"0.0.0.0:9464", "", false},
		{":9464", "", false},
		{"10.1.2.3:9464", "", false},
		{"0.0.0.0:9464", "s3cret", true},
		{"no-port", "", false},
	} {
		err := checkMetricsListen(c.addr, c.token)
		if (err == nil) != c.ok {
			t.Errorf("%q with token %v: %v", c.addr, c.token != "", err)
		}
		if err != nil && c.token == "" && strings.Contains(c.addr, ":") && !strings.Contains(err.Error(), "DROVER_METRICS_TOKEN") {
			t.Errorf("%q: the refusal does not say what to set: %v", c.addr, err)
		}
	}
}

func TestMetricsTokenRequired(t *testing.T) {
	h := requireToken("s3cret", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	for auth, want := range map[string]int{
		"": http.StatusUnauthorized, "Bearer wrong": http.StatusUnauthorized, "s3cret": http.StatusUnauthorized,
		"Basic s3cret": http.StatusUnauthorized, "Bearer s3cret": http.StatusOK,
	} {
		r := httptest.NewRequest(http.MethodGet, MetricsPath, nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != want || (want != http.StatusOK && strings.Contains(rec.Body.String(), "metrics")) {
			t.Errorf("Authorization %q: %d %q, want %d", auth, rec.Code, rec.Body.String(), want)
		}
	}
}

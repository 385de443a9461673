package offlinemodel

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// credential is how a test request authenticates.
type credential struct {
	apiKey string // sent as x-api-key
	bearer string // sent as Authorization: Bearer
}

func (c credential) account() Account {
	switch {
	case c.apiKey != "":
		return APIKeyAccount(c.apiKey)
	case c.bearer != "":
		return OAuthAccount(c.bearer)
	}
	return NoAccount
}

// postAs sends body as JSON to srv's path with the given credential.
func postAs(t *testing.T, c *http.Client, srv *Server, cred credential, path string, body any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	if cred.apiKey != "" {
		req.Header.Set("X-Api-Key", cred.apiKey)
	}
	if cred.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+cred.bearer)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// drain reads a response body to its end.
func drain(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return b
}

// fakeClock is a Config.Clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2031, 3, 14, 9, 26, 53, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestAccountLabels(t *testing.T) {
	t.Parallel()
	const key, token = "sk-ant-api03-secret-key", "sk-ant-oat01-secret-token"
	k, o := APIKeyAccount(key), OAuthAccount(token)
	if k != APIKeyAccount(key) || k == APIKeyAccount(key+"x") || k == Account(OAuthAccount(key)) {
		t.Errorf("labels not stable or not distinct: %s %s", k, APIKeyAccount(key+"x"))
	}
	if !strings.HasPrefix(string(k), "key-") || len(k) != len("key-")+12 || !k.APIKey() || k.OAuth() {
		t.Errorf("API key account %q", k)
	}
	if !strings.HasPrefix(string(o), "oauth-") || len(o) != len("oauth-")+12 || !o.OAuth() || o.APIKey() {
		t.Errorf("OAuth account %q", o)
	}
	for _, a := range []Account{k, o} {
		if strings.Contains(string(a), "secret") || strings.Contains(string(a), "sk-ant") {
			t.Errorf("label %q shows the credential", a)
		}
	}
	for name, tc := range map[string]struct {
		h    http.Header
		want Account
	}{
		"api key":          {http.Header{"X-Api-Key": {key}}, k},
		"bearer":           {http.Header{"Authorization": {"Bearer " + token}}, o},
		"bearer lowercase": {http.Header{"Authorization": {"bearer " + token}}, o},
		"both: the key":    {http.Header{"X-Api-Key": {key}, "Authorization": {"Bearer " + token}}, k},
		"basic auth":       {http.Header{"Authorization": {"Basic abc"}}, NoAccount},
		"nothing":          {http.Header{}, NoAccount},
	} {
		if got := accountOf(tc.h); got != tc.want {
			t.Errorf("%s: account %q, want %q", name, got, tc.want)
		}
	}
}

// Requests, calls and ledger entries name the account, never the credential.
func TestRequestsNameTheirAccount(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var logMu sync.Mutex
	srv := startServer(t, Config{Logger: newBufferLogger(&logs, &logMu)})
	c := client(t)
	key, token := credential{apiKey: "sk-ant-api03-the-key"}, credential{bearer: "sk-ant-oat01-the-token"}
	drain(t, postAs(t, c, srv, key, "/v1/messages", messagesBody(true, "x")))
	drain(t, postAs(t, c, srv, token, "/v1/messages", messagesBody(false, "y")))
	drain(t, postAs(t, c, srv, credential{}, "/v1/messages/count_tokens", messagesBody(false, "z")))

	reqs := srv.Requests()
	if len(reqs) != 3 || reqs[0].Account != key.account() || reqs[1].Account != token.account() || reqs[2].Account != NoAccount {
		t.Fatalf("accounts of the requests: %+v", reqs)
	}
	for _, r := range reqs {
		if r.Received.IsZero() {
			t.Errorf("request %d without a reception time", r.Seq)
		}
	}
	led := srv.Ledger()
	if len(led) != 2 || led[0].Account != key.account() || led[1].Account != token.account() {
		t.Errorf("ledger accounts: %+v", led)
	}
	calls := srv.Calls()
	if len(calls) != 3 || calls[0].Account != key.account() || calls[2].Class != ClassCountTokens {
		t.Errorf("calls: %+v", calls)
	}
	logMu.Lock()
	defer logMu.Unlock()
	for _, secret := range []string{"the-key", "the-token"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds the credential %q", secret)
		}
	}
	for _, r := range reqs {
		for name, v := range r.Header {
			if strings.Contains(strings.Join(v, " "), "the-") {
				t.Errorf("recorded header %s holds the credential", name)
			}
		}
	}
}

// lockedWriter is an io.Writer safe for the server's goroutines.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// newBufferLogger logs everything, as text, into buf.
func newBufferLogger(buf *bytes.Buffer, mu *sync.Mutex) *slog.Logger {
	return slog.New(slog.NewTextHandler(lockedWriter{mu, buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

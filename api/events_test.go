package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/taskview"
)

// sse is one Server-Sent Event as a client parses it, or a comment.
type sse struct {
	id, event, data, comment string
}

// stream reads Server-Sent Events from a response.
type stream struct {
	resp *http.Response
	r    *bufio.Reader
}

func openStream(t *testing.T, base, taskID, query string, header ...string) *stream {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+"/api/v1/tasks/"+taskID+"/events"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("events: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &stream{resp: resp, r: bufio.NewReader(resp.Body)}
	t.Cleanup(s.close)
	return s
}

func (s *stream) close() { _ = s.resp.Body.Close() }

// next reads the next event or comment block.
func (s *stream) next() (sse, error) {
	var ev sse
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev != (sse{}) {
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
			ev.comment += strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
}

// events reads n events, skipping comments.
func (s *stream) events(t *testing.T, n int) []sse {
	t.Helper()
	var out []sse
	for len(out) < n {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("after %d of %d events: %v", len(out), n, err)
		}
		if ev.id != "" {
			out = append(out, ev)
		}
	}
	return out
}

func appendEvents(t *testing.T, db *pgxpool.Pool, taskID string, from, to int) {
	t.Helper()
	var in []store.EventInput
	for i := from; i <= to; i++ {
		in = append(in, store.EventInput{Turn: 1, Attempt: 1, Type: "message_chunk",
			Payload: json.RawMessage(fmt.Sprintf(`{"type":"message_chunk","text":"chunk %d"}`, i))})
	}
	if _, _, err := store.AppendEvents(t.Context(), db, taskID, in); err != nil {
		t.Fatal(err)
	}
}

// checkAgainstLog holds streamed events to the store's log: the same seqs, types and payloads.
func checkAgainstLog(t *testing.T, db *pgxpool.Pool, taskID string, got []sse, after int64) {
	t.Helper()
	log, err := store.ListEvents(t.Context(), db, taskID, after, len(got))
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != len(got) {
		t.Fatalf("streamed %d events, the log has %d after %d", len(got), len(log), after)
	}
	for i, ev := range got {
		var data taskview.Event
		if err := json.Unmarshal([]byte(ev.data), &data); err != nil {
			t.Fatalf("event %s: data %q: %v", ev.id, ev.data, err)
		}
		want := log[i]
		if ev.id != strconv.FormatInt(want.Seq, 10) || data.Seq != want.Seq || ev.event != want.Type || data.Type != want.Type ||
			compact(t, data.Event) != compact(t, want.Payload) {
			t.Errorf("event %d: id %s event %s data %s; log: seq %d type %s payload %s", i, ev.id, ev.event, ev.data, want.Seq, want.Type, want.Payload)
		}
	}
}

func compact(t *testing.T, b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// A stream delivers the log in order with id = seq; a client that drops and reconnects with
// Last-Event-ID gets exactly the events it missed, then the new ones as they are appended; a
// comment keeps an idle stream alive.
func TestEventStreamResumesWithLastEventID(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	ts, _ := newServer(t, api.Config{DB: db, KeepAlive: 50 * time.Millisecond, WatchPoll: 200 * time.Millisecond})
	const id = "known"
	appendEvents(t, db, id, 1, 5)

	s := openStream(t, ts.URL, id, "")
	first := s.events(t, 3)
	checkAgainstLog(t, db, id, first, 0)
	s.close() // the client leaves after seq 3, with 4 and 5 sent or not

	appendEvents(t, db, id, 6, 9) // while nobody watches
	s = openStream(t, ts.URL, id, "", "Last-Event-ID", "3")
	got := s.events(t, 6)
	checkAgainstLog(t, db, id, got, 3)
	if got[0].id != "4" || got[5].id != "9" {
		t.Fatalf("resumed with %s..%s, want 4..9", got[0].id, got[5].id)
	}
	// Idle: a keep-alive comment comes, and no event.
	ev, err := s.next()
	if err != nil || ev.comment != "keep-alive" || ev.id != "" {
		t.Fatalf("while idle: %+v, %v", ev, err)
	}
	appendEvents(t, db, id, 10, 10)
	live := s.events(t, 1)
	checkAgainstLog(t, db, id, live, 9)

	// ?after does what Last-Event-ID does; the header wins.
	s2 := openStream(t, ts.URL, id, "?after=8")
	checkAgainstLog(t, db, id, s2.events(t, 2), 8)
	s3 := openStream(t, ts.URL, id, "?after=1", "Last-Event-ID", "9")
	checkAgainstLog(t, db, id, s3.events(t, 1), 9)
}

// With Accept: application/json the log comes as pages, each naming the next cursor.
func TestEventPages(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	ts, _ := newServer(t, api.Config{DB: db})
	appendEvents(t, db, "known", 1, 7)
	var seqs []int64
	after := int64(0)
	for range 10 {
		a := do(t, ts, "GET", fmt.Sprintf("/api/v1/tasks/known/events?after=%d&limit=3", after), "", "Accept", "application/json")
		var page api.EventPage
		if err := json.Unmarshal(a.body, &page); err != nil || a.status != 200 {
			t.Fatalf("%d %s: %v", a.status, a.body, err)
		}
		for _, ev := range page.Events {
			seqs = append(seqs, ev.Seq)
		}
		if len(page.Events) == 0 {
			if page.NextAfter != after {
				t.Fatalf("an empty page moved the cursor from %d to %d", after, page.NextAfter)
			}
			break
		}
		after = page.NextAfter
	}
	if fmt.Sprint(seqs) != "[1 2 3 4 5 6 7]" {
		t.Fatalf("pages gave %v", seqs)
	}
}

// A server that shuts down ends its event streams, so that the shutdown is not held up, and
// the client sees the stream end.
func TestShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	s, err := api.New(api.Config{Tasks: &recorder{}, Decider: &recorder{}, Reader: reader{}, DB: db, ShutdownTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	appendEvents(t, db, "known", 1, 1)
	st := openStream(t, "http://"+ln.Addr().String(), "known", "")
	st.events(t, 1)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	for {
		if _, err := st.next(); err != nil {
			if err != io.EOF && !strings.Contains(err.Error(), "closed") {
				t.Logf("stream ended with %v", err)
			}
			break
		}
	}
}

// smallPool is a pool of the database db holds with at most n connections.
func smallPool(t *testing.T, db *pgxpool.Pool, n int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = n
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Open event streams hold no connection of the pool: with more streams open than the pool has
// connections, each stream still gets new events and the API still answers reads from
// Postgres.
func TestOpenStreamsLeaveThePoolFree(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	pool := smallPool(t, db, 2)
	ts, _ := newServer(t, api.Config{DB: pool, Reader: taskview.New(pool), WatchPoll: time.Hour})
	appendEvents(t, db, "known", 1, 1)
	var streams []*stream
	for range 6 {
		s := openStream(t, ts.URL, "known", "")
		checkAgainstLog(t, db, "known", s.events(t, 1), 0)
		streams = append(streams, s)
	}
	if held := pool.Stat().AcquiredConns(); held != 0 {
		t.Errorf("6 open streams hold %d connections of the pool, want 0", held)
	}
	a := do(t, ts, "GET", "/api/v1/tasks/known/events?after=0", "", "Accept", "application/json")
	if a.status != 200 {
		t.Fatalf("a page of events with 6 streams open: %d %s", a.status, a.body)
	}
	if a := do(t, ts, "GET", "/api/v1/tasks/known", ""); a.status >= 500 {
		t.Fatalf("a task with 6 streams open: %d %s", a.status, a.body)
	}
	appendEvents(t, db, "known", 2, 2)
	for _, s := range streams {
		checkAgainstLog(t, db, "known", s.events(t, 1), 1)
	}
}

// Streams beyond the server's maximum are refused with 503 and a Retry-After; one that stays
// idle past its cutoff ends, and the client resumes with Last-Event-ID.
func TestStreamsAreBounded(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	ts, _ := newServer(t, api.Config{DB: db, MaxStreams: 2})
	appendEvents(t, db, "known", 1, 1)
	for range 2 {
		openStream(t, ts.URL, "known", "").events(t, 1)
	}
	a := do(t, ts, "GET", "/api/v1/tasks/known/events", "")
	if a.status != 503 || a.err.Code != "unavailable" || a.header.Get("Retry-After") == "" {
		t.Fatalf("a third stream: %d %s %q", a.status, a.err.Code, a.header.Get("Retry-After"))
	}

	// The stream starts after the log's only event, so that nothing is due on it: however slow
	// the machine, it idles from its start.
	ts2, _ := newServer(t, api.Config{DB: db, StreamIdleTimeout: 50 * time.Millisecond, KeepAlive: time.Hour})
	s := openStream(t, ts2.URL, "known", "", "Last-Event-ID", "1")
	var last sse
	for {
		ev, err := s.next()
		if err != nil {
			break // the server ended the stream
		}
		last = ev
	}
	if !strings.Contains(last.comment, "Last-Event-ID") {
		t.Errorf("an idle stream ended without saying how to go on: %+v", last)
	}
}

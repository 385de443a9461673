package offlinemodel

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFailHTTPError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		resp       Response
		status     int
		errType    string
		retryAfter string
	}{
		{Fail(429, "", 1500*time.Millisecond), 429, "rate_limit_error", "2"},
		{Fail(529, "", 0), 529, "overloaded_error", ""},
		{Fail(500, "api_error", time.Second), 500, "api_error", "1"},
		{Fail(503, "overloaded_error", 0), 503, "overloaded_error", ""},
	}
	srv := startServer(t, Config{})
	c := client(t)
	for _, tc := range cases {
		// Once for the non-streaming form, once for the streaming one.
		srv.Enqueue(tc.resp, tc.resp)
	}
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			resp := post(t, c, srv, "/v1/messages", messagesBody(stream, "x"))
			if resp.StatusCode != tc.status {
				t.Errorf("%d stream=%v: status %d", tc.status, stream, resp.StatusCode)
			}
			if got := resp.Header.Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("%d: retry-after %q, want %q", tc.status, got, tc.retryAfter)
			}
			var body apiError
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if body.Type != "error" || body.Error.Type != tc.errType || body.Error.Message == "" ||
				!strings.HasPrefix(body.RequestID, "req_") || resp.Header.Get("Request-Id") != body.RequestID {
				t.Errorf("%d: body %+v, request-id header %q", tc.status, body, resp.Header.Get("Request-Id"))
			}
		}
	}
	if srv.Pending() != 0 {
		t.Errorf("%d responses left", srv.Pending())
	}
}

func TestStreamErrorMidStream(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	srv.Enqueue(Reply(Text("first block"), Text("never sent")).WithStreamError(1, "overloaded_error", "Overloaded now"))
	resp := post(t, client(t), srv, "/v1/messages", messagesBody(true, "x"))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	events := readSSE(t, resp.Body)
	a := assemble(t, events)
	if len(a.Blocks) != 1 || a.Blocks[0]["text"] != "first block" {
		t.Errorf("blocks before the error: %v", a.Blocks)
	}
	if a.Error == nil || a.Error.Type != "error" || a.Error.Error.Type != "overloaded_error" || a.Error.Error.Message != "Overloaded now" {
		t.Errorf("error event %+v", a.Error)
	}
	if last := events[len(events)-1].Name; last != "error" || a.Stopped || a.StopReason != "" {
		t.Errorf("stream went on after the error: last %q, stopped %v", last, a.Stopped)
	}
}

func TestStreamErrorHelperAndNonStreaming(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	srv.Enqueue(StreamError("", "", Text("a"), Text("b")))
	srv.Enqueue(StreamError("rate_limit_error", "slow down"))
	c := client(t)

	a := assemble(t, readSSE(t, post(t, c, srv, "/v1/messages", messagesBody(true, "x")).Body))
	if len(a.Blocks) != 2 || a.Error == nil || a.Error.Error.Type != "overloaded_error" {
		t.Errorf("blocks %v error %+v", a.Blocks, a.Error)
	}
	// A non-streaming request cannot fail mid-stream: it gets the HTTP error.
	resp := post(t, c, srv, "/v1/messages", messagesBody(false, "x"))
	var body apiError
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 429 || body.Error.Type != "rate_limit_error" || body.Error.Message != "slow down" {
		t.Errorf("status %d body %+v", resp.StatusCode, body)
	}
}

// readUntil reads events until one named name with the given index.
func readUntil(t *testing.T, br *bufio.Reader, name string, index int) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		e := readEvent(t, br)
		out = append(out, e)
		var ev struct {
			Index int `json:"index"`
		}
		_ = json.Unmarshal(e.Data, &ev)
		if e.Name == name && ev.Index == index {
			return out
		}
	}
}

func TestHoldUntilRelease(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	release := make(chan struct{})
	srv.Enqueue(Reply(Text("before"), Text("after")).WithHold(1, release))
	resp := post(t, client(t), srv, "/v1/messages", messagesBody(true, "x"))
	br := bufio.NewReader(resp.Body)
	events := readUntil(t, br, "content_block_stop", 0)
	close(release)
	events = append(events, readSSE(t, br)...)
	a := assemble(t, events)
	if len(a.Blocks) != 2 || a.Blocks[1]["text"] != "after" || !a.Stopped {
		t.Errorf("after release: blocks %v stopped %v", a.Blocks, a.Stopped)
	}
}

func TestHoldEndsWhenClientGoesAway(t *testing.T) {
	t.Parallel()
	ended := make(chan error, 1)
	srv := startServer(t, Config{answered: func(_ int, err error) { ended <- err }})
	srv.Enqueue(Reply(Text("before"), Text("after")).WithHold(1, make(chan struct{})))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	b, _ := json.Marshal(messagesBody(true, "x"))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/v1/messages", strings.NewReader(string(b)))
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	readUntil(t, br, "content_block_stop", 0)
	// Everything up to the hold point is there; the rest never comes, and
	// going away ends the held answer before Close.
	cancel()
	select {
	case err := <-ended:
		if !errors.Is(err, errCut) {
			t.Errorf("held answer ended with %v, want errCut", err)
		}
	case <-time.After(30 * time.Second): // a guard, not a speed check
		t.Fatal("the held answer did not end when the client went away")
	}
	for {
		line, err := br.ReadString('\n')
		if strings.Contains(line, "after") || strings.Contains(line, "message_stop") {
			t.Fatalf("held stream went on: %q", line)
		}
		if err != nil {
			break
		}
	}
}

func TestCloseUnblocksHeldAndDelayedAnswers(t *testing.T) {
	t.Parallel()
	srv, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(Reply(Text("before"), Text("after")).WithHold(0, make(chan struct{})))
	srv.Enqueue(Reply(Text("slow")).WithDelay(time.Hour))
	c := client(t)
	held := post(t, c, srv, "/v1/messages", messagesBody(true, "held"))
	heldBr := bufio.NewReader(held.Body)
	if e := readEvent(t, heldBr); e.Name != "message_start" {
		t.Fatalf("first event %q", e.Name)
	}
	delayed := post(t, c, srv, "/v1/messages", messagesBody(true, "delayed"))

	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	rest := readSSE(t, heldBr)
	for _, e := range rest {
		if e.Name != "ping" {
			t.Errorf("held stream sent %s after Close", e.Name)
		}
	}
	// The delay comes before every event: nothing was sent at all.
	if events := readSSE(t, delayed.Body); len(events) != 0 {
		t.Errorf("delayed stream sent %v", names(events))
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// readSSECut parses an event stream until it ends, returning the events and
// the read error that ended it (nil for a clean end).
func readSSECut(t *testing.T, r io.Reader) ([]sseEvent, error) {
	t.Helper()
	var events []sseEvent
	br := bufio.NewReader(r)
	var cur sseEvent
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = json.RawMessage(strings.TrimPrefix(line, "data: "))
		case line == "" && cur.Name != "":
			events = append(events, cur)
			cur = sseEvent{}
		}
		if errors.Is(err, io.EOF) {
			return events, nil
		}
		if err != nil {
			return events, err
		}
	}
}

// blockEvents returns the names of the events about block index, in order.
func blockEvents(t *testing.T, events []sseEvent, index int) []string {
	t.Helper()
	var out []string
	for _, e := range events {
		var ev struct {
			Index *int `json:"index"`
		}
		_ = json.Unmarshal(e.Data, &ev)
		if ev.Index != nil && *ev.Index == index {
			out = append(out, e.Name)
		}
	}
	return out
}

func TestStreamErrorMidBlock(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("abcdefghijkl", 5) // five text deltas
	srv := startServer(t, Config{})
	srv.Enqueue(
		Reply(Text("whole"), Text(long), Text("never")).WithStreamErrorMidBlock(1, 2, "overloaded_error", "Overloaded mid-block"),
		Reply(Text(long)).WithStreamErrorMidBlock(0, 99, "api_error", ""),
		Reply(UseBash("echo a long enough command to need several chunks")).WithStreamErrorMidBlock(0, 2, "", ""),
		Reply(Text("x")).WithStreamErrorMidBlock(0, 1, "", "").WithStreamError(0, "", ""), // back between blocks
	)
	c := client(t)

	events := readSSE(t, post(t, c, srv, "/v1/messages", messagesBody(true, "x")).Body)
	a := assemble(t, events)
	if got := blockEvents(t, events, 1); !reflect.DeepEqual(got, []string{"content_block_start", "content_block_delta", "content_block_delta"}) {
		t.Errorf("events of the cut block: %v", got)
	}
	if len(a.Blocks) != 2 || a.Blocks[0]["text"] != "whole" || a.Blocks[1]["text"] != long[:24] {
		t.Errorf("blocks %v", a.Blocks)
	}
	if a.Error == nil || a.Error.Error.Type != "overloaded_error" || a.Error.Error.Message != "Overloaded mid-block" || a.Stopped || a.StopReason != "" {
		t.Errorf("error %+v stopped %v", a.Error, a.Stopped)
	}
	if last := events[len(events)-1].Name; last != "error" {
		t.Errorf("last event %s", last)
	}

	// More deltas than the block has: all of them, still no stop.
	events = readSSE(t, post(t, c, srv, "/v1/messages", messagesBody(true, "x")).Body)
	if got := blockEvents(t, events, 0); len(got) != 6 || got[5] != "content_block_delta" {
		t.Errorf("events of the cut block: %v", got)
	}
	if a := assemble(t, events); a.Blocks[0]["text"] != long || a.Error == nil || a.Error.Error.Type != "api_error" {
		t.Errorf("blocks %v error %+v", a.Blocks, a.Error)
	}

	// A tool call cut inside its input: the partial JSON never completes.
	events = readSSE(t, post(t, c, srv, "/v1/messages", messagesBody(true, "x")).Body)
	if got := blockEvents(t, events, 0); !reflect.DeepEqual(got, []string{"content_block_start", "content_block_delta", "content_block_delta"}) {
		t.Errorf("events of the cut tool call: %v", got)
	}
	if n := len(names(events)); names(events)[n-1] != "error" {
		t.Errorf("events %v", names(events))
	}

	// WithStreamError after WithStreamErrorMidBlock is between blocks again.
	events = readSSE(t, post(t, c, srv, "/v1/messages", messagesBody(true, "x")).Body)
	if got := names(events); !reflect.DeepEqual(got, []string{"message_start", "error"}) {
		t.Errorf("events %v", got)
	}
}

func TestDisconnect(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("abcdefghijkl", 5)
	srv := startServer(t, Config{})
	srv.Enqueue(
		Reply(Text("whole"), Text("never")).WithDisconnect(1),
		Reply(Text(long)).WithDisconnectMidBlock(0, 3),
		Reply(Text("never")).WithDisconnect(0),
	)
	c := client(t)

	events, err := readSSECut(t, post(t, c, srv, "/v1/messages", messagesBody(true, "x")).Body)
	if err == nil {
		t.Error("the stream ended cleanly")
	}
	if got := names(events); !reflect.DeepEqual(got, []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop"}) {
		t.Errorf("events before the drop: %v", got)
	}

	events, err = readSSECut(t, post(t, c, srv, "/v1/messages", messagesBody(true, "x")).Body)
	if err == nil {
		t.Error("the stream ended cleanly")
	}
	if got := blockEvents(t, events, 0); !reflect.DeepEqual(got, []string{"content_block_start", "content_block_delta", "content_block_delta", "content_block_delta"}) {
		t.Errorf("events before the drop: %v", got)
	}

	// A non-streaming request gets no answer at all.
	b, _ := json.Marshal(messagesBody(false, "x"))
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/v1/messages", strings.NewReader(string(b)))
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("non-streaming request answered %d", resp.StatusCode)
	}
	l := srv.Ledger()
	if len(l) != 2 || l[0].Cut != CutDisconnect || l[0].Blocks != 1 || l[1].Cut != CutDisconnect || l[1].Blocks != 0 {
		t.Errorf("ledger %+v", l)
	}
}

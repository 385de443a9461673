package offlinemodel

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

func TestCallsHelpers(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	a, b := APIKeyAccount("a"), OAuthAccount("b")
	r1, r2 := at(100), at(200)
	cs := Calls{
		{Seq: 1, Account: a, Class: ClassMain, Start: at(0), End: at(10), Status: 200},
		{Seq: 2, Account: a, Class: ClassSubagent, Start: at(5), End: at(15), Status: 200},
		{Seq: 3, Account: a, Class: ClassMain, Start: at(10), End: at(20), Status: 429, Limit: LimitUsage, Reset: r1}, // starts as 1 ends
		{Seq: 4, Account: b, Class: ClassMain, Start: at(12), Status: 200},                                            // still in flight
		{Seq: 5, Account: a, Class: ClassMain, Start: at(30), End: at(40), Status: 429, Limit: LimitUsage, Reset: r1},
		{Seq: 6, Account: a, Class: ClassCountTokens, Start: at(31), End: at(32), Status: 200},
		{Seq: 7, Account: b, Class: ClassMain, Start: at(50), End: at(51), Status: 429, Limit: LimitSpendCap, Reset: r2},
	}
	seqs := func(cs Calls) []int {
		var out []int
		for _, c := range cs {
			out = append(out, c.Seq)
		}
		return out
	}
	check := func(what string, got Calls, want ...int) {
		t.Helper()
		g := seqs(got)
		if len(g) != len(want) {
			t.Errorf("%s: %v, want %v", what, g, want)
			return
		}
		for i := range g {
			if g[i] != want[i] {
				t.Errorf("%s: %v, want %v", what, g, want)
				return
			}
		}
	}
	check("Of(a)", cs.Of(a), 1, 2, 3, 5, 6)
	check("Class(main)", cs.Class(ClassMain), 1, 3, 4, 5, 7)
	check("Class(main, subagent)", cs.Class(ClassMain, ClassSubagent), 1, 2, 3, 4, 5, 7)
	check("Limited()", cs.Limited(), 3, 5, 7)
	check("Limited(usage)", cs.Limited(LimitUsage), 3, 5)
	check("Answered", cs.Answered(), 1, 2, 4)
	check("Started[5,12)", cs.Started(at(5), at(12)), 2, 3)
	check("Active[11,12)", cs.Active(at(11), at(12)), 2, 3)
	check("Active[10,11)", cs.Active(at(10), at(11)), 2, 3) // 1 ended at 10
	check("Active[45,46)", cs.Active(at(45), at(46)), 4)    // 4 never ended

	if got := cs.MaxInFlight(); got != 3 { // 2, 3 and 4 at 12 s
		t.Errorf("MaxInFlight %d, want 3", got)
	}
	if got := cs.Of(a).Class(ClassMain).MaxInFlight(); got != 1 { // 1 ends as 3 starts
		t.Errorf("main calls of a: MaxInFlight %d, want 1", got)
	}
	if got := (Calls{}).MaxInFlight(); got != 0 {
		t.Errorf("empty MaxInFlight %d", got)
	}
	if got := cs.MaxPerReset(); got != 2 {
		t.Errorf("MaxPerReset %d, want 2", got)
	}
	if got := cs.Of(b).MaxPerReset(); got != 1 {
		t.Errorf("MaxPerReset of b %d, want 1", got)
	}
	if !cs[3].InFlight(at(1000)) || cs[0].InFlight(at(10)) || !cs[0].InFlight(at(0)) || cs[0].InFlight(at(-1)) {
		t.Errorf("InFlight")
	}
}

// The request log times every request by the server's clock, with its
// status, while it runs and after.
func TestCallsTiming(t *testing.T) {
	t.Parallel()
	srv := startServerAllowInvalid(t, Config{}) // the last request is invalid on purpose
	c := client(t)
	one, two := credential{bearer: "sk-ant-oat01-one"}, credential{apiKey: "sk-ant-api03-two"}
	release := make(chan struct{})
	srv.Enqueue(
		Reply(Text("held a")).WithHold(0, release),
		Reply(Text("held b")).WithHold(0, release),
		Reply(Text("other account")),
		Reply(Text("slow")).WithDelay(20*time.Millisecond),
	)
	before := time.Now()
	// Two streams of account one held at once: their headers come back at
	// message_start, so both are in flight when postAs returns.
	var held [2]*http.Response
	for i := range held {
		held[i] = postAs(t, c, srv, one, "/v1/messages", messagesBody(true, "x"))
	}
	calls := srv.Calls()
	if len(calls) != 2 || !calls[0].End.IsZero() || !calls[1].End.IsZero() || calls[0].Start.Before(before) {
		t.Fatalf("calls while held: %+v", calls)
	}
	if n := calls.MaxInFlight(); n != 2 {
		t.Errorf("MaxInFlight %d while two are held", n)
	}
	if n := len(calls.Active(time.Now(), time.Now().Add(time.Second))); n != 2 {
		t.Errorf("%d calls active now, want 2", n)
	}
	drain(t, postAs(t, c, srv, two, "/v1/messages", messagesBody(false, "x")))
	close(release)
	for _, r := range held {
		drain(t, r)
	}
	drain(t, postAs(t, c, srv, two, "/v1/messages", messagesBody(true, "x")))
	drain(t, postAs(t, c, srv, two, "/v1/nothing", messagesBody(true, "x")))
	drain(t, postAs(t, c, srv, two, "/v1/messages", map[string]any{"model": DefaultModel}))

	calls = srv.Calls()
	if len(calls) != 6 {
		t.Fatalf("%d calls, want 6", len(calls))
	}
	wantStatus := []int{200, 200, 200, 200, 404, 400}
	for i, cl := range calls {
		if cl.Seq != i+1 || cl.Status != wantStatus[i] || cl.End.IsZero() || cl.End.Before(cl.Start) {
			t.Errorf("call %d: %+v, want status %d", i+1, cl, wantStatus[i])
		}
	}
	if n := calls.Of(one.account()).MaxInFlight(); n != 2 {
		t.Errorf("account one: MaxInFlight %d, want 2", n)
	}
	if n := calls.Of(two.account()).MaxInFlight(); n != 1 {
		t.Errorf("account two: MaxInFlight %d, want 1", n)
	}
	// The held answers ended after the other account's answer.
	if !calls[0].End.After(calls[2].End) {
		t.Errorf("held call ended %v, before the later call's end %v", calls[0].End, calls[2].End)
	}
	if d := calls[3].End.Sub(calls[3].Start); d < 100*time.Millisecond { // 20 ms before each of ≥ 6 events
		t.Errorf("a slow answer took %v", d)
	}
	if calls[4].Class != ClassOther || calls[5].Limit != "" {
		t.Errorf("calls %+v", calls[4:])
	}
}

// A dropped connection before any byte is logged with status 0.
func TestCallOfADroppedConnection(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	c := client(t)
	srv.Enqueue(Reply(Text("never")).WithDisconnect(0))
	b, _ := json.Marshal(messagesBody(false, "x"))
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/v1/messages", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", "sk-ant-api03-dropped")
	resp, err := c.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t.Fatalf("the connection was not dropped: %d", resp.StatusCode)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		calls := srv.Calls()
		if len(calls) == 1 && !calls[0].End.IsZero() {
			if calls[0].Status != 0 || calls[0].Account != APIKeyAccount("sk-ant-api03-dropped") {
				t.Errorf("call %+v", calls[0])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls %+v", calls)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

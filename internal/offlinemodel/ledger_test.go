package offlinemodel

import (
	"io"
	"math"
	"net/http"
	"testing"
)

func TestLedgerRecordsWhatWasReported(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	c := client(t)
	u1 := Usage{InputTokens: 100, OutputTokens: 40, CacheReadInputTokens: 10, CacheCreationInputTokens: 20}
	u2 := Usage{InputTokens: 7, OutputTokens: 3, CacheReadInputTokens: 5, CacheCreationInputTokens: 2}
	srv.Enqueue(
		Reply(Text("streamed")).WithUsage(u1),
		Reply(Text("as JSON")).WithUsage(u2),
		Fail(529, "", 0),
		Reply(Text("first"), Text("cut short")).WithStreamError(1, "overloaded_error", ""),
		Reply(Text("dropped")).WithDisconnectMidBlock(0, 1).WithUsage(u2),
		Reply(Text("default usage")),
	)
	readSSE(t, post(t, c, srv, "/v1/messages", messagesBody(true, "a")).Body)
	_, _ = io.Copy(io.Discard, post(t, c, srv, "/v1/messages", messagesBody(false, "b")).Body)
	mark := srv.Mark()
	_, _ = io.Copy(io.Discard, post(t, c, srv, "/v1/messages", messagesBody(true, "c")).Body)
	readSSE(t, post(t, c, srv, "/v1/messages", messagesBody(true, "d")).Body)
	dropped := postRaw(t, c, srv, messagesBody(true, "e"))
	if dropped == nil {
		t.Error("the dropped stream ended cleanly")
	}
	readSSE(t, post(t, c, srv, "/v1/messages", messagesBody(true, "f")).Body)

	l := srv.Ledger()
	if len(l) != 5 {
		t.Fatalf("%d entries, want 5 (the 529 bills nothing): %+v", len(l), l)
	}
	opus, _ := BuiltinModel(DefaultModel)
	want := []LedgerEntry{
		{Seq: 1, Class: ClassMain, Model: DefaultModel, Stream: true, Usage: u1, Completed: true, Blocks: 1, CostUSD: 0.001302},
		{Seq: 2, Class: ClassMain, Model: DefaultModel, Stream: false, Usage: u2, Completed: true, Blocks: 1, CostUSD: opus.Price.Cost(u2)},
	}
	for i, w := range want {
		if l[i].Seq != w.Seq || l[i].Class != w.Class || l[i].Model != w.Model || l[i].Stream != w.Stream || l[i].Usage != w.Usage ||
			l[i].Completed != w.Completed || l[i].Blocks != w.Blocks || l[i].Cut != "" || math.Abs(l[i].CostUSD-w.CostUSD) > 1e-12 {
			t.Errorf("entry %d: %+v, want %+v", i, l[i], w)
		}
	}
	// The stream cut by an error event reported only message_start's usage
	// (one output token) and is not completed.
	if e := l[2]; e.Seq != 4 || e.Completed || e.Cut != CutErrorEvent || e.Blocks != 1 || e.Usage.OutputTokens != 1 || e.CostUSD <= 0 {
		t.Errorf("cut entry %+v", e)
	}
	if e := l[3]; e.Seq != 5 || e.Completed || e.Cut != CutDisconnect || e.Blocks != 0 || e.Usage.InputTokens != u2.InputTokens || e.Usage.OutputTokens != 1 {
		t.Errorf("dropped entry %+v", e)
	}
	// Without WithUsage every answer reports cache tokens of both kinds.
	if e := l[4]; !e.Completed || e.Usage.InputTokens <= 0 || e.Usage.OutputTokens <= 0 ||
		e.Usage.CacheReadInputTokens <= 0 || e.Usage.CacheCreationInputTokens <= 0 || e.CostUSD != opus.Price.Cost(e.Usage) {
		t.Errorf("default usage entry %+v", e)
	}

	tot := srv.LedgerTotals()
	wantUsage := u1.Add(u2).Add(l[4].Usage)
	if tot.Responses != 3 || tot.Usage != wantUsage || math.Abs(tot.CostUSD-(l[0].CostUSD+l[1].CostUSD+l[4].CostUSD)) > 1e-12 {
		t.Errorf("totals %+v, want usage %+v", tot, wantUsage)
	}
	if tot.Incomplete != 2 || tot.IncompleteUsage != l[2].Usage.Add(l[3].Usage) || math.Abs(tot.IncompleteCostUSD-(l[2].CostUSD+l[3].CostUSD)) > 1e-12 {
		t.Errorf("incomplete totals %+v", tot)
	}
	if m := tot.ByModel[DefaultModel]; m.Responses != 3 || m.Usage != wantUsage || m.CostUSD != tot.CostUSD || len(tot.ByModel) != 1 {
		t.Errorf("by model %+v", tot.ByModel)
	}

	since := srv.LedgerSince(mark)
	if len(since) != 3 || since[0].Seq != 4 {
		t.Errorf("since mark %d: %+v", mark, since)
	}
	if s := SumLedger(since); s.Responses != 1 || s.Incomplete != 2 || s.Usage != l[4].Usage {
		t.Errorf("sum since mark %+v", s)
	}
	if len(srv.LedgerSince(srv.Mark())) != 0 {
		t.Error("entries after the latest mark")
	}
}

// postRaw posts a body and reads the whole answer, returning the read error
// (nil when the answer ended cleanly).
func postRaw(t *testing.T, c *http.Client, srv *Server, b map[string]any) error {
	t.Helper()
	resp := post(t, c, srv, "/v1/messages", b)
	_, err := io.Copy(io.Discard, resp.Body)
	return err
}

func TestCacheSplit(t *testing.T) {
	t.Parallel()
	c := client(t)
	none := startServer(t, Config{CacheSplit: &CacheSplit{}})
	readSSE(t, post(t, c, none, "/v1/messages", messagesBody(true, "a")).Body)
	if u := none.Ledger()[0].Usage; u.CacheReadInputTokens != 0 || u.CacheCreationInputTokens != 0 || u.InputTokens <= 0 {
		t.Errorf("no cache: %+v", u)
	}
	reads := startServer(t, Config{CacheSplit: &CacheSplit{Read: 0.9}})
	readSSE(t, post(t, c, reads, "/v1/messages", messagesBody(true, "a")).Body)
	if u := reads.Ledger()[0].Usage; u.CacheReadInputTokens < 5*u.InputTokens || u.CacheCreationInputTokens != 0 {
		t.Errorf("mostly reads: %+v", u)
	}
	for _, bad := range []CacheSplit{{Read: -0.1}, {Write: 1.1}, {Read: 0.6, Write: 0.6}} {
		if srv, err := Start(Config{CacheSplit: &bad}); err == nil {
			srv.Close()
			t.Errorf("Start accepted cache split %+v", bad)
		}
	}
}

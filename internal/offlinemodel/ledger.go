package offlinemodel

import (
	"slices"
)

// LedgerEntry is one response the server answered with an assistant
// message, as it billed it: the server's own record, kept apart from what
// any client says it spent.
type LedgerEntry struct {
	// Seq is the request's Seq.
	Seq int
	// Class is main, subagent, compact or auxiliary.
	Class Class
	// Account is the account billed.
	Account Account
	// Model is the model named in the answer (the request's).
	Model string
	// Stream tells a streamed answer from a JSON one.
	Stream bool
	// Usage is the usage the answer reported: for a stream, message_delta's
	// when it was sent, else message_start's; for JSON, the message's.
	Usage Usage
	// Completed is true when the whole message was sent: message_stop for a
	// stream, the whole body for JSON. An answer cut by an injected error
	// event, a dropped connection, the client going away or Close is not
	// completed, and Cut says which.
	Completed bool
	Cut       Cut
	// Blocks is the number of content blocks sent whole (up to their
	// content_block_stop).
	Blocks int
	// CostUSD is Usage priced with the model's Price (see Price.Cost).
	CostUSD float64
}

// Cut is how an answer that did not complete ended.
type Cut string

// The ways an answer ends early.
const (
	// CutErrorEvent: the stream ended with an injected SSE error event.
	CutErrorEvent Cut = "error_event"
	// CutDisconnect: the server dropped the connection on purpose.
	CutDisconnect Cut = "disconnect"
	// CutGone: the client went away, the server closed, or a write failed.
	CutGone Cut = "gone"
)

// LedgerTotals sums ledger entries. Only completed entries are billed:
// Responses, Usage, CostUSD and ByModel count them alone. The entries that
// did not complete are summed apart, with what they reported before they
// were cut, because a client may count them: see the package documentation
// for what the pinned CLI does.
type LedgerTotals struct {
	Responses int
	Usage     Usage
	CostUSD   float64
	ByModel   map[string]ModelTotals

	Incomplete        int
	IncompleteUsage   Usage
	IncompleteCostUSD float64
}

// ModelTotals are the billed totals of one model.
type ModelTotals struct {
	Responses int
	Usage     Usage
	CostUSD   float64
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:              u.InputTokens + v.InputTokens,
		OutputTokens:             u.OutputTokens + v.OutputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens + v.CacheCreationInputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens + v.CacheReadInputTokens,
	}
}

// SumLedger totals entries; see LedgerTotals. Costs are added in the order
// of entries.
func SumLedger(entries []LedgerEntry) LedgerTotals {
	t := LedgerTotals{ByModel: map[string]ModelTotals{}}
	for _, e := range entries {
		if !e.Completed {
			t.Incomplete++
			t.IncompleteUsage = t.IncompleteUsage.Add(e.Usage)
			t.IncompleteCostUSD += e.CostUSD
			continue
		}
		t.Responses++
		t.Usage = t.Usage.Add(e.Usage)
		t.CostUSD += e.CostUSD
		m := t.ByModel[e.Model]
		m.Responses++
		m.Usage = m.Usage.Add(e.Usage)
		m.CostUSD += e.CostUSD
		t.ByModel[e.Model] = m
	}
	return t
}

// Ledger returns every ledger entry so far, in request order. An entry is
// added when its answer ends, so an answer still streaming or held is not
// there yet. HTTP errors and rejected requests bill nothing and have no
// entry.
func (s *Server) Ledger() []LedgerEntry {
	return s.LedgerSince(0)
}

// Mark returns the Seq of the latest request so far; LedgerSince(mark)
// later returns the entries of the requests that came after it.
func (s *Server) Mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

// LedgerSince returns the ledger entries of requests with a Seq above mark,
// in request order.
func (s *Server) LedgerSince(mark int) []LedgerEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LedgerEntry
	for _, e := range s.ledger {
		if e.Seq > mark {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b LedgerEntry) int { return a.Seq - b.Seq })
	return out
}

// LedgerTotals sums the whole ledger.
func (s *Server) LedgerTotals() LedgerTotals {
	return SumLedger(s.Ledger())
}

// bill prices and records one answer.
func (s *Server) bill(e LedgerEntry) {
	if m, ok := s.model(e.Model); ok {
		e.CostUSD = m.Price.Cost(e.Usage)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger = append(s.ledger, e)
}

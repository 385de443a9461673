package offlinemodel

import (
	"cmp"
	"net/http"
	"slices"
	"time"
)

// Call is one request as the server's clock saw it: the request log a test
// holds drover's own records against ("no request of account A reached the
// API between T1 and T2", "at most one request per announced reset", "never
// more than N main requests in flight at once").
type Call struct {
	// Seq is the request's Seq.
	Seq     int
	Account Account
	Class   Class
	Path    string
	// Start is when the request arrived; End when its answer ended (the
	// last byte sent, or the connection cut). End is zero while the answer
	// is in progress.
	Start time.Time
	End   time.Time
	// Status is the HTTP status answered: 200 for a message (also one cut
	// short), the error status otherwise, 0 when nothing was answered (a
	// dropped connection before any byte).
	Status int
	// Limit is the account limit that refused the request, or "".
	Limit LimitKind
	// Reset is the reset the answer announced (an account limit's), or zero.
	Reset time.Time
}

// InFlight reports whether the call's answer had not ended at t.
func (c Call) InFlight(t time.Time) bool {
	return !t.Before(c.Start) && (c.End.IsZero() || t.Before(c.End))
}

// Calls is a request log, in order of arrival.
type Calls []Call

// Calls returns every request so far, in order of arrival, with its timing
// and answer.
func (s *Server) Calls() Calls {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Of returns the calls of account a.
func (cs Calls) Of(a Account) Calls {
	return cs.filter(func(c Call) bool { return c.Account == a })
}

// Class returns the calls of the given classes.
func (cs Calls) Class(classes ...Class) Calls {
	return cs.filter(func(c Call) bool { return slices.Contains(classes, c.Class) })
}

// Limited returns the calls an account limit refused; with kinds, only those
// of these kinds.
func (cs Calls) Limited(kinds ...LimitKind) Calls {
	return cs.filter(func(c Call) bool {
		return c.Limit != "" && (len(kinds) == 0 || slices.Contains(kinds, c.Limit))
	})
}

// Answered returns the calls answered with an assistant message (status 200
// on /v1/messages).
func (cs Calls) Answered() Calls {
	return cs.filter(func(c Call) bool {
		return c.Status == http.StatusOK && c.Class != ClassCountTokens && c.Class != ClassOther
	})
}

// Started returns the calls that arrived in [from, to).
func (cs Calls) Started(from, to time.Time) Calls {
	return cs.filter(func(c Call) bool { return !c.Start.Before(from) && c.Start.Before(to) })
}

// Active returns the calls in flight at some moment of [from, to): arrived
// before to and not ended by from.
func (cs Calls) Active(from, to time.Time) Calls {
	return cs.filter(func(c Call) bool { return c.Start.Before(to) && (c.End.IsZero() || c.End.After(from)) })
}

// MaxInFlight returns the largest number of calls in flight at one moment. A
// call that ends exactly when another starts does not overlap it; one that
// has not ended overlaps everything after its start.
func (cs Calls) MaxInFlight() int {
	type event struct {
		at    time.Time
		delta int
	}
	events := make([]event, 0, 2*len(cs))
	for _, c := range cs {
		events = append(events, event{c.Start, 1})
		if !c.End.IsZero() {
			events = append(events, event{c.End, -1})
		}
	}
	slices.SortFunc(events, func(a, b event) int {
		return cmp.Or(a.at.Compare(b.at), a.delta-b.delta) // ends before starts at the same instant
	})
	n, most := 0, 0
	for _, e := range events {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// MaxPerReset returns the largest number of calls that were told the same
// reset (calls that announced none are not counted): 1 means no reset was
// announced twice, that is, each announced reset was asked about at most
// once.
func (cs Calls) MaxPerReset() int {
	per := map[int64]int{}
	most := 0
	for _, c := range cs {
		if c.Reset.IsZero() {
			continue
		}
		per[c.Reset.Unix()]++
		most = max(most, per[c.Reset.Unix()])
	}
	return most
}

func (cs Calls) filter(keep func(Call) bool) Calls {
	var out Calls
	for _, c := range cs {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (Flush).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// callLimited notes that an account limit refused call seq.
func (s *Server) callLimited(seq int, kind LimitKind, reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.callIndex[seq]; ok {
		s.calls[i].Limit, s.calls[i].Reset = kind, reset
	}
}

// callEnded notes the end of call seq and its status.
func (s *Server) callEnded(seq, status int) {
	end := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.callIndex[seq]; ok {
		s.calls[i].End, s.calls[i].Status = end, status
	}
}

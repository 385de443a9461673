package offlinemodel

import (
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// serveHTTP routes one request. Every request is recorded first.
func (s *Server) serveHTTP(rw http.ResponseWriter, hr *http.Request) {
	received := s.now()
	reqID := newID("req_")
	w := &statusWriter{ResponseWriter: rw}
	w.Header().Set("Request-Id", reqID)

	body, err := io.ReadAll(http.MaxBytesReader(w, hr.Body, s.cfg.MaxBodyBytes))
	r := &Request{
		Method:   hr.Method,
		Path:     hr.URL.Path,
		Class:    ClassOther,
		Account:  accountOf(hr.Header),
		Received: received,
		Header:   safeHeader(hr.Header),
		Body:     body,
	}
	// Runs also when a dropped connection panics with http.ErrAbortHandler.
	defer func() {
		if r.Seq != 0 {
			s.callEnded(r.Seq, w.status)
		}
	}()
	if err != nil {
		status := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status = http.StatusRequestEntityTooLarge
		}
		s.refuse(w, r, &violation{status: status, errType: errorTypeFor(status), msg: "reading request body: " + err.Error()}, reqID)
		return
	}

	route := strings.TrimSuffix(hr.URL.Path, "/")
	switch {
	case route == "/v1/messages" && hr.Method == http.MethodPost:
		s.serveMessages(w, hr, r, reqID)
	case route == "/v1/messages/count_tokens" && hr.Method == http.MethodPost:
		s.serveCountTokens(w, r, reqID)
	case route == "/api/hello" && (hr.Method == http.MethodGet || hr.Method == http.MethodHead):
		// The CLI's connectivity probe when non-essential traffic is on.
		s.record(r)
		w.WriteHeader(http.StatusOK)
	default:
		s.record(r)
		s.log.Info("offline model: unknown route", "seq", r.Seq, "method", r.Method, "path", r.Path)
		writeAPIError(w, http.StatusNotFound, newAPIError(http.StatusNotFound, "", "Not found: "+r.Method+" "+r.Path, reqID), 0)
	}
}

// serveCountTokens answers a token estimate from the request's size. The
// request is validated as the API validates it (without max_tokens).
func (s *Server) serveCountTokens(w http.ResponseWriter, r *Request, reqID string) {
	if err := r.parseBody(r.Body); err != nil {
		s.refuse(w, r, invalid("request body is not a JSON object"), reqID)
		return
	}
	r.Class = ClassCountTokens
	if v := validate(r.Body, true, s.model); v != nil {
		s.refuse(w, r, v, reqID)
		return
	}
	s.record(r)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int{"input_tokens": estimateTokens(len(r.Body))})
}

// refuse records r as refused with v and answers v in the API's error shape.
func (s *Server) refuse(w http.ResponseWriter, r *Request, v *violation, reqID string) {
	r.Invalid = v.msg
	s.record(r)
	rej := Rejection{Seq: r.Seq, Class: r.Class, Path: r.Path, Model: r.Model, Status: v.status, Type: v.errType, Message: v.msg}
	s.mu.Lock()
	s.rejections = append(s.rejections, rej)
	s.mu.Unlock()
	if s.cfg.RateLimit != nil {
		s.cfg.RateLimit.setHeaders(w.Header(), s.now())
	}
	s.log.Warn("offline model: invalid request", "seq", r.Seq, "class", string(r.Class), "model", r.Model,
		"status", v.status, "error_type", v.errType, "reason", v.msg)
	writeAPIError(w, v.status, newAPIError(v.status, v.errType, v.msg, reqID), 0)
}

// serveMessages classifies, validates, records and answers a /v1/messages
// request.
func (s *Server) serveMessages(w http.ResponseWriter, hr *http.Request, r *Request, reqID string) {
	if err := r.parseBody(r.Body); err != nil {
		s.refuse(w, r, invalid("request body is not a JSON object"), reqID)
		return
	}
	r.Class = classifyMessages(r)
	if v := validate(r.Body, false, s.model); v != nil {
		s.refuse(w, r, v, reqID)
		return
	}
	s.record(r)

	now := s.now()
	if lim, ok := s.activeLimit(r.Account, now); ok {
		s.refuseLimited(w, r, lim, now, reqID)
		return
	}

	resp, source := s.choose(r)
	log := s.log.With("seq", r.Seq, "class", string(r.Class), "model", r.Model, "stream", r.Stream,
		"messages", len(r.Messages), "answer", string(source), "account", string(r.Account))
	pace := pacer{ctx: hr.Context(), closing: s.closing}
	s.setAnswerHeaders(w.Header(), r.Account, resp, now)
	if resp.Status != 0 {
		answerHTTPError(w, log, pace, resp, reqID)
		return
	}

	blocks, err := serveBlocks(resp.Blocks)
	if err != nil {
		log.Error("offline model: bad scripted response", "err", err)
		writeAPIError(w, http.StatusInternalServerError, newAPIError(http.StatusInternalServerError, "", "offline model: "+err.Error(), reqID), 0)
		return
	}
	a := streamAnswer{id: newID("msg_"), model: r.Model, blocks: blocks, resp: resp,
		usage: estimateUsage(len(r.Body), blocks, *s.cfg.CacheSplit)}
	if resp.Usage != nil {
		a.usage = *resp.Usage
	}
	entry := LedgerEntry{Seq: r.Seq, Class: r.Class, Account: r.Account, Model: r.Model, Stream: r.Stream}
	if r.Stream {
		s.answerStream(w, log, pace, a, entry)
	} else {
		s.answerWhole(w, log, pace, a, entry, reqID)
	}
}

// setAnswerHeaders sets the rate limit and quota headers of an answer to account, and the
// headers its scripted response adds.
func (s *Server) setAnswerHeaders(h http.Header, account Account, resp Response, now time.Time) {
	if rl := cmp.Or(resp.RateLimit, s.cfg.RateLimit); rl != nil {
		rl.setHeaders(h, now)
	}
	if q, ok := s.quota(account); ok {
		q.setHeaders(h)
	}
	for k, v := range resp.Header {
		h[k] = append([]string(nil), v...)
	}
}

// answerHTTPError answers a scripted HTTP error, after its delay.
func answerHTTPError(w http.ResponseWriter, log *slog.Logger, pace pacer, resp Response, reqID string) {
	log.Info("offline model: injected HTTP error", "status", resp.Status, "error_type", resp.ErrorType)
	if err := pace.sleep(resp.Delay); err != nil {
		return
	}
	body := newAPIError(resp.Status, resp.ErrorType, resp.ErrorMessage, reqID)
	if resp.ErrorCode != "" {
		body.Error.Details = &apiErrorDetails{ErrorCode: resp.ErrorCode}
	}
	writeAPIError(w, resp.Status, body, resp.RetryAfter)
}

// answerWhole answers a non-streaming request with one message and bills it once sent whole.
func (s *Server) answerWhole(w http.ResponseWriter, log *slog.Logger, pace pacer, a streamAnswer, entry LedgerEntry, reqID string) {
	log.Info("offline model: answering", "blocks", len(a.blocks))
	if s.answerJSON(w, pace, a.resp, a.id, a.model, a.blocks, a.usage, reqID) {
		entry.Usage, entry.Completed, entry.Blocks = a.usage, true, len(a.blocks)
		s.bill(entry)
	}
	if a.resp.Disconnect {
		log.Info("offline model: dropping the connection")
		panic(http.ErrAbortHandler)
	}
}

// answerStream streams the answer and bills what the stream delivered, saying where it was cut.
func (s *Server) answerStream(w http.ResponseWriter, log *slog.Logger, pace pacer, a streamAnswer, entry LedgerEntry) {
	log.Info("offline model: streaming", "blocks", len(a.blocks))
	sw := &sseWriter{w: w, rc: http.NewResponseController(w), pace: pace, delay: a.resp.Delay, deltaSent: a.resp.DeltaSent}
	st, err := streamMessage(sw, a)
	if st.started {
		entry.Usage, entry.Completed, entry.Blocks = st.usage, st.completed, st.blocks
		switch {
		case st.completed:
		case st.errEvent:
			entry.Cut = CutErrorEvent
		case errors.Is(err, errDisconnect):
			entry.Cut = CutDisconnect
		default:
			entry.Cut = CutGone
		}
		s.bill(entry)
	}
	if err != nil {
		log.Info("offline model: stream ended early", "err", err)
	}
	if s.cfg.answered != nil {
		s.cfg.answered(entry.Seq, err)
	}
	if errors.Is(err, errDisconnect) {
		panic(http.ErrAbortHandler)
	}
}

// answerJSON answers a non-streaming request with one message, or with the
// HTTP equivalent of a scripted stream error. It reports whether it sent the
// whole message; with Disconnect it sends nothing.
func (s *Server) answerJSON(w http.ResponseWriter, pace pacer, resp Response, msgID, model string,
	blocks []servedBlock, usage Usage, reqID string) bool {
	if err := pace.sleep(resp.Delay); err != nil {
		return false
	}
	if resp.Hold != nil {
		if err := pace.hold(resp.Hold, nil); err != nil {
			return false
		}
	}
	if resp.Disconnect {
		return false
	}
	if resp.StreamError {
		errType := streamErrorType(resp)
		status := statusFor(errType)
		writeAPIError(w, status, newAPIError(status, errType, resp.ErrorMessage, reqID), 0)
		return false
	}
	b, err := json.Marshal(messageJSON(msgID, model, blocks, resp.stopReason(), usage))
	if err != nil {
		s.log.Error("offline model: marshalling the answer", "err", err)
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(append(b, '\n'))
	return err == nil
}

// refuseLimited answers a request of an account that limit lim refuses. It
// consumes nothing scripted and bills nothing.
func (s *Server) refuseLimited(w http.ResponseWriter, r *Request, lim AccountLimit, now time.Time, reqID string) {
	ans := s.answerFor(r.Account, lim, now, reqID)
	s.callLimited(r.Seq, lim.Kind, ans.reset)
	s.log.Info("offline model: account limit", "seq", r.Seq, "class", string(r.Class), "account", string(r.Account),
		"limit", string(lim.Kind), "status", ans.status, "reset", ans.reset)
	for k, v := range ans.header {
		w.Header()[k] = v
	}
	writeAPIError(w, ans.status, ans.body, ans.retryIn)
}

package fakeanthropic

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// serveHTTP routes one request. Every request is recorded first.
func (s *Server) serveHTTP(w http.ResponseWriter, hr *http.Request) {
	reqID := newID("req_")
	w.Header().Set("Request-Id", reqID)

	body, err := io.ReadAll(http.MaxBytesReader(w, hr.Body, s.cfg.MaxBodyBytes))
	r := &Request{
		Method: hr.Method,
		Path:   hr.URL.Path,
		Class:  ClassOther,
		Header: safeHeader(hr.Header),
		Body:   body,
	}
	if err != nil {
		s.record(r)
		status := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status = http.StatusRequestEntityTooLarge
		}
		writeAPIError(w, status, newAPIError(status, "", "reading request body: "+err.Error(), reqID), 0)
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
		s.log.Info("fake anthropic: unknown route", "seq", r.Seq, "method", r.Method, "path", r.Path)
		writeAPIError(w, http.StatusNotFound, newAPIError(http.StatusNotFound, "", "Not found: "+r.Method+" "+r.Path, reqID), 0)
	}
}

// serveCountTokens answers a token estimate from the request's size.
func (s *Server) serveCountTokens(w http.ResponseWriter, r *Request, reqID string) {
	if err := r.parseBody(r.Body); err != nil {
		s.record(r)
		writeAPIError(w, http.StatusBadRequest, newAPIError(http.StatusBadRequest, "", "request body is not a JSON object", reqID), 0)
		return
	}
	r.Class = ClassCountTokens
	s.record(r)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int{"input_tokens": estimateTokens(len(r.Body))})
}

// serveMessages classifies, records and answers a /v1/messages request.
func (s *Server) serveMessages(w http.ResponseWriter, hr *http.Request, r *Request, reqID string) {
	if err := r.parseBody(r.Body); err != nil {
		s.record(r)
		writeAPIError(w, http.StatusBadRequest, newAPIError(http.StatusBadRequest, "", "request body is not a JSON object", reqID), 0)
		return
	}
	r.Class = classifyMessages(r)
	s.record(r)

	resp, source := s.choose(r)
	log := s.log.With("seq", r.Seq, "class", string(r.Class), "model", r.Model, "stream", r.Stream,
		"messages", len(r.Messages), "answer", string(source))
	pace := pacer{ctx: hr.Context(), closing: s.closing}

	if resp.Status != 0 {
		log.Info("fake anthropic: injected HTTP error", "status", resp.Status, "error_type", resp.ErrorType)
		if err := pace.sleep(resp.Delay); err != nil {
			return
		}
		body := newAPIError(resp.Status, resp.ErrorType, resp.ErrorMessage, reqID)
		writeAPIError(w, resp.Status, body, resp.RetryAfter)
		return
	}

	blocks, err := serveBlocks(resp.Blocks)
	if err != nil {
		log.Error("fake anthropic: bad scripted response", "err", err)
		writeAPIError(w, http.StatusInternalServerError, newAPIError(http.StatusInternalServerError, "", "fake anthropic: "+err.Error(), reqID), 0)
		return
	}
	usage := estimateUsage(len(r.Body), blocks)
	if resp.Usage != nil {
		usage = *resp.Usage
	}
	model := r.Model
	if model == "" {
		model = "claude-fake"
	}
	msgID := newID("msg_")

	if !r.Stream {
		log.Info("fake anthropic: answering", "blocks", len(blocks))
		s.answerJSON(w, pace, resp, msgID, model, blocks, usage, reqID)
		return
	}
	log.Info("fake anthropic: streaming", "blocks", len(blocks))
	sw := &sseWriter{w: w, rc: http.NewResponseController(w), pace: pace, delay: resp.Delay}
	err = streamMessage(sw, streamAnswer{id: msgID, model: model, blocks: blocks, resp: resp, usage: usage})
	if err != nil {
		log.Info("fake anthropic: stream ended early", "err", err)
	}
	if s.cfg.answered != nil {
		s.cfg.answered(r.Seq, err)
	}
}

// answerJSON answers a non-streaming request with one message, or with the
// HTTP equivalent of a scripted stream error.
func (s *Server) answerJSON(w http.ResponseWriter, pace pacer, resp Response, msgID, model string,
	blocks []servedBlock, usage Usage, reqID string) {
	if err := pace.sleep(resp.Delay); err != nil {
		return
	}
	if resp.Hold != nil {
		if err := pace.hold(resp.Hold, nil); err != nil {
			return
		}
	}
	if resp.StreamError {
		errType := streamErrorType(resp)
		status := statusFor(errType)
		writeAPIError(w, status, newAPIError(status, errType, resp.ErrorMessage, reqID), 0)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(messageJSON(msgID, model, blocks, resp.stopReason(), usage))
}

package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskerr"
)

// Error codes of the API: stable, for clients to branch on. The message beside a code is for a
// person and may change. The codes of what the tasks answer (not_found, not_pending,
// already_decided, invalid_input, task_closed, queue_full, budget_exhausted, account_limited,
// unavailable, internal) are taskerr's; these are the API's own, about the request itself.
const (
	CodeInvalidJSON          = "invalid_json"
	CodeUnknownField         = "unknown_field"
	CodeBodyTooLarge         = "body_too_large"
	CodeUnsupportedMedia     = "unsupported_media_type"
	CodeInvalidID            = "invalid_id"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeUnauthorized         = "unauthorized"
	CodeForbiddenHost        = "forbidden_host"
	CodeForbiddenOrigin      = "forbidden_origin"
	CodeIdempotencyKeyReused = "idempotency_key_reused"

	// Codes the API shares with taskerr.
	CodeInvalidInput = taskerr.CodeInvalidInput
	CodeNotFound     = taskerr.CodeNotFound
	CodeNotPending   = taskerr.CodeNotPending
	CodeInternal     = taskerr.CodeInternal
)

func errorf(status int, code, msg string) *taskerr.Error {
	return &taskerr.Error{Status: status, Code: code, Message: msg}
}

// writeError sends e as the answer, and logs its cause when it is the server's fault.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, e *taskerr.Error) {
	if e.Status >= 500 {
		s.cfg.Logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path,
			"code", e.Code, "error", e.Err)
	}
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="drover"`)
	}
	writeJSON(w, e.Status, struct {
		Error *taskerr.Error `json:"error"`
	}{e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"the answer could not be encoded"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// invalidInput is the answer for input the task package refuses: each *task.InvalidError a
// problem of its own.
func invalidInput(err error) *taskerr.Error {
	var ps []taskerr.Problem
	for _, e := range flatten(err) {
		var ie *task.InvalidError
		if errors.As(e, &ie) {
			ps = append(ps, taskerr.Problem{Field: ie.Field, Reason: ie.Reason})
		}
	}
	msg := "the request cannot run as given: " + err.Error()
	if len(ps) == 1 {
		msg = ps[0].Field + ": " + ps[0].Reason
	}
	return &taskerr.Error{Status: http.StatusBadRequest, Code: CodeInvalidInput, Message: msg, Problems: ps}
}

// flatten lists the errors that err joins, at any depth.
func flatten(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}

// fromError turns an error of the write or read side into an answer, as taskerr names it. A
// fault of the server is answered without its details, which go to the log.
func fromError(err error) *taskerr.Error {
	var e *taskerr.Error
	if errors.As(err, &e) {
		return e
	}
	var ie *task.InvalidError
	if errors.As(err, &ie) {
		return invalidInput(err)
	}
	d := taskerr.Describe(err)
	msg := d.Message
	if d.Code == taskerr.CodeInternal {
		msg = "the server failed; its log says why"
	}
	return &taskerr.Error{Status: d.Status, Code: d.Code, Message: msg, Err: err}
}

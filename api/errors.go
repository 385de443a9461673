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

// Error is the body of every error answer: {"error": Error}.
type Error struct {
	// Code is stable; clients branch on it.
	Code string `json:"code"`
	// Message says, for a person, what went wrong and what to do.
	Message string `json:"message"`
	// Problems lists each field that is wrong, for invalid_input.
	Problems []Problem `json:"problems,omitempty"`

	status int
	cause  error // logged, never sent
}

// Problem is one wrong field of a request.
type Problem struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, msg string) *Error {
	return &Error{status: status, Code: code, Message: msg}
}

// writeError sends e as the answer, and logs its cause when it is the server's fault.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, e *Error) {
	if e.status >= 500 {
		s.cfg.Logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path,
			"code", e.Code, "error", e.cause)
	}
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="drover"`)
	}
	writeJSON(w, e.status, struct {
		Error *Error `json:"error"`
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
func invalidInput(err error) *Error {
	var ps []Problem
	for _, e := range flatten(err) {
		var ie *task.InvalidError
		if errors.As(e, &ie) {
			ps = append(ps, Problem{Field: ie.Field, Reason: ie.Reason})
		}
	}
	msg := "the request cannot run as given: " + err.Error()
	if len(ps) == 1 {
		msg = ps[0].Field + ": " + ps[0].Reason
	}
	return &Error{status: http.StatusBadRequest, Code: CodeInvalidInput, Message: msg, Problems: ps}
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
func fromError(err error) *Error {
	var e *Error
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
	return &Error{status: d.Status, Code: d.Code, Message: msg, cause: err}
}

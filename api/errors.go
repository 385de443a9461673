package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// Error codes of the API: stable, for clients to branch on. The message beside a code is for a
// person and may change.
const (
	CodeInvalidJSON          = "invalid_json"
	CodeUnknownField         = "unknown_field"
	CodeBodyTooLarge         = "body_too_large"
	CodeUnsupportedMedia     = "unsupported_media_type"
	CodeInvalidInput         = "invalid_input"
	CodeInvalidID            = "invalid_id"
	CodeTaskNotFound         = "task_not_found"
	CodeNotFound             = "not_found"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeUnauthorized         = "unauthorized"
	CodeForbiddenHost        = "forbidden_host"
	CodeForbiddenOrigin      = "forbidden_origin"
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	CodeNotPending           = "not_pending"
	CodeInvalidDecision      = "invalid_decision"
	CodeTaskClosed           = "task_closed"
	CodeQueueFull            = "queue_full"
	CodeBudgetExhausted      = "budget_exhausted"
	CodeInterruptFailed      = "interrupt_failed"
	CodeUnavailable          = "unavailable"
	CodeTimeout              = "timeout"
	CodeInternal             = "internal"
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
	return &Error{status: http.StatusUnprocessableEntity, Code: CodeInvalidInput, Message: msg, Problems: ps}
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

// appErrorCodes maps the types of the workflow's refusals to the API's answers.
var appErrorCodes = map[string]struct {
	status int
	code   string
}{
	"NotPending":                {http.StatusConflict, CodeNotPending},
	"InvalidDecision":           {http.StatusUnprocessableEntity, CodeInvalidDecision},
	"TaskClosed":                {http.StatusConflict, CodeTaskClosed},
	"QueueFull":                 {http.StatusTooManyRequests, CodeQueueFull},
	"InvalidPrompt":             {http.StatusUnprocessableEntity, CodeInvalidInput},
	"InvalidParams":             {http.StatusUnprocessableEntity, CodeInvalidInput},
	"InterruptFailed":           {http.StatusServiceUnavailable, CodeInterruptFailed},
	"InvalidBudget":             {http.StatusUnprocessableEntity, CodeInvalidInput},
	task.ErrTypeBudgetExhausted: {http.StatusConflict, CodeBudgetExhausted},
}

// fromError turns an error of the write or read side into an answer.
func fromError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var ie *task.InvalidError
	if errors.As(err, &ie) {
		return invalidInput(err)
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) || errors.Is(err, errTaskNotFound) || errors.Is(err, store.ErrNotFound) {
		return &Error{status: http.StatusNotFound, Code: CodeTaskNotFound,
			Message: "no such task; list the tasks with GET /api/v1/tasks", cause: err}
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		if c, ok := appErrorCodes[app.Type()]; ok {
			return &Error{status: c.status, Code: c.code, Message: app.Message(), cause: err}
		}
	}
	var unavailable *serviceerror.Unavailable
	if errors.As(err, &unavailable) {
		return &Error{status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: "Temporal cannot be reached; try again shortly", cause: err}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{status: http.StatusGatewayTimeout, Code: CodeTimeout,
			Message: "the task did not answer in time; try again, or check that a worker runs", cause: err}
	}
	return &Error{status: http.StatusInternalServerError, Code: CodeInternal,
		Message: "the server failed; its log says why", cause: err}
}

// errTaskNotFound says the task asked for does not exist.
var errTaskNotFound = errors.New("task not found")

package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/task"
)

// Error is why an attempt failed. Every error RunTurn returns is an *Error; its Type is one of
// the task.ErrType* values, which decides whether another attempt can help (Retryable).
type Error struct {
	// Type is one of the task.ErrType* values.
	Type string
	// Err says what happened.
	Err error
	// RetryAfter, when positive, is how long the next attempt should wait: the delay the
	// Messages API asked for (ModelAPI).
	RetryAfter time.Duration
	// Wait, for an error of a type that makes the turn wait for its account (task.Waits), says
	// what for and until when.
	Wait *task.Wait
	// Details, when set, travel with the error across the Temporal edge (the application
	// error's details).
	Details []any
}

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether another attempt of the turn can help.
func (e *Error) Retryable() bool { return task.Retryable(e.Type) }

// failure makes an *Error of type t from a message.
func failure(t, format string, args ...any) *Error {
	return &Error{Type: t, Err: fmt.Errorf(format, args...)}
}

// AsError returns err's *Error, or an *Error of type fallback wrapping err.
func AsError(err error, fallback string) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Type: fallback, Err: err}
}

// exitFailure describes how the CLI ended before its turn did.
func exitFailure(err error) *Error {
	var rr *claudecode.ResumeRejectedError
	if errors.As(err, &rr) {
		return &Error{Type: task.ErrTypeResumeRejected, Err: fmt.Errorf("claude rejected the resume point: %w", err)}
	}
	var pe *claudecode.ProtocolError
	if errors.As(err, &pe) {
		return &Error{Type: task.ErrTypeClaudeProtocol, Err: fmt.Errorf("claude broke the protocol: %w", err)}
	}
	if err == nil {
		err = errors.New("it exited with status 0")
	}
	return &Error{Type: task.ErrTypeClaudeExited, Err: fmt.Errorf("claude exited before the turn ended: %w", err)}
}

// turnFailure describes a turn whose result reports an error that another attempt may cure.
func turnFailure(info *events.ErrorInfo, retryAfter time.Duration) *Error {
	switch info.Kind {
	case events.ErrorAPI:
		return &Error{Type: task.ErrTypeModelAPI, Err: errors.New(info.Message), RetryAfter: retryAfter}
	case events.ErrorResumeRejected:
		return &Error{Type: task.ErrTypeResumeRejected, Err: errors.New(info.Message)}
	}
	return &Error{Type: task.ErrTypeClaudeProtocol, Err: fmt.Errorf("claude failed the turn: %s", info.Message)}
}

// contextFailure describes an attempt whose context ended: a typed cause (the worker stopping)
// is kept; Temporal's cancellation is Cancelled; a deadline is AttemptTimedOut.
// errTaskCancelled is why an attempt of a cancelled task refuses to run.
var errTaskCancelled = errors.New("the task was cancelled: the turn does not run again")

func contextFailure(ctx context.Context) *Error {
	cause := context.Cause(ctx)
	var e *Error
	if errors.As(cause, &e) {
		return e
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(cause, context.DeadlineExceeded) {
		return &Error{Type: task.ErrTypeAttemptTimedOut, Err: fmt.Errorf("the attempt ran past its time limit: %w", cause)}
	}
	return &Error{Type: task.ErrTypeCancelled, Err: fmt.Errorf("the attempt was cancelled: %w", cause)}
}

// Package taskerr names drover's errors for the people and programs that meet them: each error
// maps to a stable snake_case code (what a program branches on), an HTTP status, and a message
// that says what to do next. The command line prints the message (and, with -o json, the
// code); the HTTP API answers {"error":{"code":…,"message":…}} with the status.
package taskerr

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/taskview"
	"github.com/drover-run/drover/workspace"
)

// The codes. They are part of the HTTP API and of the command line's JSON output: a code, once
// given, keeps its meaning.
const (
	// CodeNotFound: no such task, or no such request in the task.
	CodeNotFound = "not_found"
	// CodeNotPending: the request waits for no decision: it was decided, expired, or was
	// withdrawn.
	CodeNotPending = "not_pending"
	// CodeAlreadyDecided: a decision on the request is recorded already and waits for the task's
	// worker to apply it.
	CodeAlreadyDecided = "already_decided"
	// CodeNoPendingRequest: a decision named no request, and none waits in the task.
	CodeNoPendingRequest = "no_pending_request"
	// CodeAmbiguousRequest: a decision named no request, and several wait in the task.
	CodeAmbiguousRequest = "ambiguous_request"
	// CodeInvalidInput: the request, prompt, parameters or decision are not acceptable as given.
	CodeInvalidInput = "invalid_input"
	// CodeTaskClosed: the task is closing or has ended.
	CodeTaskClosed = "task_closed"
	// CodeQueueFull: too many prompts wait in the task already.
	CodeQueueFull = "queue_full"
	// CodeBudgetExhausted: the task has spent its budget.
	CodeBudgetExhausted = "budget_exhausted"
	// CodeAccountLimited: the task's account is at a usage, rate or spend limit, or busy.
	CodeAccountLimited = "account_limited"
	// CodeUnavailable: Temporal or Postgres did not answer in time, or no worker took the call.
	CodeUnavailable = "unavailable"
	// CodeNotManaged: the task has no managed workspace (it runs in a folder of its own, has
	// not begun, or its checkpoints were pruned), so it has no diff, fork, rewind or publish.
	CodeNotManaged = "not_managed"
	// CodeNoCheckpoint: the task has no checkpoint of that turn.
	CodeNoCheckpoint = "no_checkpoint"
	// CodeBranchNotOurs: a publish would replace commits of a branch that drover did not write.
	CodeBranchNotOurs = "branch_not_ours"
	// CodeCannotRewind: a rewind the task cannot take now (no managed workspace, a turn running
	// or queued, a turn it has not reached or set aside before).
	CodeCannotRewind = "cannot_rewind"
	// CodeUnreachable: a repository or remote could not be read or written.
	CodeUnreachable = "unreachable"
	// CodeInternal: drover failed; the message says where.
	CodeInternal = "internal"
)

// Error is an error as a person or program meets it, and the body of every error answer of the
// HTTP API ({"error": Error}).
type Error struct {
	// Code is stable; programs branch on it.
	Code string `json:"code"`
	// Message says, for a person, what went wrong and what to do.
	Message string `json:"message"`
	// Problems lists each field that is wrong, for invalid_input.
	Problems []Problem `json:"problems,omitempty"`
	// Status is the HTTP status that goes with Code.
	Status int `json:"-"`
	// Err is the error described: logged, never sent.
	Err error `json:"-"`
}

// Problem is one wrong field of a request.
type Problem struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// Describe names err. A nil err gives nil; an *Error is returned as it is.
func Describe(err error) *Error {
	if err == nil {
		return nil
	}
	var done *Error
	if errors.As(err, &done) {
		return done
	}
	code, status, msg := describe(err)
	return &Error{Code: code, Status: status, Message: msg, Err: err}
}

// Code is Describe(err).Code, or "" for nil.
func Code(err error) string {
	if d := Describe(err); d != nil {
		return d.Code
	}
	return ""
}

func describe(err error) (code string, status int, msg string) {
	var (
		notPending  *taskclient.NotPendingError
		badDecision *taskclient.InvalidDecisionError
		notFound    *taskview.NotFoundError
		onlyPending *taskview.OnlyPendingError
		invalid     *task.InvalidError
		appErr      *temporal.ApplicationError
		tNotFound   *serviceerror.NotFound
		tTimeout    *client.WorkflowUpdateServiceTimeoutOrCanceledError
		tUnavail    *serviceerror.Unavailable
		tDeadline   *serviceerror.DeadlineExceeded
	)
	switch {
	case errors.As(err, &notPending):
		if notPending.Recorded {
			return CodeAlreadyDecided, http.StatusConflict, notPending.Error()
		}
		return CodeNotPending, http.StatusConflict, notPending.Error()
	case errors.As(err, &badDecision):
		return CodeInvalidInput, http.StatusBadRequest, badDecision.Error()
	case errors.As(err, &notFound):
		if notFound.RequestID != "" {
			return CodeNotFound, http.StatusNotFound, notFound.Error() +
				fmt.Sprintf("; run drover task pending %s to see what waits", notFound.TaskID)
		}
		return CodeNotFound, http.StatusNotFound, notFound.Error() + "; run drover task list to see the tasks"
	case errors.As(err, &onlyPending):
		if len(onlyPending.Waiting) == 0 {
			return CodeNoPendingRequest, http.StatusConflict, onlyPending.Error() +
				"; run drover task pending to see every task's waiting requests"
		}
		return CodeAmbiguousRequest, http.StatusConflict, onlyPending.Error()
	case errors.As(err, &invalid):
		return CodeInvalidInput, http.StatusBadRequest, err.Error()
	case errors.As(err, &appErr):
		return describeType(appErr.Type(), appErr.Message())
	case errors.Is(err, store.ErrNotFound):
		return CodeNotFound, http.StatusNotFound, err.Error() + "; run drover task list to see the tasks"
	case errors.As(err, &tNotFound):
		return CodeNotFound, http.StatusNotFound, "the task was not found in Temporal (it never ran, or its history was deleted); run drover task list to see the tasks"
	case errors.As(err, &tTimeout), errors.As(err, &tDeadline), errors.Is(err, context.DeadlineExceeded):
		return CodeUnavailable, http.StatusServiceUnavailable, err.Error() +
			" (no answer in time: is a worker running? drover worker starts one)"
	case errors.As(err, &tUnavail):
		return CodeUnavailable, http.StatusServiceUnavailable, err.Error() + " (is the Temporal server reachable?)"
	case errors.Is(err, workspace.ErrNotManaged):
		return CodeNotManaged, http.StatusConflict, err.Error() +
			" (a task started with --repo has one once its first turn begins; one started with --workspace has none)"
	case errors.Is(err, workspace.ErrNoCheckpoint):
		return CodeNoCheckpoint, http.StatusNotFound, err.Error() + "; run drover task diff TASK --stat to see the turns that have one"
	case errors.Is(err, workspace.ErrNotOurs):
		return CodeBranchNotOurs, http.StatusConflict, err.Error()
	case errors.Is(err, workspace.ErrUnreachable):
		return CodeUnreachable, http.StatusBadGateway, err.Error()
	case errors.Is(err, context.Canceled):
		return CodeUnavailable, http.StatusServiceUnavailable, "cancelled before it was done: " + err.Error()
	case store.ConnectionLost(err):
		return CodeUnavailable, http.StatusServiceUnavailable, err.Error() + " (the connection to Postgres was lost; try again)"
	}
	return CodeInternal, http.StatusInternalServerError, err.Error()
}

// describeType names an ApplicationError by its drover type.
func describeType(t, msg string) (string, int, string) {
	switch t {
	case task.ErrTypeNotPending:
		return CodeNotPending, http.StatusConflict, msg + "; run drover task pending to see what waits"
	case task.ErrTypeNoAttentionNeeded:
		return CodeNotPending, http.StatusConflict, msg
	case task.ErrTypeInvalidDecision, task.ErrTypeInvalidParams, task.ErrTypeInvalidPrompt,
		task.ErrTypeInvalidInput, task.ErrTypeInvalidBudget:
		return CodeInvalidInput, http.StatusBadRequest, msg
	case task.ErrTypeTaskClosed:
		return CodeTaskClosed, http.StatusConflict, msg + "; start a new task with drover task start"
	case task.ErrTypeQueueFull:
		return CodeQueueFull, http.StatusTooManyRequests, msg + "; wait for the queued prompts to run, then send again"
	case task.ErrTypeBudgetExhausted:
		return CodeBudgetExhausted, http.StatusConflict, msg + "; raise the task's budget to let it go on"
	case task.ErrTypeAccountLimited, task.ErrTypeSpendCapReached, task.ErrTypeAccountBusy:
		return CodeAccountLimited, http.StatusServiceUnavailable, msg
	case task.ErrTypeInterruptFailed, task.ErrTypeWorkerStopping, task.ErrTypeHostLost,
		task.ErrTypeWorkerLost, task.ErrTypeStoreUnavailable:
		return CodeUnavailable, http.StatusServiceUnavailable, msg + "; try again"
	case task.ErrTypeWorkspaceMissing, task.ErrTypeBaseMissing, task.ErrTypeFileTooLarge, task.ErrTypeWorkspacesUnmanaged:
		return CodeInvalidInput, http.StatusBadRequest, msg
	case task.ErrTypeRepoUnreachable, task.ErrTypeDiskFull:
		return CodeUnavailable, http.StatusServiceUnavailable, msg + "; try again"
	case task.ErrTypeCannotRewind:
		return CodeCannotRewind, http.StatusConflict, msg
	}
	return CodeInternal, http.StatusInternalServerError, msg
}

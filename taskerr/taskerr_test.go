package taskerr_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/taskerr"
	"github.com/drover-run/drover/taskview"
	"github.com/drover-run/drover/workspace"
)

// Each error a caller meets has a stable code, the HTTP status that goes with it, and a message
// that says what to do; wrapping does not hide it.
func TestDescribe(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return fmt.Errorf("deciding: %w", err) }
	for _, c := range []struct {
		err    error
		code   string
		status int
		says   []string
		not    []string
	}{
		{wrap(&taskclient.NotPendingError{TaskID: "T", RequestID: "x", Status: "pending", Recorded: true, By: "carol"}),
			taskerr.CodeAlreadyDecided, http.StatusConflict,
			[]string{`request "x" is not waiting for a decision in task T`, "by carol", "run drover task pending T"}, nil},
		{&taskclient.NotPendingError{TaskID: "T", RequestID: "x", Status: "expired"}, taskerr.CodeNotPending, http.StatusConflict,
			[]string{"expired", "drover task pending T"}, nil},
		{&taskclient.NotPendingError{TaskID: "T", RequestID: "x", Status: "allowed", By: "carol"}, taskerr.CodeNotPending, http.StatusConflict,
			[]string{"it was allowed by carol", "drover task pending T"}, nil},
		{&taskclient.InvalidDecisionError{TaskID: "T", RequestID: "x", Err: task.Decision{RequestID: "x"}.Check(task.PendingRequest{RequestID: "x"})}, taskerr.CodeInvalidInput,
			http.StatusBadRequest, []string{"a denial needs a reason"}, nil},
		{wrap(&taskview.NotFoundError{TaskID: "T"}), taskerr.CodeNotFound, http.StatusNotFound, []string{"drover task list"}, nil},
		{&taskview.NotFoundError{TaskID: "T", RequestID: "x"}, taskerr.CodeNotFound, http.StatusNotFound, []string{"drover task pending T"}, nil},
		{&taskview.OnlyPendingError{TaskID: "T"}, taskerr.CodeNoPendingRequest, http.StatusConflict, []string{"no request waiting"}, nil},
		{&taskview.OnlyPendingError{TaskID: "T", Waiting: make([]taskview.PendingRequest, 2)}, taskerr.CodeAmbiguousRequest,
			http.StatusConflict, []string{"2 requests waiting; name one"}, nil},
		{wrap(temporal.NewApplicationError(`request "x" is not pending in this task`, task.ErrTypeNotPending)),
			taskerr.CodeNotPending, http.StatusConflict, []string{"drover task pending"}, []string{"type: NotPending", "retryable"}},
		{temporal.NewApplicationError("the task is closing", task.ErrTypeTaskClosed), taskerr.CodeTaskClosed, http.StatusConflict, nil, []string{"type:"}},
		{temporal.NewApplicationError("queue full", task.ErrTypeQueueFull), taskerr.CodeQueueFull, http.StatusTooManyRequests, nil, nil},
		{temporal.NewApplicationError("spent", task.ErrTypeBudgetExhausted), taskerr.CodeBudgetExhausted, http.StatusConflict, []string{"budget"}, nil},
		{temporal.NewApplicationError("max_cost_usd is negative", task.ErrTypeInvalidBudget), taskerr.CodeInvalidInput, http.StatusBadRequest,
			[]string{"max_cost_usd is negative"}, nil},
		{wrap(&task.InvalidError{Field: "prompt", Reason: "is empty"}), taskerr.CodeInvalidInput, http.StatusBadRequest, []string{"prompt: is empty"}, nil},
		{serviceerror.NewNotFound("workflow not found"), taskerr.CodeNotFound, http.StatusNotFound, nil, nil},
		{wrap(context.DeadlineExceeded), taskerr.CodeUnavailable, http.StatusServiceUnavailable, []string{"is a worker running"}, nil},
		{fmt.Errorf("reading: %w", &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}), taskerr.CodeUnavailable,
			http.StatusServiceUnavailable, []string{"connection to Postgres was lost; try again"}, nil},
		{wrap(io.ErrUnexpectedEOF), taskerr.CodeUnavailable, http.StatusServiceUnavailable, []string{"try again"}, nil},
		{&pgconn.PgError{Code: "42P01", Message: "relation does not exist"}, taskerr.CodeInternal, http.StatusInternalServerError, nil, nil},
		{fmt.Errorf("diffing: %w", workspace.ErrNotManaged), taskerr.CodeNotManaged, http.StatusConflict, []string{"--repo"}, nil},
		{fmt.Errorf("diffing: %w", workspace.ErrNoCheckpoint), taskerr.CodeNoCheckpoint, http.StatusNotFound, []string{"drover task diff"}, nil},
		{fmt.Errorf("publishing: %w", workspace.ErrNotOurs), taskerr.CodeBranchNotOurs, http.StatusConflict, nil, nil},
		{&workspace.UnreachableError{URL: "u", Err: errors.New("x")}, taskerr.CodeUnreachable, http.StatusBadGateway, []string{"u"}, nil},
		{errors.New("boom"), taskerr.CodeInternal, http.StatusInternalServerError, []string{"boom"}, nil},
	} {
		d := taskerr.Describe(c.err)
		if d.Code != c.code || d.Status != c.status {
			t.Errorf("%v: %s %d, want %s %d", c.err, d.Code, d.Status, c.code, c.status)
		}
		for _, s := range c.says {
			if !strings.Contains(d.Message, s) {
				t.Errorf("%v: message %q does not say %q", c.err, d.Message, s)
			}
		}
		for _, s := range c.not {
			if strings.Contains(d.Message, s) {
				t.Errorf("%v: message %q says %q", c.err, d.Message, s)
			}
		}
		if !errors.Is(d, c.err) {
			t.Errorf("%v: the description does not wrap the error", c.err)
		}
		if taskerr.Describe(d) != d {
			t.Errorf("%v: describing a description changed it", c.err)
		}
	}
	if taskerr.Describe(nil) != nil || taskerr.Code(nil) != "" {
		t.Error("nil is described")
	}
}

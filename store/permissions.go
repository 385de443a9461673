package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-run/drover/task"
)

// DecisionsChannel is the Postgres notification channel on which every decision on a permission
// request is announced, with a DecisionNotice as payload (ids only).
const DecisionsChannel = "drover_decisions"

// DecisionNotice is the payload of a notification on DecisionsChannel.
type DecisionNotice struct {
	TaskID    string `json:"task_id"`
	RequestID string `json:"request_id"`
}

// PermissionRequest is a row of permission_requests.
type PermissionRequest struct {
	TaskID    string
	RequestID string // drover's id, stable across the CLI's re-asks of the same thing
	Turn      int
	Attempt   int // the attempt that asked last
	// CLIRequestID is the CLI's request_id of the last ask: the one an answer goes to.
	CLIRequestID string
	Kind         task.RequestKind
	ToolName     string
	ToolUseID    string
	Input        json.RawMessage
	// InputHash identifies the ask: the same tool with the same input hashes the same.
	InputHash   string
	Summary     string
	Suggestions json.RawMessage // the CLI's permission_suggestions, or nil
	BlockedPath string
	CLIReason   string
	// Reasked marks a request asked anew after a retry of its turn: an earlier attempt asked
	// something else.
	Reasked bool
	Status  task.Outcome
	// Decision is the answer the CLI gets, in the engine's form; nil while pending.
	Decision       json.RawMessage
	DecidedBy      string
	DecisionReason string
	DecidedAt      time.Time // zero while pending
	Deadline       time.Time
	CreatedAt      time.Time
	// Requested is a person's decision (a task.Decision as JSON) recorded while the request was
	// pending and not yet applied by the task's workflow; nil when none was recorded.
	Requested   json.RawMessage
	RequestedBy string
	RequestedAt time.Time // zero when no decision was recorded
}

const permissionColumns = `task_id, request_id, turn, attempt, cli_request_id, kind, tool_name, tool_use_id,
	input, input_hash, summary, suggestions, blocked_path, cli_reason, reasked, status, decision,
	decided_by, decision_reason, decided_at, deadline, created_at, requested_decision, requested_by, requested_at`

func scanPermission(row pgx.Row) (PermissionRequest, error) {
	return scanPermissionInto(row)
}

// scanPermissionInto scans the permissionColumns, and then into extra.
func scanPermissionInto(row pgx.Row, extra ...any) (PermissionRequest, error) {
	var r PermissionRequest
	var decidedAt, requestedAt *time.Time
	dest := []any{&r.TaskID, &r.RequestID, &r.Turn, &r.Attempt, &r.CLIRequestID, &r.Kind, &r.ToolName,
		&r.ToolUseID, &r.Input, &r.InputHash, &r.Summary, &r.Suggestions, &r.BlockedPath, &r.CLIReason,
		&r.Reasked, &r.Status, &r.Decision, &r.DecidedBy, &r.DecisionReason, &decidedAt, &r.Deadline, &r.CreatedAt,
		&r.Requested, &r.RequestedBy, &requestedAt}
	err := row.Scan(append(dest, extra...)...)
	if decidedAt != nil {
		r.DecidedAt = *decidedAt
	}
	if requestedAt != nil {
		r.RequestedAt = *requestedAt
	}
	return r, err
}

// Ask is what the engine knows when the CLI asks for permission.
type Ask struct {
	TaskID    string // required
	RequestID string // required: the id a new request gets
	Turn      int
	Attempt   int
	// AttemptID names the attempt (its activity run, activity and number): a request that
	// another attempt asked answers this one even under the same Attempt number.
	AttemptID    string
	CLIRequestID string // required
	Kind         task.RequestKind
	ToolName     string
	ToolUseID    string
	Input        json.RawMessage
	InputHash    string // required
	Summary      string
	Suggestions  json.RawMessage
	BlockedPath  string
	CLIReason    string
	Deadline     time.Time
}

// AskPermission records an ask of the CLI, in one transaction. When an earlier attempt of the
// same turn (a lower attempt number, or another AttemptID: the turn given to a host again
// starts its count anew) asked the same thing (same input hash) before it was lost, that
// request is returned
// instead, and now answers to this ask (CLI request id and attempt updated): still pending, it
// waits on; decided, the caller answers the CLI with its decision at once, and the person is not
// asked twice. A retry replays its turn, so its n-th ask of a thing finds the n-th request about
// it, oldest first; an ask beyond those — the agent asking again after an answer, in the same
// attempt — is a new question. A new request is inserted pending, marked Reasked when an
// attempt after the turn's first asks something no attempt of the turn asked before, and fresh
// is true.
func AskPermission(ctx context.Context, db TxDB, a Ask) (req PermissionRequest, fresh bool, err error) {
	if a.TaskID == "" || a.RequestID == "" || a.CLIRequestID == "" || a.InputHash == "" {
		return req, false, errors.New("recording a permission request: task, request and CLI request ids and the input hash are required")
	}
	if a.Input == nil {
		a.Input = json.RawMessage("{}")
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		// The oldest request of the same ask that only earlier attempts made answers to this one.
		req, err = scanPermission(tx.QueryRow(ctx, `
			UPDATE permission_requests p SET cli_request_id = $4, attempt = $5, attempt_id = nullif($6, ''), updated_at = now()
			WHERE (p.task_id, p.request_id) = (
				SELECT task_id, request_id FROM permission_requests
				WHERE task_id = $1 AND turn = $2 AND input_hash = $3 AND status <> 'cancelled'
					AND (attempt < $5 OR ($6 <> '' AND attempt_id IS DISTINCT FROM $6))
				ORDER BY created_at, request_id LIMIT 1)
			RETURNING `+permissionColumns,
			a.TaskID, a.Turn, a.InputHash, a.CLIRequestID, a.Attempt, a.AttemptID))
		if err == nil {
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		fresh = true
		req, err = scanPermission(tx.QueryRow(ctx, `
			INSERT INTO permission_requests (task_id, request_id, turn, attempt, cli_request_id, kind,
				tool_name, tool_use_id, input, input_hash, summary, suggestions, blocked_path, cli_reason,
				reasked, deadline, attempt_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
				$4 > 1 AND NOT EXISTS (SELECT 1 FROM permission_requests
					WHERE task_id = $1 AND turn = $3 AND input_hash = $10),
				$15, nullif($16, ''))
			RETURNING `+permissionColumns,
			a.TaskID, a.RequestID, a.Turn, a.Attempt, a.CLIRequestID, a.Kind, a.ToolName, a.ToolUseID,
			a.Input, a.InputHash, a.Summary, a.Suggestions, a.BlockedPath, a.CLIReason, a.Deadline, a.AttemptID))
		return err
	})
	if err != nil {
		return PermissionRequest{}, false, fmt.Errorf("recording a permission request of task %s: %w", a.TaskID, err)
	}
	return req, fresh, nil
}

// Decision is a final answer to a permission request.
type Decision struct {
	Status task.Outcome // allowed, denied, expired or cancelled
	// Answer is what the CLI gets (the engine's form); nil for cancelled.
	Answer    json.RawMessage
	DecidedBy string
	Reason    string
}

// ErrNotPending reports a decision on a request that is decided already, with another
// decision. (The same decision again is accepted: deliveries are retried.)
var ErrNotPending = errors.New("the permission request is not pending")

// DecidePermission records the decision on a pending request and announces it on
// DecisionsChannel. Recording the same decision again changes nothing and succeeds; another
// decision on a request that is no longer pending gets ErrNotPending; an unknown request
// ErrNotFound.
func DecidePermission(ctx context.Context, db DB, taskID, requestID string, d Decision) error {
	if !d.Status.Final() {
		return fmt.Errorf("deciding permission request %s of task %s: %q is not a decision", requestID, taskID, d.Status)
	}
	tag, err := db.Exec(ctx, `
		WITH decided AS (
			UPDATE permission_requests SET status = $3, decision = $4, decided_by = $5,
				decision_reason = $6, decided_at = now(), updated_at = now()
			WHERE task_id = $1 AND request_id = $2 AND status = 'pending'
			RETURNING task_id, request_id
		)
		SELECT pg_notify('`+DecisionsChannel+`', json_build_object('task_id', task_id, 'request_id', request_id)::text)
		FROM decided`,
		taskID, requestID, string(d.Status), d.Answer, d.DecidedBy, d.Reason)
	if err != nil {
		return fmt.Errorf("deciding permission request %s of task %s: %w", requestID, taskID, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	cur, err := GetPermission(ctx, db, taskID, requestID)
	if err != nil {
		return fmt.Errorf("deciding permission request: %w", err)
	}
	if cur.Status == d.Status && cur.DecidedBy == d.DecidedBy {
		return nil
	}
	return fmt.Errorf("deciding permission request %s of task %s (%s): %w", requestID, taskID, cur.Status, ErrNotPending)
}

// CancelPermissions closes the task's pending requests as cancelled — one (requestID) or all
// (requestID ""), for example because the CLI withdrew it or the task was cancelled — and
// announces each. It returns the requests it closed.
func CancelPermissions(ctx context.Context, db DB, taskID, requestID, reason string) ([]PermissionRequest, error) {
	return cancelPermissions(ctx, db, taskID, requestID, 0, reason)
}

// CancelTurnPermissions closes, as CancelPermissions does, the pending requests of one turn of
// the task: what it still had waiting when it ended.
func CancelTurnPermissions(ctx context.Context, db DB, taskID string, turn int, reason string) ([]PermissionRequest, error) {
	if turn < 1 {
		return nil, fmt.Errorf("cancelling permission requests of task %s: %d is not a turn", taskID, turn)
	}
	return cancelPermissions(ctx, db, taskID, "", turn, reason)
}

func cancelPermissions(ctx context.Context, db DB, taskID, requestID string, turn int, reason string) ([]PermissionRequest, error) {
	rows, err := db.Query(ctx, `
		WITH cancelled AS (
			UPDATE permission_requests SET status = 'cancelled', decided_by = 'drover', decision_reason = $3,
				decided_at = now(), updated_at = now()
			WHERE task_id = $1 AND ($2 = '' OR request_id = $2) AND ($4 = 0 OR turn = $4) AND status = 'pending'
			RETURNING `+permissionColumns+`
		)
		SELECT c.*, pg_notify('`+DecisionsChannel+`', json_build_object('task_id', c.task_id, 'request_id', c.request_id)::text)
		FROM cancelled c`, taskID, requestID, reason, turn)
	if err != nil {
		return nil, fmt.Errorf("cancelling permission requests of task %s: %w", taskID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (PermissionRequest, error) {
		return scanPermissionInto(row, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("cancelling permission requests of task %s: %w", taskID, err)
	}
	return out, nil
}

// ExtendPermissionDeadline moves a pending request's deadline. It reports whether the request
// was pending.
func ExtendPermissionDeadline(ctx context.Context, db DB, taskID, requestID string, deadline time.Time) (bool, error) {
	tag, err := db.Exec(ctx, `UPDATE permission_requests SET deadline = $3, updated_at = now()
		WHERE task_id = $1 AND request_id = $2 AND status = 'pending'`, taskID, requestID, deadline)
	if err != nil {
		return false, fmt.Errorf("extending permission request %s of task %s: %w", requestID, taskID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// GetPermission returns one request, or ErrNotFound.
func GetPermission(ctx context.Context, db DB, taskID, requestID string) (PermissionRequest, error) {
	r, err := scanPermission(db.QueryRow(ctx, `SELECT `+permissionColumns+` FROM permission_requests
		WHERE task_id = $1 AND request_id = $2`, taskID, requestID))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("permission request %s of task %s: %w", requestID, taskID, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("reading permission request %s of task %s: %w", requestID, taskID, err)
	}
	return r, nil
}

// ListPendingPermissions returns the requests waiting for a decision, across tasks (taskID "")
// or of one task, oldest first, at most limit (0: all). A request with a recorded decision
// that its task has not applied yet waits for no person and is left out.
func ListPendingPermissions(ctx context.Context, db DB, taskID string, limit int) ([]PermissionRequest, error) {
	return ListWaiting(ctx, db, WaitingFilter{TaskID: taskID, Limit: limit})
}

// WaitingFilter narrows ListWaiting: the inbox of requests that wait for a person.
type WaitingFilter struct {
	TaskID string // one task's; "": every task's
	Limit  int    // at most this many; 0: all
	// After, when set, starts after this request: the next page in the same order.
	After *WaitingCursor
}

// WaitingCursor is a request's place in the inbox's order: oldest first, ties by task and
// request id.
type WaitingCursor struct {
	CreatedAt time.Time
	TaskID    string
	RequestID string
}

// CursorOf is the request's place in the inbox.
func (r PermissionRequest) CursorOf() WaitingCursor {
	return WaitingCursor{CreatedAt: r.CreatedAt, TaskID: r.TaskID, RequestID: r.RequestID}
}

// ListWaitingQuery is the SQL and arguments ListWaiting runs for the filter (tests EXPLAIN it).
func ListWaitingQuery(f WaitingFilter) (string, []any) {
	var args []any
	arg := func(v any) int { args = append(args, v); return len(args) }
	q := `SELECT ` + permissionColumns + ` FROM permission_requests
		WHERE status = 'pending' AND requested_at IS NULL`
	if f.TaskID != "" {
		q += fmt.Sprintf(" AND task_id = $%d", arg(f.TaskID))
	}
	if f.After != nil {
		q += fmt.Sprintf(" AND (created_at, task_id, request_id) > ($%d, $%d, $%d)",
			arg(f.After.CreatedAt), arg(f.After.TaskID), arg(f.After.RequestID))
	}
	q += " ORDER BY created_at, task_id, request_id"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT $%d", arg(f.Limit))
	}
	return q, args
}

// ListWaiting returns the requests the filter keeps that wait for a person, oldest first.
func ListWaiting(ctx context.Context, db DB, f WaitingFilter) ([]PermissionRequest, error) {
	q, args := ListWaitingQuery(f)
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing pending permission requests: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (PermissionRequest, error) { return scanPermission(row) })
	if err != nil {
		return nil, fmt.Errorf("listing pending permission requests: %w", err)
	}
	return out, nil
}

// ListTaskPermissions returns all requests of a task, oldest first.
func ListTaskPermissions(ctx context.Context, db DB, taskID string) ([]PermissionRequest, error) {
	rows, err := db.Query(ctx, `SELECT `+permissionColumns+` FROM permission_requests
		WHERE task_id = $1 ORDER BY created_at, request_id`, taskID)
	if err != nil {
		return nil, fmt.Errorf("listing permission requests of task %s: %w", taskID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (PermissionRequest, error) { return scanPermission(row) })
	if err != nil {
		return nil, fmt.Errorf("listing permission requests of task %s: %w", taskID, err)
	}
	return out, nil
}

// ErrAlreadyDecided reports a decision on a request that has one recorded already, or is no
// longer pending. Nothing was changed.
var ErrAlreadyDecided = errors.New("the permission request is decided already")

// RecordDecision records a person's decision (decision: a task.Decision as JSON) on a pending
// request that has none, by compare-and-set, and returns the request as it now stands. A
// request that is not pending, or has a decision recorded, is returned as it stands with
// ErrAlreadyDecided; an unknown one gets ErrNotFound. The task's workflow applies the
// recorded decision when its worker runs.
func RecordDecision(ctx context.Context, db DB, taskID, requestID string, decision json.RawMessage, by string) (PermissionRequest, error) {
	r, err := scanPermission(db.QueryRow(ctx, `
		UPDATE permission_requests SET requested_decision = $3, requested_by = $4, requested_at = now(),
			updated_at = now()
		WHERE task_id = $1 AND request_id = $2 AND status = 'pending' AND requested_at IS NULL
		RETURNING `+permissionColumns, taskID, requestID, decision, by))
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("recording a decision on request %s of task %s: %w", requestID, taskID, err)
	}
	cur, err := GetPermission(ctx, db, taskID, requestID)
	if err != nil {
		return cur, fmt.Errorf("recording a decision: %w", err)
	}
	return cur, fmt.Errorf("recording a decision on request %s of task %s (%s): %w", requestID, taskID, cur.Status, ErrAlreadyDecided)
}

// WithdrawDecision removes the decision recorded at the time at on a request still pending: the
// task could not be told of it. A request decided since, or with another decision, is left
// alone.
func WithdrawDecision(ctx context.Context, db DB, taskID, requestID string, at time.Time) error {
	_, err := db.Exec(ctx, `UPDATE permission_requests SET requested_decision = NULL, requested_by = '',
			requested_at = NULL, updated_at = now()
		WHERE task_id = $1 AND request_id = $2 AND status = 'pending' AND requested_at = $3`, taskID, requestID, at)
	if err != nil {
		return fmt.Errorf("withdrawing the decision on request %s of task %s: %w", requestID, taskID, err)
	}
	return nil
}

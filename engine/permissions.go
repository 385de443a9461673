package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/streamjson"
	"github.com/drover-run/drover/task"
)

// Hook callback ids drover registers at initialize (supervised and plan modes).
const (
	hookToolApproval = "tool_approval"
	hookStopCheck    = "stop_check"
)

// turnApprovals answers the permission requests of one attempt: it records each durably, tells
// the workflow, waits for the decision that comes back through Postgres, and answers the CLI.
type turnApprovals struct {
	e       *Engine
	ex      *executor
	req     Request
	log     *slog.Logger
	timeout time.Duration

	mu sync.Mutex
	// sink is the attempt's log: what the approvals emit goes there even while the attempt's
	// process is being stopped (a request withdrawn then), when the process has no sink. An
	// attempt that takes the turn over moves it, and req's attempt, to its own (retarget).
	sink streamjson.Sink
	// flush stores what the attempt's log holds; nil stores nothing.
	flush  func(context.Context) error
	grants []task.Grant
	// mode is the task's mode as this turn knows it; an approved plan moves it on.
	mode task.PermissionMode
}

func newTurnApprovals(e *Engine, ex *executor, req Request, sink streamjson.Sink, log *slog.Logger) *turnApprovals {
	timeout := req.ApprovalTimeout
	if timeout <= 0 {
		timeout = task.DefaultApprovalTimeout
	}
	mode := req.Profile.PermissionMode
	if mode == "" {
		mode = task.Autonomous
	}
	return &turnApprovals{e: e, ex: ex, req: req, sink: sink, log: log, timeout: timeout,
		grants: append([]task.Grant(nil), req.Grants...), mode: mode}
}

// HandleControl answers the CLI's control requests during the attempt's turn, as its mode says
// (docs/cli-behaviour.md, Permissions):
//
//   - PreToolUse hook (registered for every tool that is not read-only): supervised asks
//     (can_use_tool follows), unless a permission granted for the task covers the call; plan
//     and autonomous have no opinion (the CLI's own plan mode, or bypass, decides);
//   - Stop hook: see stopCheck;
//   - can_use_tool: AskUserQuestion and ExitPlanMode go to a person in supervised and plan
//     modes; a plan-mode task's other calls are denied; a supervised task's calls go to a person;
//     in autonomous mode a plan is approved and a question is answered by the agent itself.
func (t *turnApprovals) HandleControl(ctx context.Context, cr *claudecode.ControlRequest) (any, error) {
	if answer, ok := t.ex.budgetDenial(ctx, cr); ok {
		return answer, nil
	}
	mode := t.currentMode()
	switch {
	case cr.HookCallback != nil:
		in := cr.HookCallback.Input
		switch in.HookEventName {
		case claudecode.HookPreToolUse:
			if mode != task.Supervised {
				return claudecode.HookOutput{}, nil
			}
			if t.granted(in.ToolName, in.ToolInput) {
				return claudecode.PreToolUseDecision(claudecode.DecisionAllow, "allowed for the rest of the task"), nil
			}
			return claudecode.PreToolUseDecision(claudecode.DecisionAsk, "this task is supervised: a person decides"), nil
		case claudecode.HookStop:
			return t.stopCheck(ctx, in), nil
		}
		return claudecode.HookOutput{}, nil
	case cr.CanUseTool != nil:
		r := cr.CanUseTool
		switch {
		case mode == task.Autonomous && r.ToolName == claudecode.ToolExitPlanMode:
			return claudecode.AllowTool(r.Input, r.ToolUseID), nil
		case mode == task.Autonomous && r.ToolName == claudecode.ToolAskUserQuestion:
			return claudecode.DenyTool("This task runs unattended (autonomous): nobody will answer questions. Choose yourself, say what you chose, and go on.", false), nil
		case mode == task.Autonomous:
			return claudecode.AllowTool(r.Input, r.ToolUseID), nil
		case mode == task.Plan && r.ToolName != claudecode.ToolExitPlanMode && r.ToolName != claudecode.ToolAskUserQuestion:
			return claudecode.DenyTool("This task is in plan mode: change nothing yet. Present your plan with ExitPlanMode; a person approves it.", false), nil
		}
		return t.askPerson(ctx, cr)
	}
	return nil, fmt.Errorf("unsupported control request %q", cr.Subtype)
}

// granted reports whether a permission granted for the task covers a call.
func (t *turnApprovals) granted(tool string, input json.RawMessage) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, g := range t.grants {
		var u claudecode.PermissionUpdate
		if json.Unmarshal(g.Suggestion.Raw, &u) == nil && u.Allows(tool, input) {
			return true
		}
	}
	return false
}

// askPerson handles a can_use_tool request that a person must answer: recorded once (a re-ask
// of the same thing after a retry finds the earlier record), announced, waited for.
func (t *turnApprovals) askPerson(ctx context.Context, cr *claudecode.ControlRequest) (any, error) {
	r := cr.CanUseTool
	kind := task.KindTool
	switch r.ToolName {
	case claudecode.ToolAskUserQuestion:
		kind = task.KindQuestion
	case claudecode.ToolExitPlanMode:
		kind = task.KindPlan
	}
	pending := task.PendingRequest{
		RequestID: uuid.NewString(), Turn: t.req.Turn, Kind: kind, Tool: r.ToolName,
		Summary: streamjson.PermissionSummary(r), Suggestions: suggestions(r),
		Questions: questions(kind, r.Input),
		Since:     time.Now().UTC(),
	}
	pending.Deadline = pending.Since.Add(t.timeout)
	attempt, attemptID := t.attempt()
	// The record is made whole even if the CLI withdraws the request meanwhile (that cancels
	// ctx): a write cut off half way might land unseen, and the request would then wait, open,
	// until the turn ends. Withdrawn, it is closed below like any other.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	row, fresh, err := store.AskPermission(rctx, t.e.cfg.DB, store.Ask{
		TaskID: t.req.TaskID, RequestID: pending.RequestID, Turn: t.req.Turn, Attempt: attempt, AttemptID: attemptID,
		CLIRequestID: cr.RequestID, Kind: kind, ToolName: r.ToolName, ToolUseID: r.ToolUseID,
		Input: r.Input, InputHash: askHash(r.ToolName, r.Input), Summary: pending.Summary,
		Suggestions: suggestionsJSON(pending.Suggestions), BlockedPath: r.BlockedPath, CLIReason: r.DecisionReason,
		Deadline: pending.Deadline,
	})
	if err != nil {
		// Without a record nobody can answer: deny, so that the turn goes on and says so.
		t.log.Warn("recording a permission request", "tool", r.ToolName, "error", err)
		return claudecode.DenyTool("drover could not record this permission request; it is denied", false), nil
	}
	pending.RequestID, pending.Reasked = row.RequestID, row.Reasked
	pending.Since, pending.Deadline = row.CreatedAt.UTC(), row.Deadline.UTC()
	if row.Status.Final() {
		t.log.Info("a re-ask found its earlier decision", "request_id", row.RequestID, "status", row.Status)
		return t.answer(ctx, cr, row)
	}
	if fresh {
		t.emit(t.requestEvent(cr, pending))
		// Stored before the task hears of the request: whoever sees it waiting finds its event
		// in the log.
		t.flushLog(rctx)
	}
	t.notifyAsked(ctx, pending)
	waited := t.e.meterApproval(ctx, kind)
	decided, err := t.e.decisions.await(ctx, t.e.cfg.DB, t.req.TaskID, row.RequestID)
	waited(decided, err)
	if err == nil && ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	if err != nil {
		if errors.Is(err, claudecode.ErrRequestCancelled) {
			t.withdrawn(row.RequestID, "the agent withdrew the request")
		}
		// The process is going away: the request stays pending for the retry that asks again.
		return nil, err
	}
	return t.answer(ctx, cr, decided)
}

// flushLog stores the attempt's log as it is now; a failure is logged, and the event is stored
// with the rest of the log.
func (t *turnApprovals) flushLog(ctx context.Context) {
	t.mu.Lock()
	flush := t.flush
	t.mu.Unlock()
	if flush == nil {
		return
	}
	if err := flush(ctx); err != nil {
		t.log.Warn("storing a permission request's event before telling the task", "error", err)
	}
}

// withdrawn closes a request the CLI cancelled.
func (t *turnApprovals) withdrawn(requestID, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), t.e.cfg.StopTimeout)
	defer cancel()
	closed, err := store.CancelPermissions(ctx, t.e.cfg.DB, t.req.TaskID, requestID, reason)
	if err != nil {
		t.log.Warn("closing a withdrawn permission request", "request_id", requestID, "error", err)
	}
	if len(closed) == 0 {
		return
	}
	t.emit(events.AgentEvent{Type: events.TypePermissionCancelled, PendingID: requestID})
	if n := t.e.cfg.Notifier; n != nil {
		if err := n.Closed(ctx, t.req.TaskID, task.PermissionClosed{RequestID: requestID, Reason: reason}); err != nil {
			t.log.Warn("telling the task a request was withdrawn", "request_id", requestID, "error", err)
		}
	}
}

// recordTimeout bounds writing a permission request's record, which a withdrawal of the request
// does not cut short.
const recordTimeout = 10 * time.Second

func (t *turnApprovals) notifyAsked(ctx context.Context, p task.PendingRequest) {
	n := t.e.cfg.Notifier
	if n == nil {
		return
	}
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := n.Asked(nctx, t.req.TaskID, p); err != nil {
		t.log.Warn("telling the task a permission request waits", "request_id", p.RequestID, "error", err)
	}
}

// answer turns a decided request into the CLI's answer.
func (t *turnApprovals) answer(ctx context.Context, cr *claudecode.ControlRequest, row store.PermissionRequest) (any, error) {
	var rec task.DecisionRecord
	if len(row.Decision) > 0 {
		if err := json.Unmarshal(row.Decision, &rec); err != nil {
			return claudecode.DenyTool("drover could not read the decision on this request; it is denied", false), nil
		}
	}
	r := cr.CanUseTool
	t.emit(decisionEvent(r.ToolUseID, r.ToolName, row, rec))
	switch row.Status {
	case task.OutcomeAllowed:
		if rec.Grant != nil {
			t.addGrant(task.Grant{Tool: r.ToolName, Suggestion: *rec.Grant})
		}
		if rec.NextMode != "" {
			t.setMode(rec.NextMode)
		}
		return t.allow(r, rec)
	case task.OutcomeExpired:
		return claudecode.DenyTool(rec.Reason, true), nil
	case task.OutcomeCancelled:
		return claudecode.DenyTool("the request was withdrawn before anybody answered it", false), nil
	}
	msg := "denied"
	if rec.Reason != "" {
		msg = "denied by " + rec.By + ": " + rec.Reason
	}
	return claudecode.DenyTool(msg, false), nil
}

func (t *turnApprovals) addGrant(g task.Grant) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.grants = append(t.grants, g)
}

func (t *turnApprovals) setMode(m task.PermissionMode) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mode = m
}

func (t *turnApprovals) currentMode() task.PermissionMode {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mode
}

// decisionEvent is the permission_decision event of a decided request: what the agent is told,
// and by whom.
func decisionEvent(toolCallID, tool string, row store.PermissionRequest, rec task.DecisionRecord) events.AgentEvent {
	d := &events.Decision{Outcome: string(row.Status), By: rec.By, Reason: rec.Reason, At: rec.At,
		Answers: rec.Answers, NextMode: string(rec.NextMode)}
	if rec.Grant != nil {
		d.Grant = rec.Grant.Label
	}
	return events.AgentEvent{Type: events.TypePermissionDecision, PendingID: row.RequestID, ToolCallID: toolCallID, ToolName: tool, Decision: d}
}

// emit puts an event of the turn in the attempt's log.
func (t *turnApprovals) emit(ev events.AgentEvent) {
	t.mu.Lock()
	sink := t.sink
	t.mu.Unlock()
	sink.Emit(ev)
}

// retarget moves the turn's approvals, those waiting included, to another attempt's sink and
// log (flush), and records the requests it asks from now on as req's: that attempt took the
// turn over (see takeover.go).
func (t *turnApprovals) retarget(sink streamjson.Sink, flush func(context.Context) error, req Request) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sink, t.flush = sink, flush
	t.req.Attempt, t.req.AttemptID = req.Attempt, req.AttemptID
}

// attempt is the attempt whose requests the approvals ask now.
func (t *turnApprovals) attempt() (int, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.req.Attempt, t.req.AttemptID
}

// requestEvent is the permission_request event of a new request: what a person needs to
// decide, under drover's request id, with the choices drover offers and the deadline.
func (t *turnApprovals) requestEvent(cr *claudecode.ControlRequest, p task.PendingRequest) events.AgentEvent {
	ev := t.ex.adapter.PermissionEvent(cr)
	ev.PendingID = p.RequestID
	if ev.Permission == nil {
		ev.Permission = &events.Permission{}
	}
	ev.Permission.Summary = p.Summary // the inbox's, and the same function's as the adapter's
	ev.Permission.AllowAlways = suggestionsJSON(p.Suggestions)
	ev.Permission.Reasked = p.Reasked
	ev.Permission.Deadline = p.Deadline
	return ev
}

func compact(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}

// askHash identifies an ask: the tool and its input, whatever the key order.
func askHash(tool string, input json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(compact(input))
	return hex.EncodeToString(h.Sum(nil))
}

// suggestions are the "allow always" choices a person may accept with an approval: the CLI's
// own, kept in the session, or, when it offers none (it offers none for a call a hook asked
// about), drover's (claudecode.SuggestRules). Requests that need a person each time, or that the
// CLI marks as not to be allowed always, offer none.
func suggestions(r *claudecode.CanUseTool) []task.Suggestion {
	if r.RequiresUserInteraction || r.SuppressAlwaysAllowRule {
		return nil
	}
	updates := r.Suggestions()
	if len(updates) == 0 {
		updates = claudecode.SuggestRules(r.ToolName, r.Input)
	}
	out := make([]task.Suggestion, 0, len(updates))
	for i, u := range updates {
		raw, _ := json.Marshal(u.InSession())
		out = append(out, task.Suggestion{Key: strconv.Itoa(i + 1), Label: task.SuggestionLabel(raw), Raw: raw})
	}
	return out
}

func suggestionsJSON(sgs []task.Suggestion) json.RawMessage {
	if len(sgs) == 0 {
		return nil
	}
	raws := make([]json.RawMessage, len(sgs))
	for i, sg := range sgs {
		raws[i] = sg.Raw
	}
	b, _ := json.Marshal(raws)
	return b
}

// questions reads the questions of an AskUserQuestion request.
func questions(kind task.RequestKind, input json.RawMessage) []task.Question {
	if kind != task.KindQuestion {
		return nil
	}
	var out []task.Question
	for _, q := range claudecode.QuestionsOf(input) {
		tq := task.Question{Question: q.Question, Header: q.Header, MultiSelect: q.MultiSelect}
		for _, o := range q.Options {
			tq.Options = append(tq.Options, o.Label)
		}
		out = append(out, tq)
	}
	return out
}

// allow is the CLI's answer to an allowed request: its input as is, or with the person's answers
// (a question); the accepted suggestion, kept in the session, as an updated permission.
func (t *turnApprovals) allow(r *claudecode.CanUseTool, rec task.DecisionRecord) (any, error) {
	input := r.Input
	if r.ToolName == claudecode.ToolAskUserQuestion && len(rec.Answers) > 0 {
		answers := make([]claudecode.QuestionAnswer, 0, len(rec.Answers))
		for q, labels := range rec.Answers {
			answers = append(answers, claudecode.QuestionAnswer{Question: q, Labels: labels})
		}
		slices.SortFunc(answers, func(a, b claudecode.QuestionAnswer) int { return strings.Compare(a.Question, b.Question) })
		updated, err := claudecode.AnswerQuestions(r.Input, answers)
		if err != nil {
			return claudecode.DenyTool("drover could not apply the answers: "+err.Error(), false), nil
		}
		input = updated
	}
	res := claudecode.AllowTool(input, r.ToolUseID)
	if rec.Grant != nil {
		var u claudecode.PermissionUpdate
		if json.Unmarshal(rec.Grant.Raw, &u) == nil {
			res = res.WithUpdatedPermissions(u.InSession())
		}
	}
	return res, nil
}

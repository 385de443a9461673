package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// maxDecided bounds the decisions remembered to tell a late decision from an unknown one.
const maxDecided = 64

// maxGrants bounds the permissions a task remembers for its rest.
const maxGrants = 64

// setApprovalHandlers registers the signals by which a turn announces its permission requests
// and the Updates by which a person answers them.
func (s *taskState) setApprovalHandlers(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, task.UpdateDecide, s.decide,
		workflow.UpdateHandlerOptions{Validator: s.validateDecision, Description: "decide a pending permission request"}); err != nil {
		return fmt.Errorf("setting the %s update handler: %w", task.UpdateDecide, err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, task.UpdateExtendDeadline, s.extendDeadline,
		workflow.UpdateHandlerOptions{Validator: s.validateExtension, Description: "move a pending request's deadline"}); err != nil {
		return fmt.Errorf("setting the %s update handler: %w", task.UpdateExtendDeadline, err)
	}
	return nil
}

// watchRequests takes in, in the background, what turns report of their permission requests,
// and expires the requests nobody answers in time.
func (s *taskState) watchRequests(ctx workflow.Context) {
	asked := workflow.GetSignalChannel(ctx, task.SignalPermissionAsked)
	closed := workflow.GetSignalChannel(ctx, task.SignalPermissionClosed)
	later := workflow.GetSignalChannel(ctx, task.SignalDecide)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(asked, func(c workflow.ReceiveChannel, _ bool) {
				var r task.PendingRequest
				c.Receive(ctx, &r)
				s.requestAsked(ctx, r)
			})
			sel.AddReceive(closed, func(c workflow.ReceiveChannel, _ bool) {
				var r task.PermissionClosed
				c.Receive(ctx, &r)
				s.requestClosed(ctx, r.RequestID, task.OutcomeCancelled, r.Reason)
			})
			sel.AddReceive(later, func(c workflow.ReceiveChannel, _ bool) {
				var d task.Decision
				c.Receive(ctx, &d)
				s.decideLater(ctx, d)
			})
			sel.Select(ctx)
			if ctx.Err() != nil {
				return
			}
		}
	})
	workflow.Go(ctx, s.expireRequests)
}

// requestAsked records a request the CLI asked (or asked again after a retry).
func (s *taskState) requestAsked(ctx workflow.Context, r task.PendingRequest) {
	if r.RequestID == "" || s.final != "" {
		return
	}
	if _, decided := s.decision(r.RequestID); decided {
		return // a re-ask of a decided request: the host answers it from Postgres
	}
	if r.Turn != s.running {
		// Its turn has ended (the signal of a lost attempt, or one that crossed the turn's end):
		// nothing waits for an answer, and the turn's requests are closed already.
		workflow.GetLogger(ctx).Info("permission request of a turn that is not running ignored", "request_id", r.RequestID, "turn", r.Turn)
		return
	}
	if i := s.awaitingIndex(r.RequestID); i >= 0 {
		// Asked again after a retry: keep when it was first asked and its deadline.
		r.Since, r.Deadline = s.awaiting[i].Since, s.awaiting[i].Deadline
		s.awaiting[i] = r
	} else {
		if r.Deadline.IsZero() {
			r.Deadline = r.Since.Add(s.p.ApprovalTimeout)
		}
		s.awaiting = append(s.awaiting, r)
		workflow.GetLogger(ctx).Info("permission requested", "request_id", r.RequestID, "turn", r.Turn, "tool", r.Tool, "reasked", r.Reasked)
	}
	s.awaitingChanged++
	s.publish(ctx)
}

// requestClosed ends a request nobody decided: withdrawn, or its turn ended.
func (s *taskState) requestClosed(ctx workflow.Context, requestID string, outcome task.Outcome, reason string) {
	i := s.awaitingIndex(requestID)
	if i < 0 {
		return
	}
	r := s.awaiting[i]
	s.awaiting = slices.Delete(slices.Clone(s.awaiting), i, i+1)
	s.rememberDecision(task.DecisionRecord{TaskID: s.taskID, RequestID: r.RequestID, Turn: r.Turn, Kind: r.Kind,
		Outcome: outcome, By: "drover", Reason: reason, At: workflow.Now(ctx)})
	s.awaitingChanged++
	workflow.GetLogger(ctx).Info("permission request closed", "request_id", requestID, "outcome", outcome, "reason", reason)
	s.publish(ctx)
}

// closeTurnRequests closes what a turn that has ended still had waiting: nothing will ask for it.
func (s *taskState) closeTurnRequests(ctx workflow.Context, turn int, reason string) {
	for _, r := range slices.Clone(s.awaiting) {
		if turn == 0 || r.Turn == turn {
			s.requestClosed(ctx, r.RequestID, task.OutcomeCancelled, reason)
		}
	}
}

func (s *taskState) awaitingIndex(requestID string) int {
	return slices.IndexFunc(s.awaiting, func(r task.PendingRequest) bool { return r.RequestID == requestID })
}

func (s *taskState) decision(requestID string) (task.DecisionRecord, bool) {
	i := slices.IndexFunc(s.decided, func(d task.DecisionRecord) bool { return d.RequestID == requestID })
	if i < 0 {
		return task.DecisionRecord{}, false
	}
	return s.decided[i], true
}

func (s *taskState) rememberDecision(d task.DecisionRecord) {
	s.decided = append(s.decided, d)
	if n := len(s.decided) - maxDecided; n > 0 {
		s.decided = slices.Clone(s.decided[n:])
	}
}

// validateDecision is the validator of UpdateDecide, and the check of a decision that came by
// SignalDecide: the request must wait in this task, and the decision pass task.Decision.Check.
func (s *taskState) validateDecision(ctx workflow.Context, d task.Decision) error {
	i := s.awaitingIndex(d.RequestID)
	if i < 0 {
		if prev, ok := s.decision(d.RequestID); ok {
			return rejection(task.ErrTypeNotPending, fmt.Sprintf("request %s is not pending: it was %s by %s at %s",
				d.RequestID, prev.Outcome, prev.By, prev.At.UTC().Format(time.RFC3339)))
		}
		return rejection(task.ErrTypeNotPending, fmt.Sprintf("request %q is not pending in this task (see drover task pending)", d.RequestID))
	}
	if err := d.Check(s.awaiting[i]); err != nil {
		return rejection(task.ErrTypeInvalidDecision, err.Error())
	}
	return nil
}

// decide is the handler of UpdateDecide: it records the decision, remembers a grant, moves a
// plan task to its next mode, and hands the decision to the host that waits for it.
func (s *taskState) decide(ctx workflow.Context, d task.Decision) (task.DecisionRecord, error) {
	i := s.awaitingIndex(d.RequestID)
	r := s.awaiting[i]
	s.awaiting = slices.Delete(slices.Clone(s.awaiting), i, i+1)
	rec := task.DecisionRecord{TaskID: s.taskID, RequestID: r.RequestID, Turn: r.Turn, Kind: r.Kind,
		Outcome: task.OutcomeDenied, By: d.By, Reason: d.Reason, At: workflow.Now(ctx)}
	if rec.By == "" {
		rec.By = "unknown"
	}
	if d.Allow {
		rec.Outcome = task.OutcomeAllowed
		rec.Answers = d.Answers
		if d.Always != "" {
			k := slices.IndexFunc(r.Suggestions, func(sg task.Suggestion) bool { return sg.Key == d.Always })
			g := r.Suggestions[k]
			rec.Grant = &g
			s.grant(task.Grant{Tool: r.Tool, Suggestion: g})
		}
		if r.Kind == task.KindPlan {
			rec.NextMode = s.p.Profile.AfterPlan
			if rec.NextMode == "" {
				rec.NextMode = task.Autonomous
			}
			s.p.Profile.PermissionMode = rec.NextMode
		}
	}
	s.rememberDecision(rec)
	s.awaitingChanged++
	workflow.GetLogger(ctx).Info("permission decided", "request_id", rec.RequestID, "outcome", rec.Outcome, "by", rec.By)
	s.publish(ctx)
	return rec, s.deliver(ctx, rec)
}

// decideLater applies a decision that came by SignalDecide: checked as the Update's validator
// checks one, then recorded and delivered as the Update's handler does, beside the signals that
// keep coming meanwhile. One that no longer holds is dropped: nobody waits for its answer.
func (s *taskState) decideLater(ctx workflow.Context, d task.Decision) {
	s.delivering++ // from now on: the run must not continue as new before it is applied
	if s.lateDecisions == nil {
		s.lateDecisions = map[string]bool{}
	}
	s.lateDecisions[d.RequestID] = true
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() {
			s.delivering--
			delete(s.lateDecisions, d.RequestID)
			s.awaitingChanged++ // the deadline watcher looks at the request again
		}()
		log := workflow.GetLogger(ctx)
		s.awaitAsked(ctx, d.RequestID)
		if err := s.validateDecision(ctx, d); err != nil || s.final != "" {
			log.Info("a decision sent while no worker ran is not applied", "request_id", d.RequestID, "by", d.By, "error", err)
			return
		}
		if _, err := s.decide(ctx, d); err != nil {
			log.Warn("applying a decision sent while no worker ran", "request_id", d.RequestID, "error", err)
		}
	})
}

// awaitAsked waits, on runs from decideUnaskedVersion on, for a request that a decision names
// but this task has not heard of yet to be asked: a person reads requests from Postgres, where
// the engine records one before it tells the task, and a worker lost in between tells it only
// when its turn's retry asks again. It waits at most the approval timeout: by then the request
// would have expired.
func (s *taskState) awaitAsked(ctx workflow.Context, requestID string) {
	if _, decided := s.decision(requestID); decided || s.awaitingIndex(requestID) >= 0 || s.final != "" {
		return
	}
	if workflow.GetVersion(ctx, decideUnaskedVersion, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	timeout := s.p.ApprovalTimeout
	if timeout <= 0 {
		timeout = task.DefaultApprovalTimeout
	}
	_, _ = workflow.AwaitWithOptions(ctx, workflow.AwaitOptions{
		Timeout: timeout, TimerOptions: workflow.TimerOptions{Summary: "decision on a request not asked yet"},
	}, func() bool {
		_, decided := s.decision(requestID)
		return decided || s.awaitingIndex(requestID) >= 0 || s.final != ""
	})
}

// decideUnaskedVersion marks the runs whose decisions sent while no worker ran wait for a
// request the task has not heard of yet (awaitAsked).
const decideUnaskedVersion = "decide-unasked"

func (s *taskState) grant(g task.Grant) {
	if slices.ContainsFunc(s.grants, func(h task.Grant) bool {
		return h.Tool == g.Tool && string(h.Suggestion.Raw) == string(g.Suggestion.Raw)
	}) {
		return
	}
	s.grants = append(s.grants, g)
	if n := len(s.grants) - maxGrants; n > 0 {
		s.grants = slices.Clone(s.grants[n:])
	}
}

// deliver hands a decision to the host: any worker records it in Postgres, where the attempt
// that waits for it (or the retry that asks again) finds it. It is retried until it lands,
// however long no worker runs.
func (s *taskState) deliver(ctx workflow.Context, rec task.DecisionRecord) error {
	s.delivering++
	defer func() { s.delivering-- }()
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           workflow.GetInfo(ctx).TaskQueueName,
		StartToCloseTimeout: s.lim.interruptTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: s.lim.retryInitial,
			MaximumInterval: s.lim.retryMax,
		},
		Summary: "deliver decision " + rec.RequestID,
	})
	if err := workflow.ExecuteActivity(actx, task.ActivityDeliverDecision, rec).Get(ctx, nil); err != nil {
		return fmt.Errorf("delivering the decision on %s: %w", rec.RequestID, err)
	}
	return nil
}

// validateExtension is the validator of UpdateExtendDeadline.
func (s *taskState) validateExtension(ctx workflow.Context, e task.ExtendDeadline) error {
	i := s.awaitingIndex(e.RequestID)
	if i < 0 {
		return rejection(task.ErrTypeNotPending, fmt.Sprintf("request %q is not pending in this task", e.RequestID))
	}
	if !e.Deadline.After(workflow.Now(ctx)) {
		return rejection(task.ErrTypeInvalidDecision, "the new deadline has passed already")
	}
	return nil
}

// extendDeadline is the handler of UpdateExtendDeadline: the deadline timer moves at once, and
// the request's record in Postgres follows, so that the inbox shows the new deadline.
func (s *taskState) extendDeadline(ctx workflow.Context, e task.ExtendDeadline) (task.PendingRequest, error) {
	i := s.awaitingIndex(e.RequestID)
	s.awaiting[i].Deadline = e.Deadline
	s.awaitingChanged++
	r := s.awaiting[i]
	if workflow.GetVersion(ctx, "record-moved-deadline", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return r, nil
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           workflow.GetInfo(ctx).TaskQueueName,
		StartToCloseTimeout: s.lim.interruptTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: s.lim.retryInitial,
			MaximumInterval: s.lim.retryMax,
		},
		Summary: "record deadline " + r.RequestID,
	})
	moved := task.DeadlineMoved{TaskID: s.taskID, RequestID: r.RequestID, Deadline: e.Deadline}
	if err := workflow.ExecuteActivity(actx, task.ActivityRecordDeadline, moved).Get(ctx, nil); err != nil {
		return r, fmt.Errorf("recording the deadline of %s: %w", r.RequestID, err)
	}
	return r, nil
}

// expireRequests denies, with a reason the agent can read, every request nobody answered by its
// deadline, and interrupts its turn so that the agent does not ask again.
func (s *taskState) expireRequests(ctx workflow.Context) {
	later := workflow.GetSignalChannel(ctx, task.SignalDecide)
	for {
		seen := s.awaitingChanged
		next, ok := s.nextDeadline(s.spareLateDecisions(ctx))
		changed := func() bool { return s.awaitingChanged != seen }
		var err error
		if !ok {
			err = workflow.Await(ctx, changed)
		} else if wait := next.Sub(workflow.Now(ctx)); wait > 0 {
			_, err = workflow.AwaitWithOptions(ctx, workflow.AwaitOptions{
				Timeout: wait, TimerOptions: workflow.TimerOptions{Summary: "approval deadline"},
			}, changed)
		}
		if err != nil {
			return // cancelled: the task ends
		}
		now := workflow.Now(ctx)
		if later.Len() > 0 && s.deadlinePassed(now) && s.lateDecisionsFirst(ctx) {
			// A decision that came with the deadline (both heard at once, when a worker comes
			// back after a person decided) is taken first: once received, it is on its way.
			if err := workflow.Await(ctx, func() bool { return later.Len() == 0 }); err != nil {
				return
			}
		}
		spare := s.spareLateDecisions(ctx)
		for _, r := range slices.Clone(s.awaiting) {
			if r.Deadline.After(now) || s.awaitingIndex(r.RequestID) < 0 || spare && s.lateDecisions[r.RequestID] {
				continue
			}
			rec := task.DecisionRecord{TaskID: s.taskID, RequestID: r.RequestID, Turn: r.Turn, Kind: r.Kind,
				Outcome: task.OutcomeExpired, By: "drover", At: now,
				Reason: fmt.Sprintf("nobody answered this request within %s, so it was denied; do not ask for it again in this turn", now.Sub(r.Since).Round(time.Second))}
			s.awaiting = slices.Delete(slices.Clone(s.awaiting), s.awaitingIndex(r.RequestID), s.awaitingIndex(r.RequestID)+1)
			s.rememberDecision(rec)
			s.awaitingChanged++
			workflow.GetLogger(ctx).Warn("permission request expired", "request_id", r.RequestID, "turn", r.Turn)
			s.publish(ctx)
			if err := s.deliver(ctx, rec); err != nil {
				workflow.GetLogger(ctx).Warn("delivering an expiry", "request_id", r.RequestID, "error", err)
			}
		}
	}
}

// lateDecisionVersion marks the runs in which a decision sent while no worker ran beats the
// deadline of its request: the person answered in time, and the answer was only on its way.
const lateDecisionVersion = "late-decision-beats-deadline"

// lateDecisionsFirst reports whether this run lets a decision sent while no worker ran beat its
// request's deadline (see lateDecisionVersion).
func (s *taskState) lateDecisionsFirst(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, lateDecisionVersion, workflow.DefaultVersion, 1) != workflow.DefaultVersion
}

// spareLateDecisions reports whether the deadline watcher leaves alone the requests whose
// decision is on its way (lateDecisions).
func (s *taskState) spareLateDecisions(ctx workflow.Context) bool {
	return len(s.lateDecisions) > 0 && s.lateDecisionsFirst(ctx)
}

// deadlinePassed reports whether a waiting request's deadline has passed at now.
func (s *taskState) deadlinePassed(now time.Time) bool {
	return slices.ContainsFunc(s.awaiting, func(r task.PendingRequest) bool { return !r.Deadline.After(now) })
}

// nextDeadline is the earliest deadline of the waiting requests (but those whose decision is on
// its way, when spare is set).
func (s *taskState) nextDeadline(spare bool) (time.Time, bool) {
	var next time.Time
	for _, r := range s.awaiting {
		if spare && s.lateDecisions[r.RequestID] {
			continue
		}
		if next.IsZero() || r.Deadline.Before(next) {
			next = r.Deadline
		}
	}
	return next, !next.IsZero()
}

// awaitingSince is when the oldest waiting request was asked.
func (s *taskState) awaitingSince() (time.Time, bool) {
	var since time.Time
	for _, r := range s.awaiting {
		if since.IsZero() || r.Since.Before(since) {
			since = r.Since
		}
	}
	return since, !since.IsZero()
}

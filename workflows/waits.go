package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// The typed search attributes of the fleet's waits.
var (
	accountKey     = temporal.NewSearchAttributeKeyKeyword(task.SearchAccount)
	limitResetsKey = temporal.NewSearchAttributeKeyTime(task.SearchLimitResetsAt)
)

// publishedWait mirrors DroverAccount and DroverLimitResetsAt as last upserted.
type publishedWait struct {
	account  string
	resetsAt time.Time
}

// accountWaitOf reports whether a RunTurn error means the turn waits for its account (a
// limit, a spend cap, a full concurrency queue), with the wait and the attempt that ended.
func (s *taskState) accountWaitOf(ctx workflow.Context, err error) (task.Wait, int, bool) {
	var appErr *temporal.ApplicationError
	if err == nil || ctx.Err() != nil || !errors.As(err, &appErr) || !task.Waits(appErr.Type()) {
		return task.Wait{}, 0, false
	}
	if workflow.GetVersion(ctx, "account-waits", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return task.Wait{}, 0, false
	}
	var w task.Wait
	var r task.ReassignDetails
	if !appErr.HasDetails() || appErr.Details(&w, &r) != nil {
		return task.Wait{}, 0, false
	}
	return w, r.Attempt, true
}

// waitForAccount waits, with the task's status saying why (waiting_for_limit,
// waiting_for_spend_cap, queued_for_account), until w.RetryAt (a durable timer) or until the
// task is told its account is ready (SignalAccountReady), then no sooner than that signal's
// NotBefore. A wait with no RetryAt (a spend cap) ends only with the signal.
func (s *taskState) waitForAccount(ctx workflow.Context, turn int, w task.Wait) error {
	w.Turn = turn
	s.wait = &w
	defer func() { s.wait = nil }()
	s.publish(ctx)
	workflow.GetLogger(ctx).Info("turn waits for its account", "turn", turn, "account", w.Account, "reason", w.Reason,
		"resets_at", w.ResetsAt, "retry_at", w.RetryAt, "position", w.Position)

	tctx, cancelTimer := workflow.WithCancel(ctx)
	defer cancelTimer()
	sel := workflow.NewSelector(ctx)
	var ready *task.AccountReady
	sel.AddReceive(workflow.GetSignalChannel(ctx, task.SignalAccountReady), func(c workflow.ReceiveChannel, _ bool) {
		var r task.AccountReady
		c.Receive(ctx, &r)
		ready = &r
	})
	if !w.RetryAt.IsZero() {
		d := max(w.RetryAt.Sub(workflow.Now(ctx)), time.Millisecond)
		sel.AddFuture(workflow.NewTimerWithOptions(tctx, d, workflow.TimerOptions{Summary: "wait for the account"}), func(workflow.Future) {})
	}
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	sel.Select(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	if ready != nil {
		if d := ready.NotBefore.Sub(workflow.Now(ctx)); d > 0 {
			if err := workflow.Sleep(ctx, d); err != nil {
				return err
			}
		}
	}
	s.wait = nil
	s.publish(ctx) // running again
	return nil
}

// waitStatus is the status of a task whose turn waits as w says.
func waitStatus(w *task.Wait) task.Status {
	switch w.Reason {
	case task.WaitSpendCap:
		return task.StatusWaitingForSpendCap
	case task.WaitConcurrency:
		return task.StatusQueuedForAccount
	}
	return task.StatusWaitingForLimit
}

// waitAttributes adds to updates the changes of DroverAccount (once a wait named it) and
// DroverLimitResetsAt (set while the task waits for a limit's reset).
func (s *taskState) waitAttributes(updates []temporal.SearchAttributeUpdate) []temporal.SearchAttributeUpdate {
	p := &s.publishedWait
	var resets time.Time
	if w := s.wait; w != nil {
		if w.Account != "" && w.Account != p.account {
			updates = append(updates, accountKey.ValueSet(w.Account))
			p.account = w.Account
		}
		if w.Reason == task.WaitUsageLimit || w.Reason == task.WaitRateLimit {
			resets = w.ResetsAt
		}
	}
	switch {
	case !resets.IsZero() && !resets.Equal(p.resetsAt):
		updates = append(updates, limitResetsKey.ValueSet(resets))
		p.resetsAt = resets
	case resets.IsZero() && !p.resetsAt.IsZero():
		updates = append(updates, limitResetsKey.ValueUnset())
		p.resetsAt = time.Time{}
	}
	return updates
}

package engine

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// AccountNotifier tells a task that waits for its account that it may try again (the
// SignalAccountReady signal). A Config.Notifier that implements it is told when a limit lifts
// or a slot frees; without one, waiting tasks try again at their own time.
type AccountNotifier interface {
	AccountReady(ctx context.Context, taskID string, r task.AccountReady) error
}

// accountIDPrefix starts every account id.
const accountIDPrefix = "acct-"

// AccountID names the account of credential: a keyed hash (HMAC-SHA256 with the installation's
// key), never the credential itself.
func AccountID(key []byte, credential string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(credential))
	return accountIDPrefix + hex.EncodeToString(m.Sum(nil))[:24]
}

// credential is the credential the CLI runs with: the API key, or the token of the
// environment it inherits.
func (c Claude) credential() string {
	if c.APIKey != "" {
		return c.APIKey
	}
	for _, name := range []string{"CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY"} {
		for _, kv := range c.Env {
			if k, v, _ := strings.Cut(kv, "="); k == name && v != "" {
				return v
			}
		}
	}
	return ""
}

// accountState is the host's account, learned once.
type accountState struct {
	mu sync.Mutex
	id string
}

// Account returns the id of the host's account, made from its credential and the installation's
// key (kept in Postgres) on first use.
func (e *Engine) Account(ctx context.Context) (string, error) {
	e.acct.mu.Lock()
	defer e.acct.mu.Unlock()
	if e.acct.id != "" {
		return e.acct.id, nil
	}
	key, err := store.InstallationKey(ctx, e.cfg.DB)
	if err != nil {
		return "", err
	}
	e.acct.id = AccountID(key, e.cfg.Claude.credential())
	return e.acct.id, nil
}

// TasksWaiting counts the tasks waiting for their account, by reason (usage_limit, rate_limit,
// spend_cap, concurrency), over the whole fleet.
func (e *Engine) TasksWaiting(ctx context.Context) (map[string]int64, error) {
	return store.TasksWaiting(ctx, e.cfg.DB)
}

// accountTurn is what an attempt holds of its account.
type accountTurn struct {
	id string
	// slot: the attempt holds one of the account's slots; stopRenew ends its renewal.
	slot      bool
	stopRenew func()
}

// gate decides, before the attempt starts the CLI or writes its prompt, whether its account
// lets the turn call the API: not while a limit holds the account (the turn waits, without a
// request), and not beyond the account's concurrent turns (the turn queues). A turn let through
// ends the task's wait, if it waited.
func (a *attempt) gate(ctx context.Context) *Error {
	e, req := a.e, a.req
	id, err := e.Account(ctx)
	if err != nil {
		return &Error{Type: task.ErrTypeStoreUnavailable, Err: fmt.Errorf("naming the account: %w", err)}
	}
	a.acct.id = id
	g, err := store.CheckAccount(ctx, e.cfg.DB, id, req.TaskID, e.cfg.AccountLease)
	if err != nil {
		return &Error{Type: task.ErrTypeStoreUnavailable, Err: err}
	}
	if !g.Go {
		h := limitHit{reason: g.Reason, limitType: g.LimitType, resetsAt: g.ResetsAt}
		f := limitFailure(h)
		retry := time.Time{}
		switch {
		case !g.ProbeUntil.IsZero():
			// Another turn goes first after the reset; this one hears when it got through.
			retry = g.ProbeUntil
		case g.NextLook.After(g.ResetsAt):
			// The limit outlasted its reset: the account looks again then.
			retry = g.NextLook
		}
		a.recordWait(ctx, f, g.Now, retry)
		return f
	}
	if g.Probe {
		a.log.Info("the account's limit has reached its reset; this turn goes first", "account", id)
	}
	if n := e.cfg.AccountMaxConcurrentTurns; n > 0 {
		granted, pos, err := store.AcquireSlot(ctx, e.cfg.DB, store.SlotRequest{Account: id, TaskID: req.TaskID, HostID: e.cfg.HostID,
			Max: n, Lease: e.cfg.AccountLease, QueueStale: 3 * e.cfg.AccountPoll})
		if err != nil {
			return &Error{Type: task.ErrTypeStoreUnavailable, Err: err}
		}
		if !granted {
			f := &Error{Type: task.ErrTypeAccountBusy, Wait: &task.Wait{Reason: task.WaitConcurrency, Position: pos},
				Err: fmt.Errorf("the account runs its %d turns at once; this turn is number %d in its queue", n, pos)}
			a.recordWait(ctx, f, time.Now(), time.Now().Add(e.cfg.AccountPoll))
			return f
		}
		a.acct.slot = true
		a.acct.stopRenew = a.renewSlot(ctx)
	}
	if !g.Waiting {
		return nil
	}
	if w, ok, err := store.EndWait(ctx, e.cfg.DB, req.TaskID); err != nil {
		a.log.Warn("ending the task's wait for its account", "error", err)
	} else if ok {
		a.emit(events.AgentEvent{Type: events.TypeWait, Time: time.Now().UTC(), Wait: &events.Wait{
			Phase: events.WaitEnded, Account: w.Account, Reason: string(w.Reason), LimitType: w.LimitType,
			ResetsAt: w.ResetsAt, WaitedMS: time.Since(w.Since).Milliseconds()}})
	}
	return nil
}

// waitedFor says, when the task's turn waits for its account, that the previous attempt ended
// for that wait; "" otherwise.
func (a *attempt) waitedFor(ctx context.Context) string {
	w, ok, err := store.GetWait(ctx, a.e.cfg.DB, a.req.TaskID)
	if err != nil || !ok || w.Turn != a.req.Turn {
		return ""
	}
	return fmt.Sprintf("the previous attempt waited for the account (%s)", w.Reason)
}

// forgetAccountWait forgets the wait of a task that stopped (it ended, or was cancelled while it
// waited) and its place in its account's queue.
func (e *Engine) forgetAccountWait(ctx context.Context, taskID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.StopTimeout)
	defer cancel()
	if err := store.ForgetTaskWait(ctx, e.cfg.DB, taskID); err != nil {
		e.cfg.Logger.Warn("forgetting the stopped task's wait for its account", "task_id", taskID, "error", err)
	}
}

// renewSlot renews the attempt's slot until the returned function is called.
func (a *attempt) renewSlot(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// The renewal outlives the attempt when its parked turn is adopted (park): it reads nothing
	// of the attempt that changes.
	e, account, taskID, log := a.e, a.acct.id, a.req.TaskID, a.log
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(a.e.cfg.AccountLease / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := store.RenewSlot(ctx, e.cfg.DB, account, taskID, e.cfg.AccountLease); err != nil && ctx.Err() == nil {
					log.Warn("renewing the turn's slot of its account", "error", err)
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// recordWait completes f's Wait (account, turn, since, when to try again), records it in
// Postgres and, when the wait is new, in the task's log. retry, when set, is when to try again
// (before the jitter); otherwise the reset plus the task's jitter, or the recheck of a limit
// that outlasted its reset.
func (a *attempt) recordWait(ctx context.Context, f *Error, now, retry time.Time) {
	e, w := a.e, f.Wait
	w.Account, w.Turn, w.Since = a.acct.id, a.req.Turn, now.UTC()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.StopTimeout)
	defer cancel()
	row, before, isNew, err := store.RecordWait(ctx, e.cfg.DB, store.AccountWait{TaskID: a.req.TaskID, Account: w.Account, Turn: w.Turn,
		Reason: w.Reason, LimitType: w.LimitType, ResetsAt: w.ResetsAt, RetryAt: retry})
	if err != nil {
		a.log.Warn("recording the task's wait for its account", "error", err)
	} else {
		w.Since = row.Since.UTC()
	}
	switch {
	case w.Reason == task.WaitSpendCap:
		// Only an operator ends it.
	case !retry.IsZero():
		w.RetryAt = retry.Add(jitter(a.req.TaskID, e.cfg.LimitJitter)).UTC()
	case w.ResetsAt.After(now):
		w.RetryAt = w.ResetsAt.Add(time.Duration(before%64)*e.cfg.LimitJitter + jitter(a.req.TaskID, e.cfg.LimitJitter)).UTC()
	default:
		w.RetryAt = now.Add(e.recheckAfter(now, w.ResetsAt) + jitter(a.req.TaskID, e.cfg.LimitJitter)).UTC()
	}
	if isNew || err != nil {
		a.emit(events.AgentEvent{Type: events.TypeWait, Time: time.Now().UTC(), Wait: &events.Wait{
			Phase: events.WaitStarted, Account: w.Account, Reason: string(w.Reason), LimitType: w.LimitType,
			ResetsAt: w.ResetsAt, RetryAt: w.RetryAt, Position: w.Position}})
	}
}

// recheckAfter is how long the account waits, at now, before it looks again at a limit that
// outlasted its announced reset resetsAt: LimitRecheckFirst past the reset itself, and each wait
// after that as long as the limit has outlasted its reset so far, plus LimitRecheckFirst (1, 2,
// 4, 8 … minutes by default), never beyond LimitRecheck.
func (e *Engine) recheckAfter(now, resetsAt time.Time) time.Duration {
	first, most := e.cfg.LimitRecheckFirst, e.cfg.LimitRecheck
	if resetsAt.IsZero() || resetsAt.After(now) {
		return first
	}
	return min(now.Sub(resetsAt)+first, most)
}

// jitter is the task's own share of spread, the same on every host.
func jitter(taskID string, spread time.Duration) time.Duration {
	if spread <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(taskID))
	return time.Duration(h.Sum64() % uint64(spread))
}

// accountEnded records what the attempt's end means for its account, before settle records the
// attempt: a limit the turn met holds every turn of the account (and the turn waits); a turn
// that got through lifts a limit whose reset has passed, and the tasks that waited for it are
// told, spread out; a slot the turn held goes to the next in the account's queue.
func (e *Engine) accountEnded(ctx context.Context, a *attempt, o outcome) {
	if a.acct.id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.StopTimeout)
	defer cancel()
	if f := o.fail; f != nil && f.Wait != nil && f.Wait.Account == "" {
		// Met by this turn's own request.
		now := time.Now()
		until := f.Wait.ResetsAt
		if f.Wait.Reason != task.WaitSpendCap && !until.After(now) {
			// The limit outlasted the reset it announces: look again later.
			until = now.Add(e.recheckAfter(now, f.Wait.ResetsAt))
		}
		if f.Wait.Reason == task.WaitSpendCap {
			until = time.Time{}
		}
		if err := store.LimitAccount(ctx, e.cfg.DB, store.AccountLimit{Account: a.acct.id, Reason: f.Wait.Reason,
			LimitType: f.Wait.LimitType, ResetsAt: f.Wait.ResetsAt, NextLook: until}); err != nil {
			a.log.Warn("recording the account's limit", "error", err)
		}
		retry := time.Time{}
		if until.After(now) && !until.Equal(f.Wait.ResetsAt) {
			retry = until
		}
		a.recordWait(ctx, f, now, retry)
		a.log.Info("the account's limit is reached; the turn waits", "account", a.acct.id, "reason", f.Wait.Reason,
			"limit_type", f.Wait.LimitType, "resets_at", f.Wait.ResetsAt, "retry_at", f.Wait.RetryAt)
	}
	if o.fail == nil {
		waiters, err := store.AccountGotThrough(ctx, e.cfg.DB, a.acct.id)
		if err != nil {
			a.log.Warn("lifting the account's limit", "error", err)
		}
		if len(waiters) > 0 {
			a.log.Info("the account's limit lifted; telling the waiting tasks", "account", a.acct.id, "tasks", len(waiters))
			now := time.Now()
			ids := make([]string, 0, len(waiters))
			for _, w := range waiters {
				if w.TaskID != a.req.TaskID {
					ids = append(ids, w.TaskID)
				}
			}
			e.tellReady(ctx, a.acct.id, ids, func(i int) time.Time { return now.Add(time.Duration(i+1) * e.cfg.LimitJitter) })
		}
	}
	if a.acct.slot && !o.park { // a parked turn keeps its slot for the attempt that adopts it (park)
		a.acct.slot = false
		e.releaseSlot(ctx, a.acct, a.req.TaskID)
	}
}

// releaseSlot ends the renewal of a turn's slot of its account, frees the slot and tells the
// tasks next in the account's queue.
func (e *Engine) releaseSlot(ctx context.Context, acct accountTurn, taskID string) {
	acct.stopRenew()
	next, err := store.ReleaseSlot(ctx, e.cfg.DB, acct.id, taskID, e.cfg.AccountMaxConcurrentTurns)
	if err != nil {
		e.cfg.Logger.Warn("releasing the turn's slot of its account", "task_id", taskID, "error", err)
	}
	e.tellReady(ctx, acct.id, next, func(int) time.Time { return time.Time{} })
}

// tellReady signals each task that it may try again, not before notBefore(i).
func (e *Engine) tellReady(ctx context.Context, account string, taskIDs []string, notBefore func(i int) time.Time) {
	n, ok := e.cfg.Notifier.(AccountNotifier)
	if !ok {
		return
	}
	for i, id := range taskIDs {
		if err := n.AccountReady(ctx, id, task.AccountReady{Account: account, NotBefore: notBefore(i).UTC()}); err != nil {
			e.cfg.Logger.Warn("telling a waiting task its account is ready", "task_id", id, "error", err)
		}
	}
}

// ResumeAccount lifts whatever limits the account (an operator raised its spend cap, or knows
// its limit is over) and tells the tasks waiting for it, spread out. It returns the number of
// tasks told.
func ResumeAccount(ctx context.Context, db store.DB, n AccountNotifier, account string, spread time.Duration) (int, error) {
	waiters, err := store.ResumeAccount(ctx, db, account)
	if err != nil {
		return 0, err
	}
	var errs []error
	now := time.Now()
	for i, w := range waiters {
		r := task.AccountReady{Account: account, NotBefore: now.Add(time.Duration(i) * spread).UTC()}
		if err := n.AccountReady(ctx, w.TaskID, r); err != nil {
			errs = append(errs, fmt.Errorf("task %s: %w", w.TaskID, err))
		}
	}
	return len(waiters), errors.Join(errs...)
}

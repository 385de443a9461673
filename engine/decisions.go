package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// Notifier tells whoever decides permission requests (the task's workflow) what waits and what
// was withdrawn. It must return quickly; a failure is logged and the request waits anyway (the
// next ask, or a decision through Postgres, still reaches it).
type Notifier interface {
	Asked(ctx context.Context, taskID string, r task.PendingRequest) error
	Closed(ctx context.Context, taskID string, c task.PermissionClosed) error
}

// decisionPoll is how often a waiting request reads its row, besides the notification that
// normally wakes it: the safety net for a notification lost while the listener reconnected.
const decisionPoll = 2 * time.Second

// decisions wakes the attempts that wait for a decision on a permission request: one listener
// on store.DecisionsChannel per engine, started with the first waiter.
type decisions struct {
	pool *pgxpool.Pool // nil: no listener; waiters poll
	log  func(msg string, args ...any)

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{} // task/request → waiters
	started bool
	stop    context.CancelFunc
	done    chan struct{}
}

func newDecisions(db store.TxDB, warn func(string, ...any)) *decisions {
	d := &decisions{waiters: map[string]map[chan struct{}]struct{}{}, log: warn}
	d.pool, _ = db.(*pgxpool.Pool)
	return d
}

func decisionKey(taskID, requestID string) string { return taskID + "\x00" + requestID }

// subscribe returns a channel that is signalled when the request may have been decided.
func (d *decisions) subscribe(taskID, requestID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	key := decisionKey(taskID, requestID)
	d.mu.Lock()
	if d.waiters[key] == nil {
		d.waiters[key] = map[chan struct{}]struct{}{}
	}
	d.waiters[key][ch] = struct{}{}
	if !d.started && d.pool != nil {
		d.started = true
		ctx, cancel := context.WithCancel(context.Background())
		d.stop, d.done = cancel, make(chan struct{})
		go func() {
			defer close(d.done)
			_ = store.Listen(ctx, d.pool, store.DecisionsChannel, time.Second, nil, d.notified)
		}()
	}
	d.mu.Unlock()
	return ch, func() {
		d.mu.Lock()
		delete(d.waiters[key], ch)
		if len(d.waiters[key]) == 0 {
			delete(d.waiters, key)
		}
		d.mu.Unlock()
	}
}

// notified wakes the waiters of a notification; an empty payload (a reconnect) wakes all.
func (d *decisions) notified(payload string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var n store.DecisionNotice
	if payload != "" && json.Unmarshal([]byte(payload), &n) == nil {
		for ch := range d.waiters[decisionKey(n.TaskID, n.RequestID)] {
			wake(ch)
		}
		return
	}
	for _, chs := range d.waiters {
		for ch := range chs {
			wake(ch)
		}
	}
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (d *decisions) close() {
	d.mu.Lock()
	stop, done := d.stop, d.done
	d.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// await waits until the request is no longer pending and returns its row, or ctx's cause.
func (d *decisions) await(ctx context.Context, db store.DB, taskID, requestID string) (store.PermissionRequest, error) {
	woken, unsubscribe := d.subscribe(taskID, requestID)
	defer unsubscribe()
	t := time.NewTicker(decisionPoll)
	defer t.Stop()
	for {
		r, err := store.GetPermission(ctx, db, taskID, requestID)
		switch {
		case err == nil && r.Status.Final():
			return r, nil
		case err != nil && ctx.Err() == nil:
			d.log("reading a permission request while waiting for its decision", "task_id", taskID, "request_id", requestID, "error", err)
		}
		select {
		case <-ctx.Done():
			return store.PermissionRequest{}, context.Cause(ctx)
		case <-woken:
		case <-t.C:
		}
	}
}

// Deliver records a decision the workflow took (a person's, or an expiry) where the attempt
// waiting for it finds it. Delivering the same decision again is harmless; a request decided
// otherwise already is refused (InvalidInput: the workflow's record and Postgres disagree).
func (e *Engine) Deliver(ctx context.Context, rec task.DecisionRecord) error {
	status := rec.Outcome
	if !status.Final() {
		status = task.OutcomeDenied // a record names a final outcome; anything else denies
	}
	answer, err := json.Marshal(rec)
	if err != nil {
		return &Error{Type: task.ErrTypeInternal, Err: fmt.Errorf("encoding the decision: %w", err)}
	}
	err = store.DecidePermission(ctx, e.cfg.DB, rec.TaskID, rec.RequestID, store.Decision{
		Status: status, Answer: answer, DecidedBy: rec.By, Reason: rec.Reason,
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotPending), errors.Is(err, store.ErrNotFound):
		// The request was closed meanwhile (the turn ended, the CLI withdrew it), or this host's
		// database never saw it: nothing waits for this decision any more.
		e.cfg.Logger.Info("a decision found its request closed", "task_id", rec.TaskID, "request_id", rec.RequestID, "error", err)
		return nil
	case ctx.Err() != nil:
		return contextFailure(ctx)
	}
	return &Error{Type: task.ErrTypeStoreUnavailable, Err: err}
}

// RecordDeadline records a pending request's moved deadline where the inbox reads it. A request
// that no longer waits is left alone.
func (e *Engine) RecordDeadline(ctx context.Context, m task.DeadlineMoved) error {
	moved, err := store.ExtendPermissionDeadline(ctx, e.cfg.DB, m.TaskID, m.RequestID, m.Deadline)
	switch {
	case err == nil:
		if !moved {
			e.cfg.Logger.Info("a moved deadline found its request closed", "task_id", m.TaskID, "request_id", m.RequestID)
		}
		return nil
	case ctx.Err() != nil:
		return contextFailure(ctx)
	}
	return &Error{Type: task.ErrTypeStoreUnavailable, Err: err}
}

// RecordState records a task's state where the read side reads it.
func (e *Engine) RecordState(ctx context.Context, rec task.StateRecord) error {
	state, err := json.Marshal(rec.State)
	if err != nil {
		return &Error{Type: task.ErrTypeInternal, Err: fmt.Errorf("encoding the state of task %s: %w", rec.TaskID, err)}
	}
	err = store.RecordTaskState(ctx, e.cfg.DB, rec.TaskID, rec.State.Status, state, rec.At, rec.Seq)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return contextFailure(ctx)
	}
	return &Error{Type: task.ErrTypeStoreUnavailable, Err: err}
}

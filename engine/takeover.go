package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/streamjson"
	"github.com/drover-run/drover/task"
)

// A turn taken over: when Temporal gives an attempt up while its CLI still runs the turn on this
// host (the worker could not reach Temporal for longer than the heartbeat timeout), the retry
// that Temporal sends to the same host queue adopts the running CLI, with its pending permission
// requests and its place in the event log, rather than starting a new CLI that would send the
// prompt to the API again.
//
// The hand-over, on the executor:
//
//   - the attempt running the turn registers itself once its prompt is sent (setRunner);
//   - a newer attempt of the same turn and prompt claims the turn (claimTurn): the running
//     attempt is stopped with errTakenOver, unless it already let go;
//   - the running attempt, stopped with errTakenOver or given up by Temporal (AttemptTimedOut,
//     a retry follows), lets go of the turn without stopping the CLI (park): the CLI's events
//     wait in a parkSink, the attempt's log is stored, and the turn waits for its taker;
//   - the newer attempt adopts the turn (adopt): it receives what waited and every later event
//     in its own log, answers the CLI's requests, and waits for the turn's end like any attempt;
//   - a parked turn that nobody claims within Config.TakeoverWait (the retry went to another
//     host, or never came) has its CLI stopped and what it printed meanwhile stored in the old
//     attempt's log: no CLI is left behind.

// errTakenOver is the cause that stops an attempt whose running turn a newer attempt of the turn
// takes over (an AttemptSuperseded: the newer attempt owns the executor row).
var errTakenOver = errors.New("a newer attempt of the turn took its running CLI over")

// turnRunner is the attempt running an executor's turn, once its prompt is sent.
type turnRunner struct {
	attempt    int
	promptUUID string
	cancel     context.CancelCauseFunc
}

// parkSink keeps the events of a parked turn for the attempt that adopts it, then passes every
// later event on to that attempt's sink. Safe for concurrent use.
type parkSink struct {
	mu   sync.Mutex
	held []events.AgentEvent
	next streamjson.Sink
	// acct is what the attempt that parked the turn held of its account, its slot still
	// renewed: the adopting attempt holds it on, and a turn nobody adopts frees it. Set before
	// the turn is parked, read under the executor's lock.
	acct accountTurn
}

func (s *parkSink) Emit(ev events.AgentEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next != nil {
		s.next.Emit(ev)
		return
	}
	s.held = append(s.held, ev)
}

// forward hands what waited to next, and every later event.
func (s *parkSink) forward(next streamjson.Sink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range s.held {
		next.Emit(ev)
	}
	s.held, s.next = nil, next
}

// setRunner records the attempt that runs the executor's turn now that its prompt is sent.
func (ex *executor) setRunner(r *turnRunner) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.runner = r
}

// claimTurn asks for the running turn on behalf of a newer attempt of the same turn and prompt.
// It returns a channel closed once the running attempt let go of the turn, parked (adopt takes
// it) or not (adopt refuses); ok is false when the executor runs no such turn.
func (ex *executor) claimTurn(turn int, promptUUID string, attempt int) (<-chan struct{}, bool) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	r := ex.runner
	if !ex.busy || ex.turn != turn || r == nil || r.promptUUID != promptUUID || r.attempt >= attempt {
		return nil, false
	}
	if ex.parked != nil {
		if ex.parkTimer != nil && !ex.parkTimer.Stop() {
			return nil, false // its wait ran out: the CLI is being stopped
		}
		ex.parkTimer = nil
		done := make(chan struct{})
		close(done)
		return done, true
	}
	if ex.handoff == nil {
		ex.handoff = make(chan struct{})
		r.cancel(&Error{Type: task.ErrTypeAttemptSuperseded, Err: errTakenOver})
	}
	return ex.handoff, true
}

// letGo ends the running attempt's hold on the turn when it does not park it: a claim waiting
// for it learns it may not adopt the turn.
func (ex *executor) letGo(r *turnRunner) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.runner != r || ex.parked != nil {
		return
	}
	ex.runner = nil
	if ex.handoff != nil {
		close(ex.handoff)
		ex.handoff = nil
	}
}

// detach moves the running turn's events to s: the attempt that ran it stops hearing them.
func (ex *executor) detach(s *parkSink) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.sink = s
}

// parkedReady marks the turn as parked in s: a waiting claim may adopt it now; with none
// waiting, expire runs unless a claim comes within wait.
func (ex *executor) parkedReady(s *parkSink, wait time.Duration, expire func()) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.parked = s
	if ex.handoff != nil {
		close(ex.handoff)
		ex.handoff = nil
		return
	}
	ex.parkTimer = time.AfterFunc(wait, expire)
}

// unpark takes the parked turn back from the executor when its wait ran out; false when an
// attempt adopted it meanwhile.
func (ex *executor) unpark() (*parkSink, bool) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	s := ex.parked
	if s == nil {
		return nil, false
	}
	ex.parked, ex.parkTimer, ex.runner = nil, nil, nil
	return s, true
}

// adopt hands the parked turn to the attempt runner r with its sink: what waited goes to sink
// first. It returns the turn's end and what the attempt that parked it held of its account; ok
// is false when no turn is parked, or the parked one no longer runs (what it held is returned to
// be freed).
func (ex *executor) adopt(r *turnRunner, sink streamjson.Sink) (<-chan turnEnd, accountTurn, bool) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	s := ex.parked
	if s == nil {
		return nil, accountTurn{}, false
	}
	if !ex.busy {
		// Nothing runs to adopt: the parked turn is gone with what it held, for the caller to free.
		ex.parked, ex.parkTimer = nil, nil
		return nil, s.acct, false
	}
	s.forward(sink)
	ex.sink, ex.parked, ex.parkTimer, ex.runner = sink, nil, nil, r
	ex.lastSeen.Store(time.Now().UnixNano())
	return ex.ended, s.acct, true
}

// mayPark reports whether an attempt that ended with f may leave its running turn to the next
// attempt on this host rather than stop its CLI: a newer attempt claimed the turn, or Temporal
// gave the attempt up and retries it (on the same host queue).
func (a *attempt) mayPark(f *Error) bool {
	if a.runner == nil || !a.inTurn || a.ex == nil || !a.ex.alive() {
		return false
	}
	switch {
	case errors.Is(f, errTakenOver):
		return true
	case f.Type == task.ErrTypeAttemptTimedOut && errors.Is(f, errHeartbeatLost):
		return !lastAttempt(a.req, f)
	}
	return false
}

// errHeartbeatLost marks an AttemptTimedOut cause that says Temporal gave the attempt up (its
// heartbeat timed out) while it ran: a retry of the same activity follows on the same queue.
var errHeartbeatLost = errors.New("heartbeat lost")

// HeartbeatLost wraps err, the cause of an attempt's end that Temporal gave up while it ran (its
// heartbeat timed out), so that the attempt leaves its running turn for the retry (see
// takeover.go).
func HeartbeatLost(err error) error { return heartbeatLost{err} }

type heartbeatLost struct{ error }

func (h heartbeatLost) Unwrap() error        { return h.error }
func (h heartbeatLost) Is(target error) bool { return target == errHeartbeatLost }

// park lets go of the attempt's running turn without stopping its CLI: the CLI's events wait for
// the attempt that adopts the turn, the attempt's own log is stored first (the log stays in
// order), and a turn nobody adopts within TakeoverWait has its CLI stopped.
func (a *attempt) park(ctx context.Context) {
	e, ex := a.e, a.ex
	s := &parkSink{acct: a.acct}
	a.acct.slot = false
	ex.detach(s)
	if t := ex.approvals.Load(); t != nil {
		t.retarget(s, nil, a.req)
	}
	l := a.elog.Load()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.StopTimeout)
	if err := l.Flush(fctx); err != nil {
		a.log.Warn("storing the parked attempt's events", "error", err)
	}
	cancel()
	a.log.Info("left the running turn for the next attempt", "pid", ex.pid(), "wait", e.cfg.TakeoverWait)
	ex.parkedReady(s, e.cfg.TakeoverWait, func() {
		s, ok := ex.unpark()
		if !ok {
			return
		}
		bctx, cancel := context.WithTimeout(context.Background(), 4*e.cfg.StopTimeout)
		defer cancel()
		a.log.Warn("no attempt took the running turn over; stopping its claude", "pid", ex.pid())
		ex.approvals.Store(nil)
		e.drop(bctx, ex, "no attempt took the turn over")
		if s.acct.slot {
			e.releaseSlot(bctx, s.acct, a.req.TaskID)
		}
		ex.endTurn("", "", "")
		// What the CLI said since it was parked belongs to the attempt that ran it.
		s.forward(l)
		if err := l.Flush(bctx); err != nil {
			a.log.Warn("storing the events of a turn nobody took over", "error", err)
		}
	})
}

// takeOver adopts the task's running turn on this host when an earlier attempt of the same turn
// and prompt runs it here (see takeover.go); ok is false when there is none, and the attempt
// starts the turn itself.
func (a *attempt) takeOver(ctx context.Context) (o outcome, ok bool) {
	e, req := a.e, a.req
	ex := e.pool.get(req.TaskID)
	if ex == nil || !ex.alive() {
		return outcome{}, false
	}
	ready, ok := ex.claimTurn(req.Turn, req.PromptUUID, req.Attempt)
	if !ok {
		return outcome{}, false
	}
	bound := time.NewTimer(4 * e.cfg.StopTimeout)
	defer bound.Stop()
	select {
	case <-ready:
	case <-ex.exited:
		return outcome{}, false
	case <-bound.C:
		a.log.Warn("the attempt running the turn did not let go of it; starting the turn anew")
		return outcome{}, false
	case <-ctx.Done():
		return failed(contextFailure(ctx)), true
	}
	a.openLog(ctx)
	a.ex = ex
	a.runner = &turnRunner{attempt: req.Attempt, promptUUID: req.PromptUUID, cancel: a.cancel}
	sink := a.turnSink(ctx, true)
	ended, acct, ok := ex.adopt(a.runner, sink)
	if !ok && acct.slot {
		e.releaseSlot(ctx, acct, req.TaskID)
	}
	if !ok {
		// The attempt that ran the turn stopped it rather than leave it: start it anew.
		a.stopLog()
		a.logDone.Wait()
		a.elog.Store(nil)
		a.ex, a.runner, a.sink, a.hold = nil, nil, nil, nil
		return outcome{}, false
	}
	a.inTurn = true
	// The turn runs on under the account's gate and slot its first attempt passed.
	a.acct = acct
	if t := ex.approvals.Load(); t != nil {
		var flush func(context.Context) error
		if l := a.elog.Load(); l != nil {
			flush = l.Flush
		}
		t.retarget(a.sink, flush, req)
	}
	a.spend.arm(ex, a.cutTurn(ex))
	a.log.Info("took the running turn over from the previous attempt", "pid", ex.pid())
	if err := store.SetExecutorRunning(ctx, e.cfg.DB, req.TaskID, req.AttemptID, ex.pid()); err != nil {
		if errors.Is(err, store.ErrStaleAttempt) {
			return failed(&Error{Type: task.ErrTypeAttemptSuperseded, Err: err}), true
		}
		a.log.Warn("recording the running claude process", "error", err)
	}
	return a.wait(ctx, ex, ended), true
}

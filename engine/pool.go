package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/drover-run/drover/store"
)

// pool holds the CLI process serving each task on this host: running a turn, or idle and kept
// for the task's next turn.
type pool struct {
	mu    sync.Mutex
	execs map[string]*executor
}

func newPool() *pool { return &pool{execs: make(map[string]*executor)} }

func (p *pool) get(taskID string) *executor {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.execs[taskID]
}

// put stores ex for its task and returns the executor it replaces, if any.
func (p *pool) put(ex *executor) *executor {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.execs[ex.taskID]
	p.execs[ex.taskID] = ex
	if old == ex {
		return nil
	}
	return old
}

func (p *pool) remove(taskID string) *executor {
	p.mu.Lock()
	defer p.mu.Unlock()
	ex := p.execs[taskID]
	delete(p.execs, taskID)
	return ex
}

// removeIf removes ex only if it still serves its task.
func (p *pool) removeIf(ex *executor) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.execs[ex.taskID] != ex {
		return false
	}
	delete(p.execs, ex.taskID)
	return true
}

func (p *pool) drain() []*executor {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*executor, 0, len(p.execs))
	for id, ex := range p.execs {
		out = append(out, ex)
		delete(p.execs, id)
	}
	return out
}

func (p *pool) all() []*executor {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*executor, 0, len(p.execs))
	for _, ex := range p.execs {
		out = append(out, ex)
	}
	return out
}

// drop stops ex, which failed or is unfit, and forgets it. The attempt that ran it records the
// executor row.
func (e *Engine) drop(ctx context.Context, ex *executor, reason string) {
	e.pool.removeIf(ex)
	ex.stop(ctx, reason)
}

// retire stops an idle process that served its last committed turn and records on the task's
// executor row that it is gone (the resume point stands). A row another attempt owns by now is
// left alone.
func (e *Engine) retire(ctx context.Context, ex *executor, reason string) {
	owner := ex.idleOwner()
	e.turns.forget(ex.taskID)
	ex.stop(ctx, reason)
	if owner == "" {
		return
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.StopTimeout)
	defer cancel()
	if _, err := store.MarkExecutorStopped(mctx, e.cfg.DB, ex.taskID, owner, reason); err != nil {
		e.cfg.Logger.Warn("recording a stopped claude process", "task_id", ex.taskID, "error", err)
	}
}

// holdForNext bounds how long an idle process whose task has prompts queued is kept from
// other tasks' starts, and its turn slot for the task's next turn: that turn comes on the host's
// warm queue as soon as the task's workflow has scheduled it; the bound only keeps a task whose
// next turn never comes (it was cancelled meanwhile) from holding the room.
const holdForNextTurn = time.Minute

// holdForNext holds the process of a turn that committed, before it turns idle, for the task's
// next turn, and says how long the turn's slot is handed over to that turn (see turnSlots): with
// prompts queued behind the turn, up to holdForNextTurn; without, handOverWindow, in case the
// next prompt comes right away. Meanwhile no other task's start evicts it. Otherwise a start for
// another task's first turn, taking the slot the ended turn left, evicts the process that the
// task's next turn is about to use, and the host starts two CLIs where it needed none.
func (e *Engine) holdForNext(ctx context.Context, ex *executor) time.Duration {
	if e.cfg.KeepAlive < 0 {
		return 0
	}
	d := handOverWindow
	if e.queuedNext(ctx, ex.taskID) {
		d = holdForNextTurn
	}
	d = min(d, e.cfg.KeepAlive)
	ex.hold(time.Now().Add(d))
	return d
}

// keepOrStop keeps a process that committed its turn for the task's next one, or stops it
// when processes are not kept.
func (e *Engine) keepOrStop(ctx context.Context, ex *executor) {
	if e.cfg.KeepAlive < 0 {
		e.pool.removeIf(ex)
		e.retire(ctx, ex, "not kept between turns")
		return
	}
	ex.idleFor(e.cfg.KeepAlive, func() {
		if e.pool.removeIf(ex) {
			e.retire(context.Background(), ex, "idle for the keep-alive")
		}
	})
	e.evictIdle(ctx)
}

// evictIdle stops the processes idle the longest while more than MaxIdle wait for a next turn or
// are still being stopped by an earlier eviction: each holds a couple of hundred MB until it has
// exited.
func (e *Engine) evictIdle(ctx context.Context) {
	n := len(e.idle(false)) + int(e.evicting.Load()) - e.cfg.MaxIdle
	e.evict(ctx, e.idle(true), n, "too many idle processes")
}

// queuedNext reports whether the task's state, as its workflow last recorded it for the read
// side, has prompts waiting behind the turn that just ended. A failure to look says no.
func (e *Engine) queuedNext(ctx context.Context, taskID string) bool {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.StopTimeout)
	defer cancel()
	n, err := store.QueuedPrompts(qctx, e.cfg.DB, taskID)
	if err != nil {
		e.cfg.Logger.Debug("looking for the task's queued prompts", "task_id", taskID, "error", err)
		return false
	}
	return n > 0
}

// idle returns the idle processes, the longest idle first: all of them, or only those that may
// be evicted (not held for their task's queued next turn).
func (e *Engine) idle(evictable bool) []*executor {
	type idle struct {
		ex    *executor
		since time.Time
	}
	var idles []idle
	now := time.Now()
	for _, ex := range e.pool.all() {
		if since, ok := ex.idleSince(); ok && !(evictable && ex.heldAt(now)) {
			idles = append(idles, idle{ex, since})
		}
	}
	slices.SortFunc(idles, func(x, y idle) int { return x.since.Compare(y.since) })
	out := make([]*executor, len(idles))
	for i, x := range idles {
		out[i] = x.ex
	}
	return out
}

// evictLongestIdle stops, in the background, up to n of the processes idle the longest.
func (e *Engine) evictLongestIdle(ctx context.Context, n int, reason string) {
	if n > 0 {
		e.evict(ctx, e.idle(true), n, reason)
	}
}

// evict stops, in the background, up to n of idles (the longest idle first).
func (e *Engine) evict(ctx context.Context, idles []*executor, n int, reason string) {
	for _, ex := range idles[:max(0, min(n, len(idles)))] {
		if e.pool.removeIf(ex) {
			e.evicting.Add(1)
			go func() {
				defer e.evicting.Add(-1)
				e.retire(context.WithoutCancel(ctx), ex, reason)
			}()
		}
	}
}

// admitEvery is how often a start waiting for room looks again.
const admitEvery = 50 * time.Millisecond

// admit waits for room for one more CLI process on the host (Config.MaxConcurrentTurns) and takes it; the
// caller gives it back with release once the process has exited (or did not start). The process
// counts among the host's (procs) from admit to release.
func (e *Engine) admit(ctx context.Context) error {
	if err := e.room(ctx); err != nil {
		return err
	}
	e.procs.Add(1)
	return nil
}

// room waits for room for one more CLI process and takes it. While the host is full it stops
// the longest idle process, one for each start that waits and is not already being made room
// for.
func (e *Engine) room(ctx context.Context) error {
	if e.procSlots == nil {
		return nil
	}
	select {
	case e.procSlots <- struct{}{}:
		return nil
	default:
	}
	e.admitting.Add(1)
	defer e.admitting.Add(-1)
	for {
		e.evictLongestIdle(ctx, int(e.admitting.Load()-e.evicting.Load()), "making room for a new claude process")
		t := time.NewTimer(admitEvery)
		select {
		case e.procSlots <- struct{}{}:
			t.Stop()
			return nil
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}

// release gives back the room admit took.
func (e *Engine) release() {
	e.procs.Add(-1)
	if e.procSlots != nil {
		<-e.procSlots
	}
}

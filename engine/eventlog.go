package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/store"
)

// errEventBacklog is returned when Postgres has been unreachable for so long
// that the attempt's unwritten events passed the backlog bound.
var errEventBacklog = errors.New("event log backlog is full: Postgres unreachable")

// eventLog appends one attempt's events to the task's log in small batches.
// Emit never blocks on Postgres: events wait in memory until the background
// writer (run) or a final Flush stores them, in order, retrying through
// transient database failures. Nothing emitted is dropped while the attempt
// lives; a backlog past maxBacklog fails the attempt instead of growing
// without bound.
type eventLog struct {
	db      store.DB
	taskID  string
	turn    int
	attempt int
	logger  *slog.Logger

	maxBatch   int
	maxBacklog int
	interval   time.Duration

	mu      sync.Mutex
	buf     []store.EventInput
	lastSeq int64
	failed  error
	wake    chan struct{}
	flushMu sync.Mutex // one writer at a time keeps the order
}

func newEventLog(db store.DB, taskID string, turn, attempt int, logger *slog.Logger) *eventLog {
	return &eventLog{
		db: db, taskID: taskID, turn: turn, attempt: attempt, logger: logger,
		maxBatch: 64, maxBacklog: 200_000, interval: 50 * time.Millisecond,
		wake: make(chan struct{}, 1),
	}
}

// Emit queues one event. It is safe for concurrent use.
func (l *eventLog) Emit(ev events.AgentEvent) {
	payload, err := json.Marshal(ev)
	if err != nil {
		// An AgentEvent that cannot be encoded is a bug in the adapter; keep a
		// trace of it rather than losing the slot silently.
		payload, _ = json.Marshal(map[string]string{"type": string(events.TypeError), "encode_error": err.Error()})
	}
	l.mu.Lock()
	if len(l.buf) >= l.maxBacklog {
		if l.failed == nil {
			l.failed = errEventBacklog
		}
		l.mu.Unlock()
		return
	}
	l.buf = append(l.buf, store.EventInput{Turn: l.turn, Attempt: l.attempt, Type: string(ev.Type), Payload: payload})
	full := len(l.buf) >= l.maxBatch
	l.mu.Unlock()
	if full {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// Err reports a failure that makes the log unable to keep up.
func (l *eventLog) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// LastSeq is the sequence number of the last event stored so far.
func (l *eventLog) LastSeq() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastSeq
}

// run writes queued events every interval, or sooner when a batch fills up,
// until ctx ends. Write errors are logged and retried on the next round.
func (l *eventLog) run(ctx context.Context) {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.wake:
		}
		if err := l.writeOnce(ctx); err != nil && ctx.Err() == nil {
			l.logger.Warn("appending events failed; will retry", "task_id", l.taskID, "error", err)
		}
	}
}

// Flush stores every queued event, retrying with backoff until it succeeds or
// ctx ends.
func (l *eventLog) Flush(ctx context.Context) error {
	backoff := 50 * time.Millisecond
	for {
		err := l.writeOnce(ctx)
		if err == nil {
			l.mu.Lock()
			empty := len(l.buf) == 0
			l.mu.Unlock()
			if empty {
				return nil
			}
			continue
		}
		l.logger.Warn("flushing events failed; retrying", "task_id", l.taskID, "error", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return fmt.Errorf("flushing events of task %s: %w (last error: %v)", l.taskID, context.Cause(ctx), err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// writeOnce stores up to a few batches of what is queued.
func (l *eventLog) writeOnce(ctx context.Context) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	for range 16 {
		l.mu.Lock()
		n := min(len(l.buf), l.maxBatch*4)
		batch := l.buf[:n:n]
		l.mu.Unlock()
		if n == 0 {
			return nil
		}
		_, last, err := store.AppendEvents(ctx, l.db, l.taskID, batch)
		if err != nil {
			return err
		}
		l.mu.Lock()
		l.buf = l.buf[n:]
		if len(l.buf) == 0 {
			l.buf = nil
		}
		l.lastSeq = last
		l.mu.Unlock()
	}
	return nil
}

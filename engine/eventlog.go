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

// errEventBacklog is returned when Postgres has been unreachable for so long that the attempt's
// unwritten events passed the backlog bound.
var errEventBacklog = errors.New("event log backlog is full: Postgres unreachable")

// eventLog appends one attempt's events to the task's log.
//
// Emit never blocks on Postgres: events wait in memory until the writer (run) or a final Flush
// stores them, in order, retrying through transient database failures. The writer commits
// whatever is queued as soon as the previous write is done (group commit): an event waits for at
// most one write in flight, never for a timer. Text that streams in while a write is in flight
// is coalesced: consecutive message_chunk (or reasoning) events of one message become one event,
// so the log grows by a row per write rather than a row per token.
//
// Nothing emitted is dropped while the attempt lives; a backlog past maxBacklog fails the
// attempt instead of growing without bound.
type eventLog struct {
	db        store.DB
	taskID    string
	attemptID string
	turn      int
	attempt   int
	logger    *slog.Logger

	maxBatch   int
	maxBacklog int

	mu      sync.Mutex
	buf     []events.AgentEvent
	lastSeq int64
	// stored counts the emitted events stored so far (buf holds the rest); uncertain is set
	// when a write failed in a way that leaves unknown whether it landed.
	stored    int64
	uncertain bool
	failed    error
	wake      chan struct{}
	flushMu   sync.Mutex // one writer at a time keeps the order
}

func newEventLog(db store.DB, taskID, attemptID string, turn, attempt int, logger *slog.Logger) *eventLog {
	return &eventLog{
		db: db, taskID: taskID, attemptID: attemptID, turn: turn, attempt: attempt, logger: logger,
		maxBatch: 256, maxBacklog: 200_000,
		wake: make(chan struct{}, 1),
	}
}

// Emit queues one event and wakes the writer. It is safe for concurrent use.
func (l *eventLog) Emit(ev events.AgentEvent) {
	l.mu.Lock()
	if len(l.buf) >= l.maxBacklog {
		if l.failed == nil {
			l.failed = errEventBacklog
		}
		l.mu.Unlock()
		return
	}
	l.buf = append(l.buf, ev)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
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

// run writes queued events whenever there are some, until ctx ends. A failed write is logged
// and retried with backoff.
func (l *eventLog) run(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		}
		for {
			err := l.writeOnce(ctx)
			if err == nil {
				backoff = 50 * time.Millisecond
				break
			}
			if ctx.Err() != nil {
				return
			}
			l.logger.Warn("appending events failed; will retry", "task_id", l.taskID, "error", err, "backoff", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 2*time.Second)
		}
	}
}

// Flush stores every queued event, retrying with backoff until it succeeds or ctx ends.
func (l *eventLog) Flush(ctx context.Context) error {
	backoff := 50 * time.Millisecond
	for {
		err := l.writeOnce(ctx)
		if err == nil {
			return nil
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

// writeOnce stores everything queued, a batch at a time. After a write whose outcome is unknown
// it first asks the database how far the writer got, so that a batch that landed is not stored
// again; and a batch is fenced in the database (store.Writer), so that a copy of an earlier write
// still on its way to Postgres when that question was asked cannot land twice either.
func (l *eventLog) writeOnce(ctx context.Context) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	for {
		if l.uncertain {
			if err := l.resync(ctx); err != nil {
				return err
			}
		}
		l.mu.Lock()
		n := len(l.buf)
		queued := l.buf[:n:n]
		stored := l.stored
		l.mu.Unlock()
		if n == 0 {
			return nil
		}
		batch, used := coalesce(queued, l.maxBatch)
		inputs := make([]store.EventInput, len(batch))
		for i, ev := range batch {
			inputs[i] = store.EventInput{Turn: l.turn, Attempt: l.attempt, Type: string(ev.Type), Payload: encode(ev)}
		}
		w := store.Writer{AttemptID: l.attemptID, After: stored, Through: stored + int64(used)}
		_, last, err := store.AppendWriterEvents(ctx, l.db, l.taskID, w, inputs)
		if errors.Is(err, store.ErrWriterAhead) {
			l.uncertain = true // an earlier copy landed: read how far, then go on
			continue
		}
		if err != nil {
			l.uncertain = true
			return err
		}
		l.mu.Lock()
		l.stored += int64(used)
		l.buf = l.buf[used:]
		if len(l.buf) == 0 {
			l.buf = nil
		}
		l.lastSeq = last
		l.mu.Unlock()
	}
}

// resync reads how many of the writer's events are stored and drops those from the queue.
func (l *eventLog) resync(ctx context.Context) error {
	emitted, last, err := store.WriterProgress(ctx, l.db, l.taskID, l.attemptID)
	if err != nil {
		return err
	}
	l.mu.Lock()
	if landed := emitted - l.stored; landed > int64(len(l.buf)) {
		// More of the writer's events are stored than it ever queued: another writer used its
		// id. What it queued counts as stored rather than stored twice.
		l.logger.Error("the event writer's stored events outnumber what it emitted", "task_id", l.taskID,
			"attempt_id", l.attemptID, "stored", emitted, "emitted", l.stored+int64(len(l.buf)))
		l.buf = nil
		l.stored, l.lastSeq = emitted, last
	} else if landed > 0 {
		l.buf = l.buf[landed:]
		l.stored, l.lastSeq = emitted, last
	}
	l.mu.Unlock()
	l.uncertain = false
	return nil
}

// coalesce takes events from the head of queued, up to max of them once merged, joining
// consecutive text of one message into one event, and returns them with how many queued events
// they stand for.
func coalesce(queued []events.AgentEvent, max int) (batch []events.AgentEvent, used int) {
	for used < len(queued) {
		ev := queued[used]
		if n := len(batch); n > 0 && mergeable(batch[n-1], ev) {
			last := &batch[n-1]
			last.Text += ev.Text
			last.ReasoningText += ev.ReasoningText
			used++
			continue
		}
		if len(batch) == max {
			break
		}
		batch = append(batch, ev)
		used++
	}
	return batch, used
}

// mergeable reports whether next continues prev's text: both streamed pieces of the same
// message, of the same kind, from the same agent.
func mergeable(prev, next events.AgentEvent) bool {
	if prev.Type != next.Type || (prev.Type != events.TypeMessageChunk && prev.Type != events.TypeReasoning) {
		return false
	}
	return prev.MessageID != "" && prev.MessageID == next.MessageID &&
		prev.ParentToolCallID == next.ParentToolCallID && prev.SessionID == next.SessionID &&
		prev.Time.IsZero() && next.Time.IsZero()
}

func encode(ev events.AgentEvent) json.RawMessage {
	payload, err := json.Marshal(ev)
	if err != nil {
		// An AgentEvent that cannot be encoded is a bug in the adapter; keep a trace of it
		// rather than losing the slot silently.
		payload, _ = json.Marshal(map[string]string{"type": string(events.TypeError), "encode_error": err.Error()})
	}
	return payload
}

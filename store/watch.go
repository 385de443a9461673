package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// WatchConfig says which events Watch delivers and how it looks for them.
type WatchConfig struct {
	// TaskID is the task whose events are delivered. Required.
	TaskID string
	// AfterSeq is the cursor: delivery starts with the event after it. Defaults to 0, the
	// beginning of the log.
	AfterSeq int64
	// PollInterval is how long the watcher waits for a notification before reading anyway, the
	// safety net for lost notifications. Defaults to 5s.
	PollInterval time.Duration
	// BatchSize is how many events one read fetches. Defaults to 500.
	BatchSize int
	// ReconnectDelay is the pause before reconnecting after the connection was lost.
	// Defaults to 500ms.
	ReconnectDelay time.Duration
	// Logger gets connection losses and reconnects. Nil means silent.
	Logger *slog.Logger
}

func (c WatchConfig) withDefaults() WatchConfig {
	if c.PollInterval == 0 {
		c.PollInterval = 5 * time.Second
	}
	if c.BatchSize == 0 {
		c.BatchSize = 500
	}
	if c.ReconnectDelay == 0 {
		c.ReconnectDelay = 500 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c WatchConfig) validate() error {
	switch {
	case c.TaskID == "":
		return errors.New("task id is required")
	case c.AfterSeq < 0:
		return fmt.Errorf("after seq %d is negative", c.AfterSeq)
	case c.PollInterval < 0:
		return fmt.Errorf("poll interval %v is negative", c.PollInterval)
	case c.BatchSize < 0:
		return fmt.Errorf("batch size %d is negative", c.BatchSize)
	case c.ReconnectDelay < 0:
		return fmt.Errorf("reconnect delay %v is negative", c.ReconnectDelay)
	}
	return nil
}

// WatchEvents calls fn with every event of the task after afterSeq, in order, each exactly once,
// now and as they are appended, until ctx is done (it returns ctx.Err()) or fn returns an error
// (it returns that error, wrapped). It is Watch with the default WatchConfig.
func WatchEvents(ctx context.Context, pool *pgxpool.Pool, taskID string, afterSeq int64, fn func(Event) error) error {
	return Watch(ctx, pool, WatchConfig{TaskID: taskID, AfterSeq: afterSeq}, fn)
}

// Watch calls fn with every event of cfg.TaskID after cfg.AfterSeq, in order, each exactly once,
// now and as they are appended, until ctx is done (it returns ctx.Err()) or fn returns an error
// (it returns that error, wrapped).
//
// It holds one connection of pool: it LISTENs on EventsChannel first, then reads from its
// cursor, so nothing committed in between is missed; then it reads after its cursor whenever a
// notification for the task announces events past it, and every cfg.PollInterval in case
// notifications were lost. Events of a task become visible in sequence order (see
// AppendEvents), so reading after the cursor never skips one. If the connection is lost, Watch
// reconnects after cfg.ReconnectDelay and catches up from its cursor; other database errors end
// the watch.
func Watch(ctx context.Context, pool *pgxpool.Pool, cfg WatchConfig, fn func(Event) error) error {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("watching events: %w", err)
	}
	w := &watcher{cfg: cfg, pool: pool, fn: fn, cursor: cfg.AfterSeq}
	for {
		err := w.session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var lost *connLostError
		if !errors.As(err, &lost) {
			return fmt.Errorf("watching events of task %s: %w", cfg.TaskID, err)
		}
		cfg.Logger.WarnContext(ctx, "event watch lost its connection; reconnecting",
			"task_id", cfg.TaskID, "after_seq", w.cursor, "error", lost.err, "delay", cfg.ReconnectDelay)
		t := time.NewTimer(cfg.ReconnectDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// watcher is the state of one Watch: its cursor survives reconnects.
type watcher struct {
	cfg    WatchConfig
	pool   *pgxpool.Pool
	fn     func(Event) error
	cursor int64 // the last delivered seq
}

// connLostError marks an error after which Watch reconnects.
type connLostError struct{ err error }

func (e *connLostError) Error() string { return "connection lost: " + e.err.Error() }
func (e *connLostError) Unwrap() error { return e.err }

// session watches on one connection until it fails, ctx is done or fn errs.
func (w *watcher) session(ctx context.Context) error {
	pc, err := w.pool.Acquire(ctx)
	if err != nil {
		return &connLostError{fmt.Errorf("acquiring connection: %w", err)}
	}
	conn := pc.Conn()
	defer func() {
		// Hand the connection back without the LISTEN, or drop it if that fails.
		if !conn.IsClosed() {
			unlistenCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if _, err := conn.Exec(unlistenCtx, "UNLISTEN "+EventsChannel); err != nil {
				_ = conn.Close(unlistenCtx)
			}
			cancel()
		}
		pc.Release()
	}()
	// A failure on a connection that is now closed is a lost connection; on a live one it is
	// the query's own error.
	classify := func(op string, err error) error {
		var delivery *deliveryError
		if errors.As(err, &delivery) {
			return err
		}
		err = fmt.Errorf("%s: %w", op, err)
		if conn.IsClosed() {
			return &connLostError{err}
		}
		return err
	}

	if _, err := conn.Exec(ctx, "LISTEN "+EventsChannel); err != nil {
		return classify("listening", err)
	}
	if err := w.catchUp(ctx, pc); err != nil {
		return classify("reading events", err)
	}
	for {
		waitCtx, cancel := context.WithTimeout(ctx, w.cfg.PollInterval)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			if !w.concerns(n) {
				continue
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			// No notification within the poll interval: read anyway.
		default:
			return classify("waiting for notification", err)
		}
		if err := w.catchUp(ctx, pc); err != nil {
			return classify("reading events", err)
		}
	}
}

// concerns reports whether a notification may announce events past the cursor. One that cannot
// be parsed is assumed to.
func (w *watcher) concerns(n *pgconn.Notification) bool {
	if n.Channel != EventsChannel {
		return false
	}
	var notice EventNotice
	if err := json.Unmarshal([]byte(n.Payload), &notice); err != nil {
		return true
	}
	return notice.TaskID == w.cfg.TaskID && notice.LastSeq > w.cursor
}

// catchUp delivers every committed event after the cursor.
func (w *watcher) catchUp(ctx context.Context, db DB) error {
	for {
		events, err := ListEvents(ctx, db, w.cfg.TaskID, w.cursor, w.cfg.BatchSize)
		if err != nil {
			return err
		}
		for _, e := range events {
			if err := w.fn(e); err != nil {
				return &deliveryError{seq: e.Seq, err: err}
			}
			w.cursor = e.Seq
		}
		if len(events) < w.cfg.BatchSize {
			return nil
		}
	}
}

// deliveryError is fn's error, which ends the watch.
type deliveryError struct {
	seq int64
	err error
}

func (e *deliveryError) Error() string { return fmt.Sprintf("delivering event %d: %v", e.seq, e.err) }
func (e *deliveryError) Unwrap() error { return e.err }

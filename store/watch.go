package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
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
	// safety net for notifications that were never sent. Defaults to 5s.
	PollInterval time.Duration
	// BatchSize is how many events one read fetches. Defaults to 500.
	BatchSize int
	// ReconnectDelay is the pause before the listening connection of store.Watch reconnects
	// after it was lost (a Hub has its own). Defaults to 500ms.
	ReconnectDelay time.Duration
	// Logger gets the connection losses of store.Watch (a Hub has its own). Nil means silent.
	Logger *slog.Logger
}

func (c WatchConfig) withDefaults() WatchConfig {
	if c.PollInterval == 0 {
		c.PollInterval = 5 * time.Second
	}
	if c.BatchSize == 0 {
		c.BatchSize = 500
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

// Watch is Hub.Watch on a hub of its own: one listening connection for this one watch. A
// process that watches many tasks at once shares one Hub instead.
func Watch(ctx context.Context, pool *pgxpool.Pool, cfg WatchConfig, fn func(Event) error) error {
	h := NewHub(pool, HubConfig{ReconnectDelay: cfg.ReconnectDelay, Logger: cfg.Logger})
	return h.Watch(ctx, cfg, fn)
}

// HubConfig configures a Hub.
type HubConfig struct {
	// ReconnectDelay is the pause before reconnecting after the listening connection was lost.
	// Defaults to 500ms.
	ReconnectDelay time.Duration
	// Connect opens the listening connection. Defaults to a connection configured as the
	// pool's, outside the pool.
	Connect func(ctx context.Context) (*pgx.Conn, error)
	// Logger gets connection losses and reconnects. Nil means silent.
	Logger *slog.Logger
}

// Hub fans the notifications of EventsChannel out to every watch of a process over one
// connection of its own: a watch holds no connection of the pool while it waits, and borrows
// one only for the moment it reads. The hub listens while at least one watch runs and closes
// its connection when the last one ends. Make one with NewHub; it is safe for concurrent use.
type Hub struct {
	pool *pgxpool.Pool
	cfg  HubConfig

	mu      sync.Mutex
	subs    map[string]map[*subscriber]struct{}
	rowSubs map[*subscriber]struct{} // the watches of task rows (WatchTasks)
	watches int
	gen     *generation // the running listener, nil while no watch runs
}

// subscriber is one watch as the hub sees it.
type subscriber struct {
	taskID    string        // the task watched; for a watch of task rows, "" means every task
	wake      chan struct{} // capacity 1: a pending wake-up
	announced atomic.Int64  // the highest seq a notification announced
	force     atomic.Bool   // read whatever was announced: the listener (re)connected
}

func (s *subscriber) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// generation is one run of the listener, from the first watch to the last.
type generation struct {
	cancel context.CancelFunc
	ready  chan struct{} // closed once the listener first listens
}

// NewHub returns a hub for the events of pool's database.
func NewHub(pool *pgxpool.Pool, cfg HubConfig) *Hub {
	if cfg.ReconnectDelay <= 0 {
		cfg.ReconnectDelay = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Connect == nil {
		cc := pool.Config().ConnConfig
		cfg.Connect = func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cc.Copy()) }
	}
	return &Hub{pool: pool, cfg: cfg, subs: map[string]map[*subscriber]struct{}{}, rowSubs: map[*subscriber]struct{}{}}
}

// Watches is the number of watches running on the hub.
func (h *Hub) Watches() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.watches
}

// subscribe adds s and starts the listener if none runs; the channel it returns is closed once
// the listener listens.
func (h *Hub) subscribe(s *subscriber, rows bool) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rows {
		h.rowSubs[s] = struct{}{}
	} else {
		set := h.subs[s.taskID]
		if set == nil {
			set = map[*subscriber]struct{}{}
			h.subs[s.taskID] = set
		}
		set[s] = struct{}{}
	}
	h.watches++
	if h.gen == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h.gen = &generation{cancel: cancel, ready: make(chan struct{})}
		go h.listen(ctx, h.gen)
	}
	return h.gen.ready
}

// unsubscribe removes s and stops the listener when s was the last watch.
func (h *Hub) unsubscribe(s *subscriber, rows bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rows {
		delete(h.rowSubs, s)
	} else {
		delete(h.subs[s.taskID], s)
		if len(h.subs[s.taskID]) == 0 {
			delete(h.subs, s.taskID)
		}
	}
	h.watches--
	if h.watches == 0 && h.gen != nil {
		h.gen.cancel()
		h.gen = nil
	}
}

// listen holds the listening connection until ctx ends, reconnecting after losses. After each
// connect it wakes every watch, which then reads past its cursor: notifications sent while
// nobody listened are lost.
func (h *Hub) listen(ctx context.Context, g *generation) {
	var readyOnce sync.Once
	for {
		err := h.listenOnce(ctx, func() {
			readyOnce.Do(func() { close(g.ready) })
			h.wakeAll()
		})
		if ctx.Err() != nil {
			return
		}
		h.cfg.Logger.WarnContext(ctx, "event listener lost its connection; reconnecting",
			"error", err, "delay", h.cfg.ReconnectDelay)
		t := time.NewTimer(h.cfg.ReconnectDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (h *Hub) listenOnce(ctx context.Context, listening func()) error {
	conn, err := h.cfg.Connect(ctx)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = conn.Close(cctx)
		cancel()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+EventsChannel+"; LISTEN "+TasksChannel); err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("waiting for notifications: %w", err)
		}
		h.dispatch(n)
	}
}

// dispatch wakes the watches of the task a notification names, or every watch when it cannot
// be parsed.
func (h *Hub) dispatch(n *pgconn.Notification) {
	if n.Channel == TasksChannel {
		h.mu.Lock()
		defer h.mu.Unlock()
		for s := range h.rowSubs {
			if s.taskID == "" || s.taskID == n.Payload {
				s.poke()
			}
		}
		return
	}
	if n.Channel != EventsChannel {
		return
	}
	var notice EventNotice
	if err := json.Unmarshal([]byte(n.Payload), &notice); err != nil {
		h.wakeAll()
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[notice.TaskID] {
		for {
			old := s.announced.Load()
			if notice.LastSeq <= old || s.announced.CompareAndSwap(old, notice.LastSeq) {
				break
			}
		}
		s.poke()
	}
}

func (h *Hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.subs {
		for s := range set {
			s.force.Store(true)
			s.poke()
		}
	}
	for s := range h.rowSubs {
		s.poke()
	}
}

// Watch calls fn with every event of cfg.TaskID after cfg.AfterSeq, in order, each exactly once,
// now and as they are appended, until ctx is done (it returns ctx.Err()) or fn returns an error
// (it returns that error, wrapped).
//
// The hub listens on EventsChannel before the watch first reads from its cursor, so nothing
// committed in between is missed; then the watch reads after its cursor whenever a notification
// announces events of its task past it, whenever the hub reconnects, and every
// cfg.PollInterval. Events of a task become visible in sequence order (see AppendEvents), so
// reading after the cursor never skips one. Each read borrows a connection of the pool for its
// own length. A read that loses its connection is tried again after the hub's ReconnectDelay
// until the log can be read or ctx ends; a read the server refuses ends the watch with its error.
func (h *Hub) Watch(ctx context.Context, cfg WatchConfig, fn func(Event) error) error {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("watching events: %w", err)
	}
	s := &subscriber{taskID: cfg.TaskID, wake: make(chan struct{}, 1)}
	ready := h.subscribe(s, false)
	defer h.unsubscribe(s, false)
	select {
	case <-ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	w := &watcher{cfg: cfg, fn: fn, cursor: cfg.AfterSeq}
	poll := time.NewTimer(cfg.PollInterval)
	defer poll.Stop()
	for {
		if err := w.catchUp(ctx, h.pool); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var de *deliveryError
			if errors.As(err, &de) || !ConnectionLost(err) {
				return fmt.Errorf("watching events of task %s: %w", cfg.TaskID, err)
			}
			h.cfg.Logger.WarnContext(ctx, "reading events lost its connection; reading again",
				"task_id", cfg.TaskID, "error", err, "delay", h.cfg.ReconnectDelay)
			if !sleepCtx(ctx, h.cfg.ReconnectDelay) {
				return ctx.Err()
			}
			continue
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-poll.C:
				waiting = false
			case <-s.wake:
				waiting = !s.force.Swap(false) && s.announced.Load() <= w.cursor
			}
		}
		poll.Reset(cfg.PollInterval)
	}
}

// sleepCtx waits for d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// TasksChannel is the Postgres notification channel on which every change of what a task's
// listing shows is announced (its recorded state, a turn's accounting, a permission request),
// with the task's id as payload. Triggers send it (migration 0014).
const TasksChannel = "drover_tasks"

// WatchTasks calls look once the hub listens on TasksChannel, then again after every change of
// the row of task taskID ("": of any task) it announces and after every reconnect (what changed
// meanwhile was not announced), until ctx is done (it returns ctx.Err()) or look fails (it
// returns that error). Changes announced while look runs make one more call, not one each, so a
// slow reader is never behind by more than one read.
func (h *Hub) WatchTasks(ctx context.Context, taskID string, look func(ctx context.Context) error) error {
	s := &subscriber{taskID: taskID, wake: make(chan struct{}, 1)}
	ready := h.subscribe(s, true)
	defer h.unsubscribe(s, true)
	select {
	case <-ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	for {
		if err := look(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("watching tasks: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.wake:
		}
	}
}

// watcher is the state of one Watch.
type watcher struct {
	cfg    WatchConfig
	fn     func(Event) error
	cursor int64 // the last delivered seq
}

// catchUp delivers every committed event after the cursor.
func (w *watcher) catchUp(ctx context.Context, db DB) error {
	for {
		events, err := ListEvents(ctx, db, w.cfg.TaskID, w.cursor, w.cfg.BatchSize)
		if err != nil {
			return fmt.Errorf("reading events: %w", err)
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

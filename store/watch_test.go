package store_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/internal/testkit/faultproxy"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
)

// liveness bounds how long a test waits for a delivery that must come; it is a hang guard,
// not a speed requirement.
const liveness = 30 * time.Second

// never is a poll interval long enough that a test only passes through notifications or
// reconnect catch-ups.
const never = time.Hour

// watch runs store.Watch in a goroutine. fn fails the watch on any event that is not the next
// one expected for the task (a gap, a duplicate, a reordering or another task's event) and
// forwards the rest to the events channel. Stop by cancelling; finished closes when Watch has
// returned err.
type watch struct {
	events   chan store.Event
	finished chan struct{}
	err      error
	cancel   context.CancelFunc
}

func startWatch(t *testing.T, pool *pgxpool.Pool, cfg store.WatchConfig) *watch {
	t.Helper()
	return startWatchWith(t, cfg, func(ctx context.Context, fn func(store.Event) error) error {
		return store.Watch(ctx, pool, cfg, fn)
	})
}

// startHubWatch is startWatch on a shared hub.
func startHubWatch(t *testing.T, hub *store.Hub, cfg store.WatchConfig) *watch {
	t.Helper()
	return startWatchWith(t, cfg, func(ctx context.Context, fn func(store.Event) error) error {
		return hub.Watch(ctx, cfg, fn)
	})
}

func startWatchWith(t *testing.T, cfg store.WatchConfig, run func(context.Context, func(store.Event) error) error) *watch {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	w := &watch{events: make(chan store.Event, 1000), finished: make(chan struct{}), cancel: cancel}
	next := cfg.AfterSeq + 1
	go func() {
		defer close(w.finished)
		w.err = run(ctx, func(e store.Event) error {
			if e.TaskID != cfg.TaskID || e.Seq != next {
				return fmt.Errorf("got event %s/%d, want %s/%d", e.TaskID, e.Seq, cfg.TaskID, next)
			}
			next++
			w.events <- e
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-w.finished
	})
	return w
}

// expect waits for the events with seqs from..to, in order.
func (w *watch) expect(t *testing.T, from, to int64) {
	t.Helper()
	timer := time.NewTimer(liveness)
	defer timer.Stop()
	for seq := from; seq <= to; seq++ {
		select {
		case e := <-w.events:
			if e.Seq != seq {
				t.Fatalf("delivered seq %d, want %d", e.Seq, seq)
			}
		case <-w.finished:
			t.Fatalf("watch ended before seq %d: %v", seq, w.err)
		case <-timer.C:
			t.Fatalf("seq %d not delivered within %v", seq, liveness)
		}
	}
}

// stop cancels the watch and returns its error.
func (w *watch) stop(t *testing.T) error {
	t.Helper()
	w.cancel()
	select {
	case <-w.finished:
		return w.err
	case <-time.After(liveness):
		t.Fatal("watch did not return after cancel")
		return nil
	}
}

func TestWatchDeliversBacklogThenLiveEventsExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	for range 3 {
		appendEvents(t, db, "t", ev("before", ""), ev("before", "")) // 1..6
	}
	appendEvents(t, db, "other", ev("noise", ""))

	w := startWatch(t, db, store.WatchConfig{TaskID: "t", PollInterval: never, BatchSize: 4})
	w.expect(t, 1, 6)

	// Live events arrive only through notifications (the poll interval is an hour), from
	// several concurrent appenders, interleaved with another task's.
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for range 5 {
				if _, _, err := store.AppendEvents(ctx, db, "t", []store.EventInput{ev("live", ""), ev("live", "")}); err != nil {
					errs <- err
					return
				}
				if _, _, err := store.AppendEvents(ctx, db, "other", []store.EventInput{ev("noise", "")}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		must(t, <-errs)
	}
	w.expect(t, 7, 46)

	if err := w.stop(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch after cancel = %v, want context.Canceled", err)
	}
	select {
	case e := <-w.events:
		t.Fatalf("extra delivery after the last event: %+v", e)
	default:
	}
}

func TestWatchStartsAfterCursor(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	appendEvents(t, db, "t", ev("a", ""), ev("b", ""), ev("c", ""), ev("d", ""))
	w := startWatch(t, db, store.WatchConfig{TaskID: "t", AfterSeq: 2, PollInterval: never})
	w.expect(t, 3, 4)
	appendEvents(t, db, "t", ev("e", ""))
	w.expect(t, 5, 5)
}

func TestWatchEndsWithCallbackError(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	appendEvents(t, db, "t", ev("a", ""), ev("b", ""), ev("c", ""))
	errStop := errors.New("stop here")
	var calls atomic.Int32
	err := store.WatchEvents(ctx, db, "t", 0, func(e store.Event) error {
		calls.Add(1)
		if e.Seq == 2 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || calls.Load() != 2 {
		t.Fatalf("WatchEvents = %v after %d calls, want errStop after 2", err, calls.Load())
	}
}

// appendQuietly appends n events the way AppendEvents does but without a notification, as if
// the notification were lost.
func appendQuietly(t *testing.T, db store.DB, taskID string, n int) {
	t.Helper()
	_, err := db.Exec(t.Context(), `
		WITH c AS (
			INSERT INTO task_event_counters AS c (task_id, last_seq) VALUES ($1, $2)
			ON CONFLICT (task_id) DO UPDATE SET last_seq = c.last_seq + excluded.last_seq
			RETURNING last_seq - $2 AS base)
		INSERT INTO task_events (task_id, seq, type)
		SELECT $1, c.base + g, 'quiet' FROM c, generate_series(1, $2) AS g`, taskID, int64(n))
	must(t, err)
}

func TestWatchPollsPastLostNotifications(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	w := startWatch(t, db, store.WatchConfig{TaskID: "t", PollInterval: 20 * time.Millisecond})
	appendEvents(t, db, "t", ev("loud", ""))
	w.expect(t, 1, 1) // the watcher has read past its start-up catch-up
	appendQuietly(t, db, "t", 3)
	w.expect(t, 2, 4)
	appendEvents(t, db, "t", ev("loud", ""))
	w.expect(t, 5, 5)
}

// The hub's listening connection is terminated: once it reconnects, every watch reads past its
// cursor and finds what was appended meanwhile, announced or not.
func TestWatchSurvivesTerminatedConnection(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	// The listener is tagged so its backend can be found, and its second connection waits until
	// the test lets it through: events appended meanwhile are only found by the catch-up after
	// reconnecting.
	cc := db.Config().ConnConfig.Copy()
	cc.RuntimeParams["application_name"] = "listen-under-test"
	var connects atomic.Int32
	letReconnect := make(chan struct{})
	hub := store.NewHub(db, store.HubConfig{
		ReconnectDelay: time.Millisecond,
		Logger:         testLogger(t, nil),
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			if connects.Add(1) > 1 {
				select {
				case <-letReconnect:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return pgx.ConnectConfig(ctx, cc)
		},
	})

	appendEvents(t, db, "t", ev("a", ""), ev("b", ""))
	w := startHubWatch(t, hub, store.WatchConfig{TaskID: "t", PollInterval: never})
	w.expect(t, 1, 2) // connected and caught up

	var killed int
	must(t, db.QueryRow(ctx, `
		SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = 'listen-under-test'`).Scan(&killed))
	if killed != 1 {
		t.Fatalf("terminated %d listener backends, want 1", killed)
	}
	appendQuietly(t, db, "t", 2)          // 3..4, never announced
	appendEvents(t, db, "t", ev("c", "")) // 5, announced while nobody listens
	close(letReconnect)

	w.expect(t, 3, 5)
	appendEvents(t, db, "t", ev("d", "")) // 6, announced to the new connection
	w.expect(t, 6, 6)
	if n := connects.Load(); n < 2 {
		t.Fatalf("listener connected %d times, want a reconnect", n)
	}
	if err := w.stop(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch after cancel = %v, want context.Canceled", err)
	}
}

// Many watches of many tasks share the hub's one connection, hold no connection of the pool
// while they wait, and each gets its own task's events; the listener closes after the last.
func TestHubSharesOneConnection(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	cc := db.Config().ConnConfig.Copy()
	cc.RuntimeParams["application_name"] = "hub-under-test"
	hub := store.NewHub(db, store.HubConfig{Connect: func(ctx context.Context) (*pgx.Conn, error) {
		return pgx.ConnectConfig(ctx, cc)
	}})
	const n = 40 // ten times the pool's connections
	var ws []*watch
	for i := range n {
		ws = append(ws, startHubWatch(t, hub, store.WatchConfig{TaskID: fmt.Sprintf("t%d", i%8), PollInterval: never}))
	}
	for i := range 8 {
		appendEvents(t, db, fmt.Sprintf("t%d", i), ev("x", ""))
	}
	for _, w := range ws {
		w.expect(t, 1, 1)
	}
	if got := hub.Watches(); got != n {
		t.Fatalf("hub counts %d watches, want %d", got, n)
	}
	// A watch hands its event on before it gives back the connection it read with: once each
	// has its event, every one of them goes back to waiting, and then none holds a connection.
	deadline := time.Now().Add(10 * time.Second)
	for held := db.Stat().AcquiredConns(); held != 0; held = db.Stat().AcquiredConns() {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiting watches hold %d connections of the pool, want 0", n, held)
		}
		time.Sleep(5 * time.Millisecond)
	}
	listeners := func() (c int) {
		must(t, db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'hub-under-test'`).Scan(&c))
		return c
	}
	if c := listeners(); c != 1 {
		t.Errorf("%d listening connections for %d watches, want 1", c, n)
	}
	for _, w := range ws {
		if err := w.stop(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("Watch after cancel = %v", err)
		}
	}
	for c := listeners(); c != 0; c = listeners() { // the listener closes; a hang here times out
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatchEndsOnDatabaseError(t *testing.T) {
	t.Parallel()
	pool := emptyPool(t, 2) // no schema: reading events fails on a live connection
	err := store.WatchEvents(t.Context(), pool, "t", 0, func(store.Event) error { return nil })
	if want := `relation "task_events" does not exist`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("WatchEvents on a database without the schema = %v, want an error mentioning %q", err, want)
	}
}

// A watch whose read loses its connection (a reset between the process and Postgres) reads
// again on a new one and goes on delivering, each event once, in order; it does not end.
func TestWatchOutlivesAConnectionReset(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	proxy := faultproxy.New(t, pgtest.AdminAddr())
	cfg := db.Config().Copy()
	host, port, err := net.SplitHostPort(proxy.Addr())
	must(t, err)
	p, err := strconv.Atoi(port)
	must(t, err)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
	cfg.MaxConns = 1
	proxied, err := pgxpool.NewWithConfig(t.Context(), cfg)
	must(t, err)
	t.Cleanup(proxied.Close)
	hub := store.NewHub(proxied, store.HubConfig{ReconnectDelay: 20 * time.Millisecond})
	w := startHubWatch(t, hub, store.WatchConfig{TaskID: "t", PollInterval: 50 * time.Millisecond})
	for i := range 3 {
		appendEvents(t, db, "t", ev("before", ""), ev("before", ""))
		w.expect(t, int64(2*i+1), int64(2*i+2))
		if n := proxy.Reset(); n == 0 {
			t.Fatal("no connection to reset")
		}
	}
	appendEvents(t, db, "t", ev("after", ""))
	w.expect(t, 7, 7)
}

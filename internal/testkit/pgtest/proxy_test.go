package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// proxied opens a fresh database with a table t(v int), a direct connection to it and a proxy
// in front of the server.
func proxied(t *testing.T) (dsn string, direct *pgx.Conn, p *Proxy) {
	t.Helper()
	dsn = NewDatabase(t)
	direct, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close(context.Background()) })
	if _, err := direct.Exec(t.Context(), "CREATE TABLE t (v int)"); err != nil {
		t.Fatal(err)
	}
	return dsn, direct, NewProxy(t, AdminAddr())
}

func count(t *testing.T, c *pgx.Conn) int {
	t.Helper()
	var n int
	if err := c.QueryRow(t.Context(), "SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// openTransactions counts the sessions of the database that sit inside a transaction.
func openTransactions(t *testing.T, c *pgx.Conn) int {
	t.Helper()
	var n int
	err := c.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProxyCutRefusesUntilRestore(t *testing.T) {
	t.Parallel()
	dsn, _, p := proxied(t)
	c, err := pgx.Connect(t.Context(), p.DSN(dsn))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	p.Cut()
	if err := c.Ping(t.Context()); err == nil {
		t.Fatal("a connection through a cut proxy still works")
	}
	if _, err := pgx.Connect(t.Context(), p.DSN(dsn)); err == nil {
		t.Fatal("a cut proxy let a new connection through")
	}
	if p.Refused() == 0 {
		t.Fatal("Refused() = 0 after a refused connection")
	}
	p.Restore()
	c2, err := pgx.Connect(t.Context(), p.DSN(dsn))
	if err != nil {
		t.Fatalf("after Restore: %v", err)
	}
	c2.Close(context.Background())
}

func TestProxyHoldBeforeKeepsTheCommitFromPostgres(t *testing.T) {
	t.Parallel()
	dsn, direct, p := proxied(t)
	c, err := pgx.Connect(t.Context(), p.DSN(dsn))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := c.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	held := p.HoldAt(SimpleQuery("commit"), HoldBefore)
	done := make(chan error, 1)
	go func() { done <- tx.Commit(context.Background()) }()
	<-held
	if n := openTransactions(t, direct); n != 1 {
		t.Fatalf("%d open transactions while the commit is held, want 1", n)
	}
	if count(t, direct) != 0 {
		t.Fatal("the held commit reached Postgres")
	}
	// The client goes away: the held commit is dropped and Postgres rolls back.
	_ = c.PgConn().Conn().Close()
	if err := <-done; err == nil {
		t.Fatal("the commit succeeded on a closed connection")
	}
	within(t, "the transaction to end", func() bool { return openTransactions(t, direct) == 0 })
	if count(t, direct) != 0 {
		t.Fatal("the dropped commit was applied")
	}
}

func TestProxyHoldRepliesHidesACommitThatHappened(t *testing.T) {
	t.Parallel()
	dsn, direct, p := proxied(t)
	c, err := pgx.Connect(t.Context(), p.DSN(dsn))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	tx, err := c.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	held := p.HoldAt(SimpleQuery("commit"), HoldReplies)
	done := make(chan error, 1)
	go func() { done <- tx.Commit(context.Background()) }()
	<-held
	within(t, "the commit to be applied", func() bool { return count(t, direct) == 1 })
	select {
	case err := <-done:
		t.Fatalf("the client learned of the commit while its answer was held (%v)", err)
	default:
	}
	p.Release()
	if err := <-done; err != nil {
		t.Fatalf("commit after Release: %v", err)
	}
}

func TestProxyHoldStopsEveryConnectionUntilRelease(t *testing.T) {
	t.Parallel()
	dsn, _, p := proxied(t)
	c, err := pgx.Connect(t.Context(), p.DSN(dsn))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	p.Hold()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := c.Ping(ctx); err == nil || ctx.Err() == nil {
		t.Fatalf("ping through a held proxy: %v, want it to wait past its deadline", err)
	}
	done := make(chan error, 1)
	go func() {
		c2, err := pgx.Connect(context.Background(), p.DSN(dsn))
		if err == nil {
			err = c2.Ping(context.Background())
			c2.Close(context.Background())
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a new connection went through a held proxy (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	p.Release()
	if err := <-done; err != nil {
		t.Fatalf("after Release: %v", err)
	}
}

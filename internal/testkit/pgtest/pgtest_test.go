package pgtest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestNewDatabaseCreatesAndDrops(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("inner", func(t *testing.T) {
		dsn := NewDatabase(t)
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		// Left open on purpose: the drop must force it closed.
		if err := conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
	})
	if len(name) <= len("drover_test_") || name[:len("drover_test_")] != "drover_test_" {
		t.Fatalf("database name %q, want drover_test_<random>", name)
	}
	admin, err := pgx.Connect(t.Context(), AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var exists bool
	if err := admin.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("database %s still exists after the test ended", name)
	}
}

func TestNewPoolIsMigrated(t *testing.T) {
	t.Parallel()
	pool := NewPool(t)
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("schema_migrations is empty")
	}
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u:p@h:5432/postgres?sslmode=disable": "postgres://u:p@h:5432/x?sslmode=disable",
		"postgresql://h/":               "postgresql://h/x",
		"host=h user=u dbname=postgres": "host=h user=u dbname=postgres dbname=x",
	} {
		got, err := withDatabase(in, "x")
		if err != nil || got != want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the message and ends the goroutine.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestUnreachableServerFailsWithInstructions(t *testing.T) {
	t.Parallel()
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		newDatabase(rec, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable")
	}()
	<-done
	if !strings.Contains(rec.msg, "cannot reach Postgres at 127.0.0.1:1") || !strings.Contains(rec.msg, "pg_ctlcluster 15 main start") {
		t.Fatalf("message = %q, want where and how to start Postgres", rec.msg)
	}
}

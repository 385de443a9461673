package temporalsrv

import (
	"bytes"
	"context"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/internal/testkit/testtools"
	"github.com/drover-run/drover/task"
)

func config(t *testing.T, log *syncBuffer) Config {
	t.Helper()
	srv, err := testtools.TemporalServerTools()
	if err != nil {
		t.Skip(err)
	}
	cli, err := testtools.TemporalBin()
	if err != nil {
		t.Skip(err)
	}
	return Config{Server: srv, CLI: cli, AdminURL: pgtest.AdminURL(), Log: log}
}

var statusKey = temporal.NewSearchAttributeKeyKeyword(task.SearchStatus)

// greet upserts one of drover's search attributes, which the server refuses unless the namespace
// step registered it.
func greet(ctx workflow.Context, name string) (string, error) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, statusKey.ValueSet("greeted")); err != nil {
		return "", err
	}
	return "hello " + name, nil
}

// TestRoundTrip runs a workflow on the server, checks that its history and visibility live in the
// server's Postgres databases and survive a crash of the server, then that Stop leaves nothing.
func TestRoundTrip(t *testing.T) {
	log := &syncBuffer{}
	cfg := config(t, log)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	srv, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("%v\nlog:\n%s", err, log.String())
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = srv.Stop()
		}
		if t.Failed() {
			t.Logf("server log:\n%s", log.String())
		}
	}()

	c, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: srv.Namespace(), Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := sdkworker.New(c, "round-trip", sdkworker.Options{})
	w.RegisterWorkflow(greet)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "greet-1", TaskQueue: "round-trip"}, greet, "drover")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil || got != "hello drover" {
		t.Fatalf("workflow result %q, %v", got, err)
	}
	w.Stop()

	// The history is in the persistence database, the execution with its attribute in visibility.
	var nodes int
	query(ctx, t, srv, srv.Database(), `SELECT count(*) FROM history_node n JOIN current_executions e ON n.tree_id = e.run_id
		WHERE e.workflow_id = 'greet-1'`, &nodes)
	if nodes == 0 {
		t.Fatal("no history node of greet-1 in the persistence database")
	}
	// Visibility is written asynchronously: wait for the listing by the upserted attribute.
	for {
		list, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: srv.Namespace(), Query: task.SearchStatus + " = 'greeted'"})
		if err != nil {
			t.Fatalf("listing by %s: %v", task.SearchStatus, err)
		}
		if len(list.GetExecutions()) == 1 && list.GetExecutions()[0].GetExecution().GetWorkflowId() == "greet-1" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("greet-1 never listed by %s: %v", task.SearchStatus, list.GetExecutions())
		case <-time.After(100 * time.Millisecond):
		}
	}
	var rows int
	query(ctx, t, srv, srv.VisibilityDatabase(), `SELECT count(*) FROM executions_visibility WHERE workflow_id = 'greet-1'`, &rows)
	if rows != 1 {
		t.Fatalf("%d visibility rows of greet-1 in the visibility database, want 1", rows)
	}

	// A crash loses nothing: the restarted server answers with the completed run's result.
	srv.Kill()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	c2, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: srv.Namespace(), Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	got = ""
	if err := c2.GetWorkflow(ctx, "greet-1", "").Get(ctx, &got); err != nil || got != "hello drover" {
		t.Fatalf("after a restart: workflow result %q, %v", got, err)
	}

	// Stop leaves no process, database or file behind.
	dir, pid := srv.dir, srv.cmd.Process.Pid
	stopped = true
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.Done():
	default:
		t.Fatal("the server still runs after Stop")
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("process %d still exists after Stop", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after Stop: %v", dir, err)
	}
	conn, err := pgx.Connect(ctx, cfg.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname IN ($1, $2)`,
		srv.Database(), srv.VisibilityDatabase()).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d of the server's databases left after Stop (%v)", left, err)
	}
}

// TestStartFailsClearly checks that a step that cannot run says which step failed and why.
func TestStartFailsClearly(t *testing.T) {
	log := &syncBuffer{}
	cfg := config(t, log)
	cfg.AdminURL = "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable" // nothing listens on port 1
	cfg.StartTimeout = 30 * time.Second
	_, err := Start(context.Background(), cfg)
	if err == nil {
		t.Fatal("Start succeeded without Postgres")
	}
	if !bytes.Contains([]byte(err.Error()), []byte("schema step")) {
		t.Fatalf("error does not name the schema step: %v", err)
	}
}

func query(ctx context.Context, t *testing.T, srv *Server, db, sql string, dest any) {
	t.Helper()
	url, err := srv.DatabaseURL(db)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, sql).Scan(dest); err != nil {
		t.Fatalf("%s on %s: %v", sql, db, err)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

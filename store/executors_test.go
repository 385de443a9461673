package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/drover-run/drover/internal/testkit/pgtest"

	"github.com/drover-run/drover/migrations"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// pidIsNull reads from the table whether the task's row has no pid (GetExecutor reports NULL as 0).
func pidIsNull(t *testing.T, db store.DB, taskID string) bool {
	t.Helper()
	var null bool
	must(t, db.QueryRow(t.Context(), `SELECT pid IS NULL FROM executors_running WHERE task_id = $1`, taskID).Scan(&null))
	return null
}

func getExecutor(t *testing.T, db store.DB, taskID string) store.Executor {
	t.Helper()
	e, err := store.GetExecutor(t.Context(), db, taskID)
	must(t, err)
	return e
}

func TestBeginAttemptClaimsRow(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	s := attempt("task-1", "a1", 1)
	s.AttemptToken, s.HostID, s.Workspace, s.Model = []byte("token-1"), "host-1", "/w/1", "m1"
	b := begin(t, db, s)
	if b.SessionID != "" || b.LastMessageUUID != "" || b.Turn.ResumeSessionID != "" || b.Turn.ResumeFromUUID != "" {
		t.Fatalf("resume point of a new task = %+v, want empty", b)
	}
	e := getExecutor(t, db, "task-1")
	if e.Status != store.ExecutorStarting || e.AttemptID != "a1" || !bytes.Equal(e.AttemptToken, []byte("token-1")) ||
		e.Turn != 1 || e.HostID != "host-1" || e.Workspace != "/w/1" || e.Model != "m1" || e.PID != 0 ||
		e.SessionID != "" || e.LastMessageUUID != "" || e.Error != "" {
		t.Fatalf("new claim = %+v", e)
	}
	if !pidIsNull(t, db, "task-1") {
		t.Fatal("a starting row has a pid")
	}

	// The process comes up: running with its pid; the resume point does not move.
	must(t, store.SetExecutorRunning(ctx, db, "task-1", "a1", 4242))
	e = getExecutor(t, db, "task-1")
	if e.Status != store.ExecutorRunning || e.PID != 4242 || e.SessionID != "" || e.LastMessageUUID != "" {
		t.Fatalf("after SetExecutorRunning = %+v", e)
	}
	commitTurn(t, db, "task-1", 1, "a1", "sess-1", "uuid-1", 0.5)

	// The next turn on another host, with the warm process of turn 1: running at once, every
	// field of the new attempt stored, the committed point kept and returned.
	s = attempt("task-1", "a2", 2)
	s.AttemptToken, s.HostID, s.Workspace, s.Model, s.PID = []byte("token-2"), "host-2", "/w/2", "m2", 4242
	b = begin(t, db, s)
	if b.SessionID != "sess-1" || b.LastMessageUUID != "uuid-1" ||
		b.Turn.ResumeSessionID != "sess-1" || b.Turn.ResumeFromUUID != "uuid-1" || b.PriorCostUSD != 0.5 {
		t.Fatalf("second claim = %+v, want resume point (sess-1, uuid-1) and prior cost 0.5", b)
	}
	e = getExecutor(t, db, "task-1")
	if e.Status != store.ExecutorRunning || e.AttemptID != "a2" || !bytes.Equal(e.AttemptToken, []byte("token-2")) ||
		e.Turn != 2 || e.HostID != "host-2" || e.Workspace != "/w/2" || e.Model != "m2" || e.PID != 4242 ||
		e.SessionID != "sess-1" || e.LastMessageUUID != "uuid-1" {
		t.Fatalf("claim with a warm process = %+v", e)
	}

	// It fails; the retry has no process yet: starting, no pid, the failure's error cleared, no
	// token when none is given.
	must(t, store.EndAttempt(ctx, db, store.AttemptEnd{TaskID: "task-1", AttemptID: "a2", Status: store.ExecutorFailed, Error: "exit status 1"}))
	b = begin(t, db, attempt("task-1", "a3", 2))
	if b.Turn.Attempts != 2 || b.Turn.ResumeFromUUID != "uuid-1" {
		t.Fatalf("retry of turn 2 = %+v", b.Turn)
	}
	e = getExecutor(t, db, "task-1")
	if e.Status != store.ExecutorStarting || e.AttemptID != "a3" || e.AttemptToken != nil || e.PID != 0 ||
		e.Error != "" || e.SessionID != "sess-1" || e.LastMessageUUID != "uuid-1" {
		t.Fatalf("retry claim = %+v", e)
	}
	if !pidIsNull(t, db, "task-1") {
		t.Fatal("the retry's starting row kept the warm process's pid")
	}
}

func TestStaleAttemptWritesNothing(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	begin(t, db, attempt("t", "a0", 1))
	commitTurn(t, db, "t", 1, "a0", "sess", "u1", 1)
	begin(t, db, attempt("t", "old", 2))
	must(t, store.SetExecutorRunning(ctx, db, "t", "old", 100))
	begin(t, db, attempt("t", "new", 2))
	must(t, store.SetExecutorRunning(ctx, db, "t", "new", 200))
	before := snapshot(t, db, "t")

	checks := map[string]error{
		"SetExecutorRunning": store.SetExecutorRunning(ctx, db, "t", "old", 101),
		"EndAttempt": store.EndAttempt(ctx, db, store.AttemptEnd{
			TaskID: "t", AttemptID: "old", Status: store.ExecutorFailed, Error: "boom", ForgetSession: true, AbandonTurn: 2,
		}),
		"EndAttempt stopped": store.EndAttempt(ctx, db, store.AttemptEnd{
			TaskID: "t", AttemptID: "old", Status: store.ExecutorStopped, Error: "cancelled",
		}),
	}
	applied, err := store.CommitTurn(ctx, db, store.TurnCommit{
		TaskID: "t", Turn: 2, AttemptID: "old", SessionID: "sess-old", LastMessageUUID: "u-old",
		Status: task.TurnCompleted, CostUSD: 9, InputTokens: 9,
	})
	if applied {
		t.Error("stale CommitTurn reported applied")
	}
	checks["CommitTurn"] = err
	for name, err := range checks {
		if !errors.Is(err, store.ErrStaleAttempt) {
			t.Errorf("%s by a stale attempt: err = %v, want ErrStaleAttempt", name, err)
		}
	}
	// The owner of a committed turn (a0, long replaced) cannot stop the row either.
	if stopped, err := store.MarkExecutorStopped(ctx, db, "t", "a0", "idle timeout"); err != nil || stopped {
		t.Errorf("MarkExecutorStopped by a stale attempt = %v, %v; want false, nil", stopped, err)
	}
	if got := snapshot(t, db, "t"); got != before {
		t.Fatalf("stale writes changed the rows:\nbefore %s\nafter  %s", before, got)
	}

	// The owner still can.
	must(t, store.EndAttempt(ctx, db, store.AttemptEnd{TaskID: "t", AttemptID: "new", Status: store.ExecutorFailed, Error: "exit status 1"}))
	e := getExecutor(t, db, "t")
	if e.Status != store.ExecutorFailed || e.Error != "exit status 1" || e.PID != 0 || e.AttemptID != "new" ||
		e.SessionID != "sess" || e.LastMessageUUID != "u1" {
		t.Fatalf("after EndAttempt failed = %+v, want failed, no pid, committed point kept", e)
	}
	if !pidIsNull(t, db, "t") {
		t.Fatal("a failed row kept its pid")
	}
}

func TestEndAttempt(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	begin(t, db, attempt("t", "a1", 1))
	commitTurn(t, db, "t", 1, "a1", "sess", "u1", 1)

	// Stopped on purpose: the resume point stands and the turn stays open.
	begin(t, db, attempt("t", "a2", 2))
	must(t, store.SetExecutorRunning(ctx, db, "t", "a2", 300))
	must(t, store.EndAttempt(ctx, db, store.AttemptEnd{TaskID: "t", AttemptID: "a2", Status: store.ExecutorStopped, Error: "cancelled"}))
	e := getExecutor(t, db, "t")
	if e.Status != store.ExecutorStopped || e.Error != "cancelled" || e.PID != 0 || e.SessionID != "sess" || e.LastMessageUUID != "u1" {
		t.Fatalf("after EndAttempt stopped = %+v", e)
	}
	if !pidIsNull(t, db, "t") {
		t.Fatal("a stopped row kept its pid")
	}
	if r := getTurn(t, db, "t", 2); r.Status != task.TurnRunning {
		t.Fatalf("EndAttempt without AbandonTurn closed the turn: %+v", r)
	}

	// The CLI refused the resume point: it is forgotten, so the next turn starts a new session.
	begin(t, db, attempt("t", "a3", 2))
	must(t, store.SetExecutorRunning(ctx, db, "t", "a3", 301))
	must(t, store.EndAttempt(ctx, db, store.AttemptEnd{
		TaskID: "t", AttemptID: "a3", Status: store.ExecutorFailed, Error: "resume rejected", ForgetSession: true, AbandonTurn: 2,
	}))
	e = getExecutor(t, db, "t")
	if e.Status != store.ExecutorFailed || e.Error != "resume rejected" || e.PID != 0 || e.SessionID != "" || e.LastMessageUUID != "" {
		t.Fatalf("after EndAttempt with ForgetSession = %+v, want failed with no resume point", e)
	}
	if r := getTurn(t, db, "t", 2); r.Status != task.TurnFailed || r.Error != "resume rejected" {
		t.Fatalf("abandoned turn = %+v", r)
	}
	b := begin(t, db, attempt("t", "a4", 3))
	if b.Turn.ResumeSessionID != "" || b.Turn.ResumeFromUUID != "" || b.SessionID != "" {
		t.Fatalf("turn after a forgotten session = %+v, want a new session", b)
	}

	// Refused: a status that is not an end, with nothing written.
	before := snapshot(t, db, "t")
	for _, status := range []store.ExecutorStatus{store.ExecutorIdle, store.ExecutorRunning, store.ExecutorStarting, "sleeping", ""} {
		err := store.EndAttempt(ctx, db, store.AttemptEnd{TaskID: "t", AttemptID: "a4", Status: status, ForgetSession: true, AbandonTurn: 3})
		if err == nil {
			t.Errorf("EndAttempt accepted status %q", status)
		}
	}
	for name, end := range map[string]store.AttemptEnd{
		"no task id":    {AttemptID: "a4", Status: store.ExecutorFailed},
		"no attempt id": {TaskID: "t", Status: store.ExecutorFailed},
	} {
		if err := store.EndAttempt(ctx, db, end); err == nil {
			t.Errorf("EndAttempt with %s succeeded", name)
		}
	}
	if got := snapshot(t, db, "t"); got != before {
		t.Fatalf("refused EndAttempts wrote:\nbefore %s\nafter  %s", before, got)
	}
	if err := store.EndAttempt(ctx, db, store.AttemptEnd{TaskID: "nope", AttemptID: "a", Status: store.ExecutorFailed}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("EndAttempt of an unknown task = %v, want ErrNotFound", err)
	}
}

func TestConcurrentBeginAttemptsLeaveOneOwner(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	begin(t, db, attempt("t", "a0", 1))
	commitTurn(t, db, "t", 1, "a0", "sess", "u1", 1)

	const n = 8
	var wg sync.WaitGroup
	begun := make([]store.AttemptBegun, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			s := attempt("t", fmt.Sprint("a-", i), 2)
			s.PID = 1000 + i
			begun[i], errs[i] = store.BeginAttempt(ctx, db, s)
		})
	}
	wg.Wait()
	var counts []int
	for i, err := range errs {
		if err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		r := begun[i].Turn
		if r.ResumeSessionID != "sess" || r.ResumeFromUUID != "u1" {
			t.Errorf("attempt %d resumes at (%q, %q), want (sess, u1)", i, r.ResumeSessionID, r.ResumeFromUUID)
		}
		counts = append(counts, r.Attempts)
	}
	// The attempts queued on each other: each saw its own count.
	slices.Sort(counts)
	for i, c := range counts {
		if c != i+1 {
			t.Fatalf("attempt counts seen = %v, want 1 … %d once each", counts, n)
		}
	}
	if r := getTurn(t, db, "t", 2); r.Attempts != n {
		t.Fatalf("turn 2 counts %d attempts, want %d", r.Attempts, n)
	}

	owner := getExecutor(t, db, "t")
	winners := 0
	for i := range n {
		id := fmt.Sprint("a-", i)
		if id == owner.AttemptID && owner.PID != 1000+i {
			t.Errorf("the owner %s has pid %d, want %d", id, owner.PID, 1000+i)
		}
		err := store.SetExecutorRunning(ctx, db, "t", id, 1)
		switch {
		case err == nil:
			winners++
			if id != owner.AttemptID {
				t.Errorf("%s could write but the owner is %s", id, owner.AttemptID)
			}
		case !errors.Is(err, store.ErrStaleAttempt):
			t.Errorf("%s: %v", id, err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d attempts could write, want exactly 1", winners)
	}
}

func TestMarkExecutorStopped(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	stop := func(attemptID string) bool {
		t.Helper()
		applied, err := store.MarkExecutorStopped(ctx, db, "t", attemptID, "idle timeout")
		must(t, err)
		return applied
	}

	begin(t, db, attempt("t", "a1", 1))
	before := snapshot(t, db, "t")
	if stop("a1") {
		t.Fatal("a starting row was stopped")
	}
	if got := snapshot(t, db, "t"); got != before {
		t.Fatalf("a refused stop wrote:\nbefore %s\nafter  %s", before, got)
	}
	must(t, store.SetExecutorRunning(ctx, db, "t", "a1", 77))
	if stop("a1") {
		t.Fatal("a running row was stopped")
	}
	if e := getExecutor(t, db, "t"); e.Status != store.ExecutorRunning || e.PID != 77 {
		t.Fatalf("a refused stop changed the running row: %+v", e)
	}
	commitTurn(t, db, "t", 1, "a1", "sess", "u1", 1)
	before = snapshot(t, db, "t")
	if stop("other") {
		t.Fatal("an idle row was stopped for an attempt that does not own it")
	}
	if got := snapshot(t, db, "t"); got != before {
		t.Fatalf("a refused stop wrote:\nbefore %s\nafter  %s", before, got)
	}

	if !stop("a1") {
		t.Fatal("the owner's idle row was not stopped")
	}
	e := getExecutor(t, db, "t")
	if e.Status != store.ExecutorStopped || e.PID != 0 || e.Error != "idle timeout" || e.AttemptID != "a1" ||
		e.SessionID != "sess" || e.LastMessageUUID != "u1" {
		t.Fatalf("stopped row = %+v, want stopped, no pid, resume point kept", e)
	}
	if !pidIsNull(t, db, "t") {
		t.Fatal("a stopped row kept its pid")
	}
	if stop("a1") {
		t.Fatal("a stopped row was stopped again")
	}
	if applied, err := store.MarkExecutorStopped(ctx, db, "nope", "a1", "x"); err != nil || applied {
		t.Fatalf("MarkExecutorStopped of an unknown task = %v, %v; want false, nil", applied, err)
	}

	// The next turn resumes where the stopped process left off.
	if b := begin(t, db, attempt("t", "a2", 2)); b.Turn.ResumeSessionID != "sess" || b.Turn.ResumeFromUUID != "u1" {
		t.Fatalf("turn after a stop = %+v, want resume at (sess, u1)", b.Turn)
	}
}

func TestListHostExecutors(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	for _, c := range []struct{ task, host string }{{"b", "host-1"}, {"a", "host-1"}, {"c", "host-2"}} {
		s := attempt(c.task, "a-"+c.task, 1)
		s.HostID = c.host
		begin(t, db, s)
	}
	tasks := func(host string) []string {
		t.Helper()
		es, err := store.ListHostExecutors(ctx, db, host)
		must(t, err)
		var ids []string
		for _, e := range es {
			if e.HostID != host {
				t.Errorf("executor of task %s on host %s listed for %s", e.TaskID, e.HostID, host)
			}
			ids = append(ids, e.TaskID)
		}
		return ids
	}
	if got := tasks("host-1"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("host-1 serves %v, want [a b]", got)
	}
	if got := tasks("host-2"); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("host-2 serves %v, want [c]", got)
	}
	if got := tasks("host-3"); len(got) != 0 {
		t.Fatalf("host-3 serves %v, want none", got)
	}

	// Task a's next attempt runs on host-2.
	s := attempt("a", "a-a-2", 1)
	s.HostID = "host-2"
	begin(t, db, s)
	if got := tasks("host-1"); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("host-1 serves %v after task a moved, want [b]", got)
	}
	if got := tasks("host-2"); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("host-2 serves %v after task a moved, want [a c]", got)
	}
}

func TestExecutorErrors(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	if _, err := store.GetExecutor(ctx, db, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetExecutor(unknown) = %v, want ErrNotFound", err)
	}
	if err := store.SetExecutorRunning(ctx, db, "nope", "a", 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetExecutorRunning(unknown) = %v, want ErrNotFound", err)
	}

	begin(t, db, attempt("t", "a", 1))
	before := snapshot(t, db, "t")
	bad := map[string]store.AttemptStart{
		"no attempt id": attempt("t", "", 1),
		"no task id":    attempt("", "b", 1),
		"turn 0":        attempt("t", "b", 0),
		"turn -1":       attempt("t", "b", -1),
	}
	for name, s := range bad {
		if _, err := store.BeginAttempt(ctx, db, s); err == nil {
			t.Errorf("BeginAttempt with %s succeeded", name)
		}
	}
	if got := snapshot(t, db, "t"); got != before {
		t.Fatalf("refused attempts changed the rows:\nbefore %s\nafter  %s", before, got)
	}
	if got := snapshot(t, db, ""); got != "[] []" {
		t.Fatalf("a refused attempt without a task id wrote rows: %s", got)
	}
}

// TestMigration0002KeepsCommittedResumePoint writes executor rows the way the first schema held
// them and checks that migrating keeps each task's committed resume point and what the renamed
// columns held.
func TestMigration0002KeepsCommittedResumePoint(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := emptyPool(t, 2)

	initial, err := fs.ReadFile(migrations.FS, "0001_initial.sql")
	must(t, err)
	applied, err := store.MigrateFS(ctx, pool, fstest.MapFS{"0001_initial.sql": {Data: initial}}, nil)
	must(t, err)
	if !slices.Equal(applied, []int{1}) {
		t.Fatalf("applied %v, want [1]", applied)
	}

	// "committed": its process ran past the committed point (session_id ahead of resume_token).
	// "uncommitted": a process ran but no turn ever committed.
	_, err = pool.Exec(ctx, `
		INSERT INTO executors_running (task_id, session_id, resume_token, last_message_uuid, status,
			resumable, execution_id, executor_id, pid, worktree_path, model, error_message, metadata)
		VALUES
			('committed', 'sess-running', 'sess-committed', 'u-committed', 'idle', true,
				'exec-1', 'host-1', 321, '/w/1', 'model-1', 'previous failure', '{"profile":"default"}'),
			('uncommitted', 'sess-uncommitted', '', '', 'failed', false,
				'exec-2', 'host-1', NULL, '/w/2', 'model-2', 'exit status 1', '{}')`)
	must(t, err)

	applied, err = store.Migrate(ctx, pool, nil)
	must(t, err)
	if len(applied) == 0 || applied[0] != 2 {
		t.Fatalf("migrating on applied %v, want versions from 2", applied)
	}

	e := getExecutor(t, pool, "committed")
	want := store.Executor{
		TaskID: "committed", SessionID: "sess-committed", LastMessageUUID: "u-committed", Status: store.ExecutorIdle,
		AttemptID: "exec-1", HostID: "host-1", PID: 321, Workspace: "/w/1", Model: "model-1", Error: "previous failure",
		CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
	}
	if fmt.Sprintf("%+v", e) != fmt.Sprintf("%+v", want) {
		t.Fatalf("migrated row:\n got %+v\nwant %+v", e, want)
	}
	e = getExecutor(t, pool, "uncommitted")
	want = store.Executor{
		TaskID: "uncommitted", Status: store.ExecutorFailed, AttemptID: "exec-2", HostID: "host-1",
		Workspace: "/w/2", Model: "model-2", Error: "exit status 1", CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
	}
	if fmt.Sprintf("%+v", e) != fmt.Sprintf("%+v", want) {
		t.Fatalf("migrated row without a commit (its running session must not become a resume point):\n got %+v\nwant %+v", e, want)
	}

	var gone []string
	must(t, pool.QueryRow(ctx, `
		SELECT coalesce(array_agg(column_name::text ORDER BY column_name), '{}') FROM information_schema.columns
		WHERE table_name = 'executors_running' AND column_name IN
			('resume_token', 'resumable', 'metadata', 'execution_id', 'executor_id', 'worktree_path', 'error_message')`).Scan(&gone))
	if len(gone) != 0 {
		t.Fatalf("old columns left after migrating: %v", gone)
	}

	// The migrated rows serve as before: found by host, resumed from, and owned by the new
	// attempt.
	es, err := store.ListHostExecutors(ctx, pool, "host-1")
	must(t, err)
	if len(es) != 2 || es[0].TaskID != "committed" || es[1].TaskID != "uncommitted" {
		t.Fatalf("host-1 serves %+v, want the two migrated rows", es)
	}
	b := begin(t, pool, attempt("committed", "a-new", 3))
	if b.Turn.ResumeSessionID != "sess-committed" || b.Turn.ResumeFromUUID != "u-committed" {
		t.Fatalf("first turn after migrating resumes at (%q, %q), want (sess-committed, u-committed)",
			b.Turn.ResumeSessionID, b.Turn.ResumeFromUUID)
	}
	if err := store.SetExecutorRunning(ctx, pool, "committed", "exec-1", 1); !errors.Is(err, store.ErrStaleAttempt) {
		t.Fatalf("the pre-migration owner wrote after a new claim: %v", err)
	}
}

// A straggler attempt of a turn the task has moved past cannot take the row from the attempt
// running the current turn.
func TestLateAttemptOfEarlierTurnKeepsCurrentOwner(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	begin(t, db, attempt("t", "a1", 1))
	commitTurn(t, db, "t", 1, "a1", "sess", "u1", 1)
	begin(t, db, attempt("t", "a2", 2))
	must(t, store.SetExecutorRunning(ctx, db, "t", "a2", 500))
	before := snapshot(t, db, "t")
	if _, err := store.BeginAttempt(ctx, db, attempt("t", "a1-late", 1)); !errors.Is(err, store.ErrStaleAttempt) {
		t.Fatalf("late attempt: err = %v, want ErrStaleAttempt", err)
	}
	if after := snapshot(t, db, "t"); after != before {
		t.Fatalf("the late attempt wrote:\nbefore %s\nafter  %s", before, after)
	}
	applied, err := store.CommitTurn(ctx, db, store.TurnCommit{TaskID: "t", Turn: 2, AttemptID: "a2",
		SessionID: "sess", LastMessageUUID: "u2", Status: task.TurnCompleted, CostUSD: 1})
	if err != nil || !applied {
		t.Fatalf("the current attempt's commit: applied=%v, err=%v", applied, err)
	}
}

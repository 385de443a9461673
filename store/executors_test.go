package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/drover-run/drover/internal/pgtest"
	"github.com/drover-run/drover/store"
)

func TestClaimExecutorKeepsResumePoint(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	e, err := store.ClaimExecutor(ctx, db, store.Claim{
		TaskID: "task-1", ExecutionID: "exec-a", ExecutorID: "host-1", WorktreePath: "/w/1", Model: "m1",
		Metadata: json.RawMessage(`{"profile":"default","keep":true}`),
	})
	must(t, err)
	if e.Status != store.ExecutorStarting || e.ExecutionID != "exec-a" || e.ExecutorID != "host-1" ||
		e.WorktreePath != "/w/1" || e.Model != "m1" || e.PID != 0 || e.Resumable {
		t.Fatalf("new claim = %+v", e)
	}
	if s, u := e.ResumePoint(); s != "" || u != "" {
		t.Fatalf("resume point of a new task = (%q, %q), want empty", s, u)
	}

	must(t, store.SetExecutorRunning(ctx, db, "task-1", "exec-a", 4242, "sess-1"))
	e, err = store.GetExecutor(ctx, db, "task-1")
	must(t, err)
	if e.Status != store.ExecutorRunning || e.PID != 4242 || e.SessionID != "sess-1" {
		t.Fatalf("after SetExecutorRunning = %+v", e)
	}
	if s, u := e.ResumePoint(); s != "" || u != "" {
		t.Fatalf("a running but uncommitted session moved the resume point to (%q, %q)", s, u)
	}

	beginTurn(t, db, "task-1", 1, "", "")
	commitTurn(t, db, "task-1", 1, "exec-a", "sess-1", "uuid-1", 0.5)

	e, err = store.ClaimExecutor(ctx, db, store.Claim{
		TaskID: "task-1", ExecutionID: "exec-b", ExecutorID: "host-2", WorktreePath: "/w/1", Model: "m2",
		Metadata: json.RawMessage(`{"profile":"fast"}`),
	})
	must(t, err)
	if s, u := e.ResumePoint(); s != "sess-1" || u != "uuid-1" {
		t.Fatalf("claim returned resume point (%q, %q), want (sess-1, uuid-1)", s, u)
	}
	if e.Status != store.ExecutorStarting || e.ExecutionID != "exec-b" || e.ExecutorID != "host-2" ||
		e.Model != "m2" || e.PID != 0 || e.SessionID != "sess-1" || !e.Resumable {
		t.Fatalf("re-claim = %+v", e)
	}
	var meta map[string]any
	must(t, json.Unmarshal(e.Metadata, &meta))
	if meta["profile"] != "fast" || meta["keep"] != true {
		t.Fatalf("metadata = %s, want profile replaced and keep kept", e.Metadata)
	}
}

func TestStaleExecutionChangesNothing(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	_, err := store.ClaimExecutor(ctx, db, store.Claim{TaskID: "t", ExecutionID: "old"})
	must(t, err)
	must(t, store.SetExecutorRunning(ctx, db, "t", "old", 100, "sess-old"))
	beginTurn(t, db, "t", 1, "", "")

	_, err = store.ClaimExecutor(ctx, db, store.Claim{TaskID: "t", ExecutionID: "new"})
	must(t, err)
	must(t, store.SetExecutorRunning(ctx, db, "t", "new", 200, "sess-new"))
	before, err := store.GetExecutor(ctx, db, "t")
	must(t, err)

	checks := map[string]error{
		"SetExecutorRunning": store.SetExecutorRunning(ctx, db, "t", "old", 101, "sess-x"),
		"MarkExecutor":       store.MarkExecutor(ctx, db, "t", "old", store.ExecutorFailed, "boom", false),
	}
	applied, err := store.CommitTurn(ctx, db, store.TurnCommit{
		TaskID: "t", Turn: 1, ExecutionID: "old", SessionID: "sess-old", LastMessageUUID: "u-old",
		Status: store.TurnCompleted, CostUSD: 9, InputTokens: 9,
	})
	if applied {
		t.Error("stale CommitTurn reported applied")
	}
	checks["CommitTurn"] = err
	for name, err := range checks {
		if !errors.Is(err, store.ErrStaleExecution) {
			t.Errorf("%s by a stale execution: err = %v, want ErrStaleExecution", name, err)
		}
	}

	after, err := store.GetExecutor(ctx, db, "t")
	must(t, err)
	if fmt.Sprintf("%+v", after) != fmt.Sprintf("%+v", before) {
		t.Fatalf("stale writes changed the executor row:\nbefore %+v\nafter  %+v", before, after)
	}
	turn, err := store.GetTurn(ctx, db, "t", 1)
	must(t, err)
	if turn.Finished() || turn.CostUSD != 0 || turn.InputTokens != 0 {
		t.Fatalf("stale commit changed the turn: %+v", turn)
	}

	// The owner still can.
	must(t, store.MarkExecutor(ctx, db, "t", "new", store.ExecutorFailed, "exit status 1", true))
	after, err = store.GetExecutor(ctx, db, "t")
	must(t, err)
	if after.Status != store.ExecutorFailed || after.ErrorMessage != "exit status 1" || !after.Resumable || after.PID != 0 {
		t.Fatalf("after MarkExecutor failed = %+v", after)
	}
}

func TestConcurrentClaimsLeaveOneOwner(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = store.ClaimExecutor(ctx, db, store.Claim{TaskID: "t", ExecutionID: fmt.Sprint("exec-", i)})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	owner, err := store.GetExecutor(ctx, db, "t")
	must(t, err)
	winners := 0
	for i := range n {
		err := store.SetExecutorRunning(ctx, db, "t", fmt.Sprint("exec-", i), 1, "")
		switch {
		case err == nil:
			winners++
			if fmt.Sprint("exec-", i) != owner.ExecutionID {
				t.Errorf("exec-%d could write but the owner is %s", i, owner.ExecutionID)
			}
		case !errors.Is(err, store.ErrStaleExecution):
			t.Errorf("exec-%d: %v", i, err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d executions could write, want exactly 1", winners)
	}
}

func TestExecutorErrors(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	if _, err := store.GetExecutor(ctx, db, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetExecutor(unknown) = %v, want ErrNotFound", err)
	}
	if err := store.SetExecutorRunning(ctx, db, "nope", "e", 1, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetExecutorRunning(unknown) = %v, want ErrNotFound", err)
	}
	_, err := store.ClaimExecutor(ctx, db, store.Claim{TaskID: "t", ExecutionID: "e"})
	must(t, err)
	if err := store.MarkExecutor(ctx, db, "t", "e", "sleeping", "", false); err == nil {
		t.Error("MarkExecutor accepted an unknown status")
	}
	if _, err := store.ClaimExecutor(ctx, db, store.Claim{TaskID: "t"}); err == nil {
		t.Error("ClaimExecutor accepted an empty execution id")
	}
	for _, bad := range []string{`null`, `[1]`, `"s"`, `{`} {
		if _, err := store.ClaimExecutor(ctx, db, store.Claim{TaskID: "t", ExecutionID: "e2", Metadata: json.RawMessage(bad)}); err == nil {
			t.Errorf("ClaimExecutor accepted metadata %s", bad)
		}
	}
	if e, err := store.GetExecutor(ctx, db, "t"); err != nil || e.ExecutionID != "e" {
		t.Errorf("refused claims changed the owner: %+v, %v", e, err)
	}
}

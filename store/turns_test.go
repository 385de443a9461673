package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/drover-run/drover/internal/pgtest"
	"github.com/drover-run/drover/store"
)

func beginTurn(t *testing.T, db store.DB, taskID string, turn int, resumeSession, resumeFrom string) store.TurnRecord {
	t.Helper()
	r, err := store.BeginTurn(t.Context(), db, store.TurnStart{
		TaskID: taskID, Turn: turn, Prompt: "prompt", PromptUUID: "prompt-uuid",
		ResumeSessionID: resumeSession, ResumeFromUUID: resumeFrom,
	})
	must(t, err)
	return r
}

func commitTurn(t *testing.T, db store.TxDB, taskID string, turn int, execID, session, last string, cost float64) {
	t.Helper()
	applied, err := store.CommitTurn(t.Context(), db, store.TurnCommit{
		TaskID: taskID, Turn: turn, ExecutionID: execID, SessionID: session, LastMessageUUID: last,
		Status: store.TurnCompleted, CostUSD: cost, InputTokens: 10, OutputTokens: 20,
	})
	must(t, err)
	if !applied {
		t.Fatalf("commit of turn %d not applied", turn)
	}
}

func TestTurnRetryResumesFromOriginalPointAndCountsOnce(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	// Turn 1 commits the resume point (sess, u1).
	_, err := store.ClaimExecutor(ctx, db, store.Claim{TaskID: "t", ExecutionID: "a1"})
	must(t, err)
	beginTurn(t, db, "t", 1, "", "")
	commitTurn(t, db, "t", 1, "a1", "sess", "u1", 0.125)

	// Turn 2, attempt 1: starts from (sess, u1), gets somewhere, crashes before committing.
	e, err := store.ClaimExecutor(ctx, db, store.Claim{TaskID: "t", ExecutionID: "a2"})
	must(t, err)
	s, u := e.ResumePoint()
	r := beginTurn(t, db, "t", 2, s, u)
	if r.Attempts != 1 || r.ResumeSessionID != "sess" || r.ResumeFromUUID != "u1" || r.Finished() {
		t.Fatalf("first attempt of turn 2 = %+v", r)
	}
	must(t, store.SetExecutorRunning(ctx, db, "t", "a2", 1, "sess"))

	// Attempt 2 asks with another resume point (as if it had read one a failed attempt left);
	// it must get the turn's original one.
	_, err = store.ClaimExecutor(ctx, db, store.Claim{TaskID: "t", ExecutionID: "a3"})
	must(t, err)
	r = beginTurn(t, db, "t", 2, "sess", "u-partial")
	if r.Attempts != 2 || r.ResumeSessionID != "sess" || r.ResumeFromUUID != "u1" {
		t.Fatalf("second attempt of turn 2 = %+v, want attempts 2 resuming at (sess, u1)", r)
	}

	commit := store.TurnCommit{
		TaskID: "t", Turn: 2, ExecutionID: "a3", SessionID: "sess", LastMessageUUID: "u2",
		ResultUUID: "res-2", Status: store.TurnCompleted, CostUSD: 0.25, InputTokens: 100,
		OutputTokens: 50, CacheReadTokens: 7, CacheCreationTokens: 3, DurationMS: 1200, NumTurns: 2,
	}
	applied, err := store.CommitTurn(ctx, db, commit)
	must(t, err)
	if !applied {
		t.Fatal("first commit of turn 2 not applied")
	}
	// The same commit again (a duplicate delivery), and one with other numbers: no-ops.
	applied, err = store.CommitTurn(ctx, db, commit)
	must(t, err)
	other := commit
	other.CostUSD, other.LastMessageUUID = 5, "u-other"
	applied2, err := store.CommitTurn(ctx, db, other)
	must(t, err)
	if applied || applied2 {
		t.Fatal("a second commit of turn 2 was applied")
	}

	e, err = store.GetExecutor(ctx, db, "t")
	must(t, err)
	if s, u := e.ResumePoint(); s != "sess" || u != "u2" || e.Status != store.ExecutorIdle || !e.Resumable {
		t.Fatalf("executor after commit = %+v, want idle at (sess, u2)", e)
	}
	r, err = store.GetTurn(ctx, db, "t", 2)
	must(t, err)
	if r.Status != store.TurnCompleted || r.CostUSD != 0.25 || r.InputTokens != 100 || r.OutputTokens != 50 ||
		r.CacheReadTokens != 7 || r.CacheCreationTokens != 3 || r.DurationMS != 1200 || r.NumTurns != 2 ||
		r.ResultUUID != "res-2" || r.LastMessageUUID != "u2" || r.FinishedAt.IsZero() || r.Attempts != 2 {
		t.Fatalf("turn 2 = %+v", r)
	}

	// An attempt that starts after the commit (its predecessor's result was lost) finds the
	// turn finished and unchanged.
	r = beginTurn(t, db, "t", 2, "sess", "u2")
	if !r.Finished() || r.Attempts != 2 || r.CostUSD != 0.25 || r.ResumeFromUUID != "u1" {
		t.Fatalf("BeginTurn on a finished turn = %+v, want it unchanged", r)
	}

	totals, err := store.TaskTotals(ctx, db, "t")
	must(t, err)
	want := store.Totals{Turns: 2, CostUSD: 0.375, InputTokens: 110, OutputTokens: 70, CacheReadTokens: 7, CacheCreationTokens: 3}
	if totals != want {
		t.Fatalf("totals = %+v, want %+v", totals, want)
	}
	turns, err := store.ListTurns(ctx, db, "t")
	must(t, err)
	if len(turns) != 2 || turns[0].Turn != 1 || turns[1].Turn != 2 {
		t.Fatalf("ListTurns = %+v", turns)
	}
}

func TestConcurrentCommitsCountOnce(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	_, err := store.ClaimExecutor(ctx, db, store.Claim{TaskID: "t", ExecutionID: "a"})
	must(t, err)
	beginTurn(t, db, "t", 1, "", "")

	const n = 8
	var wg sync.WaitGroup
	applied := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			applied[i], errs[i] = store.CommitTurn(ctx, db, store.TurnCommit{
				TaskID: "t", Turn: 1, ExecutionID: "a", SessionID: "s", LastMessageUUID: "u",
				Status: store.TurnCompleted, CostUSD: 1.5, OutputTokens: 10,
			})
		})
	}
	wg.Wait()
	count := 0
	for i := range n {
		must(t, errs[i])
		if applied[i] {
			count++
		}
	}
	if count != 1 {
		t.Fatalf("%d of %d concurrent commits applied, want 1", count, n)
	}
	totals, err := store.TaskTotals(ctx, db, "t")
	must(t, err)
	if totals.CostUSD != 1.5 || totals.OutputTokens != 10 {
		t.Fatalf("totals = %+v, want cost 1.5 and 10 output tokens", totals)
	}
}

func TestBeginTurnRefusesAnotherPrompt(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	beginTurn(t, db, "t", 1, "", "")
	_, err := store.BeginTurn(ctx, db, store.TurnStart{TaskID: "t", Turn: 1, Prompt: "other", PromptUUID: "other-uuid"})
	if err == nil {
		t.Fatal("BeginTurn accepted another prompt for a begun turn")
	}
	r, err := store.GetTurn(ctx, db, "t", 1)
	must(t, err)
	if r.Attempts != 1 || r.PromptUUID != "prompt-uuid" {
		t.Fatalf("refused BeginTurn changed the turn: %+v", r)
	}
}

func TestCommitUnknownTurnWritesNothing(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	_, err := store.ClaimExecutor(ctx, db, store.Claim{TaskID: "t", ExecutionID: "a"})
	must(t, err)
	_, err = store.CommitTurn(ctx, db, store.TurnCommit{
		TaskID: "t", Turn: 7, ExecutionID: "a", SessionID: "s", LastMessageUUID: "u", Status: store.TurnCompleted,
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("CommitTurn of a turn never begun = %v, want ErrNotFound", err)
	}
	e, err := store.GetExecutor(ctx, db, "t")
	must(t, err)
	if s, u := e.ResumePoint(); s != "" || u != "" || e.Status != store.ExecutorStarting {
		t.Fatalf("failed commit changed the executor: %+v", e)
	}
}

func TestCommitTurnJoinsCallerTransaction(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	_, err := store.ClaimExecutor(ctx, db, store.Claim{TaskID: "t", ExecutionID: "a"})
	must(t, err)
	beginTurn(t, db, "t", 1, "", "")

	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		commitTurn(t, tx, "t", 1, "a", "s", "u", 2)
		if _, _, err := store.AppendEvents(ctx, tx, "t", []store.EventInput{{Type: "complete"}}); err != nil {
			return err
		}
		return errors.New("roll back")
	})
	if err == nil || err.Error() != "roll back" {
		t.Fatalf("transaction err = %v", err)
	}
	r, err := store.GetTurn(ctx, db, "t", 1)
	must(t, err)
	events, err := store.ListEvents(ctx, db, "t", 0, 0)
	must(t, err)
	if r.Finished() || len(events) != 0 {
		t.Fatalf("rolled-back transaction left turn %+v and %d events", r, len(events))
	}
	commitTurn(t, db, "t", 1, "a", "s", "u", 2) // still committable once
}

func TestAbandonTurn(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	_, err := store.ClaimExecutor(ctx, db, store.Claim{TaskID: "t", ExecutionID: "a"})
	must(t, err)
	beginTurn(t, db, "t", 1, "", "")

	applied, err := store.AbandonTurn(ctx, db, "t", 1, "resume rejected")
	must(t, err)
	if !applied {
		t.Fatal("AbandonTurn of a running turn not applied")
	}
	applied, err = store.AbandonTurn(ctx, db, "t", 1, "again")
	must(t, err)
	committed, err2 := store.CommitTurn(ctx, db, store.TurnCommit{
		TaskID: "t", Turn: 1, ExecutionID: "a", Status: store.TurnCompleted, CostUSD: 3,
	})
	must(t, err2)
	if applied || committed {
		t.Fatalf("after abandoning: abandon again applied=%v, commit applied=%v; want both false", applied, committed)
	}
	r, err := store.GetTurn(ctx, db, "t", 1)
	must(t, err)
	if r.Status != store.TurnFailed || !r.IsError || r.Error != "resume rejected" || r.CostUSD != 0 {
		t.Fatalf("abandoned turn = %+v", r)
	}
	if _, err := store.AbandonTurn(ctx, db, "t", 9, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("AbandonTurn(unknown) = %v, want ErrNotFound", err)
	}
}

func TestAbandonEarlierTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	for turn := 1; turn <= 3; turn++ {
		if _, err := store.BeginTurn(ctx, pool, store.TurnStart{TaskID: "t", Turn: turn, Prompt: "p", PromptUUID: fmt.Sprintf("00000000-0000-4000-8000-00000000000%d", turn)}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := store.AbandonEarlierTurns(ctx, pool, "t", 3, "lost")
	if err != nil || n != 2 {
		t.Fatalf("abandoned %d, err %v; want 2", n, err)
	}
	for turn, want := range map[int]store.TurnStatus{1: store.TurnFailed, 2: store.TurnFailed, 3: store.TurnRunning} {
		r, err := store.GetTurn(ctx, pool, "t", turn)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != want || (want == store.TurnFailed && r.Error != "lost") {
			t.Errorf("turn %d: %s %q, want %s", turn, r.Status, r.Error, want)
		}
	}
}

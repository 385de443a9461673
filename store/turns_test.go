package store_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/drover-run/drover/internal/testkit/pgtest"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// promptUUID is the prompt uuid the tests give every attempt of a turn.
func promptUUID(turn int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", turn) }

// attempt returns the start of an attempt of a turn with the tests' prompt for that turn.
func attempt(taskID, attemptID string, turn int) store.AttemptStart {
	return store.AttemptStart{
		TaskID: taskID, AttemptID: attemptID, Turn: turn,
		Prompt: fmt.Sprint("prompt ", turn), PromptUUID: promptUUID(turn),
		LostTurnError: "lost with its worker",
	}
}

// begin begins the attempt and fails the test on error.
func begin(t *testing.T, db store.TxDB, s store.AttemptStart) store.AttemptBegun {
	t.Helper()
	b, err := store.BeginAttempt(t.Context(), db, s)
	must(t, err)
	return b
}

// commitTurn commits a completed turn on behalf of attemptID and fails the test unless it applied.
func commitTurn(t *testing.T, db store.TxDB, taskID string, turn int, attemptID, session, last string, cost float64) {
	t.Helper()
	applied, err := store.CommitTurn(t.Context(), db, store.TurnCommit{
		TaskID: taskID, Turn: turn, AttemptID: attemptID, SessionID: session, LastMessageUUID: last,
		Status: task.TurnCompleted, CostUSD: cost, InputTokens: 10, OutputTokens: 20,
	})
	must(t, err)
	if !applied {
		t.Fatalf("commit of turn %d not applied", turn)
	}
}

// snapshot returns the task's rows in executors_running and task_turns as the tables hold them,
// each with the xmin of its row version, so that a test can tell a call wrote nothing at all.
func snapshot(t *testing.T, db store.DB, taskID string) string {
	t.Helper()
	var s string
	must(t, db.QueryRow(t.Context(), `
		SELECT coalesce((SELECT jsonb_agg(jsonb_build_object('xmin', x.xmin::text, 'row', to_jsonb(x)))
				FROM executors_running x WHERE x.task_id = $1), '[]')::text
			|| ' ' ||
			coalesce((SELECT jsonb_agg(jsonb_build_object('xmin', r.xmin::text, 'row', to_jsonb(r)) ORDER BY r.turn)
				FROM task_turns r WHERE r.task_id = $1), '[]')::text`, taskID).Scan(&s))
	return s
}

func getTurn(t *testing.T, db store.DB, taskID string, turn int) store.TurnRecord {
	t.Helper()
	r, err := store.GetTurn(t.Context(), db, taskID, turn)
	must(t, err)
	return r
}

func TestBeginAttemptTakesResumePointFromRowOrFallback(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	// A task without an executor row (its rows were lost): the caller's view counts.
	s := attempt("lost-rows", "a1", 3)
	s.FallbackSessionID, s.FallbackMessageUUID = "sess-caller", "u-caller"
	b := begin(t, db, s)
	if b.Turn.ResumeSessionID != "sess-caller" || b.Turn.ResumeFromUUID != "u-caller" {
		t.Fatalf("turn of a task without a row resumes at (%q, %q), want the fallback (sess-caller, u-caller)",
			b.Turn.ResumeSessionID, b.Turn.ResumeFromUUID)
	}
	if b.SessionID != "" || b.LastMessageUUID != "" {
		t.Fatalf("a new row reports committed point (%q, %q), want none", b.SessionID, b.LastMessageUUID)
	}
	e, err := store.GetExecutor(ctx, db, "lost-rows")
	must(t, err)
	if e.SessionID != "" || e.LastMessageUUID != "" {
		t.Fatalf("the fallback was written to the executor row: %+v", e)
	}

	// A task whose row has a committed point: the row wins over the caller's view.
	begin(t, db, attempt("known", "a1", 1))
	commitTurn(t, db, "known", 1, "a1", "sess", "u1", 0.5)
	s = attempt("known", "a2", 2)
	s.FallbackSessionID, s.FallbackMessageUUID = "sess-stale", "u-stale"
	b = begin(t, db, s)
	if b.Turn.ResumeSessionID != "sess" || b.Turn.ResumeFromUUID != "u1" || b.SessionID != "sess" || b.LastMessageUUID != "u1" {
		t.Fatalf("attempt of a task with a committed point = %+v, want the row's (sess, u1)", b)
	}
	if b.PriorCostUSD != 0.5 {
		t.Fatalf("PriorCostUSD = %v, want 0.5", b.PriorCostUSD)
	}
}

func TestTurnRetryResumesFromOriginalPointAndCountsOnce(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	// Turn 1 commits the resume point (sess, u1).
	b := begin(t, db, attempt("t", "a1", 1))
	if b.PriorCostUSD != 0 || b.Turn.Attempts != 1 {
		t.Fatalf("first attempt of a new task = %+v", b)
	}
	commitTurn(t, db, "t", 1, "a1", "sess", "u1", 0.125)

	// Turn 2, attempt 1: starts from (sess, u1), gets its process up, and fails.
	b = begin(t, db, attempt("t", "a2", 2))
	r := b.Turn
	if r.Attempts != 1 || r.ResumeSessionID != "sess" || r.ResumeFromUUID != "u1" || r.Finished() ||
		r.Prompt != "prompt 2" || r.PromptUUID != promptUUID(2) || b.PriorCostUSD != 0.125 {
		t.Fatalf("first attempt of turn 2 = %+v", b)
	}
	must(t, store.SetExecutorRunning(ctx, db, "t", "a2", 1001))
	must(t, store.EndAttempt(ctx, db, store.AttemptEnd{TaskID: "t", AttemptID: "a2", Status: store.ExecutorFailed, Error: "exit status 1"}))

	// Attempt 2 offers another resume point (as if it had read one the failed attempt reached);
	// it must get the turn's original one.
	s := attempt("t", "a3", 2)
	s.FallbackSessionID, s.FallbackMessageUUID = "sess", "u-partial"
	b = begin(t, db, s)
	if r := b.Turn; r.Attempts != 2 || r.ResumeSessionID != "sess" || r.ResumeFromUUID != "u1" || r.Finished() {
		t.Fatalf("second attempt of turn 2 = %+v, want attempts 2 resuming at (sess, u1)", r)
	}

	commit := store.TurnCommit{
		TaskID: "t", Turn: 2, AttemptID: "a3", SessionID: "sess", LastMessageUUID: "u2",
		ResultUUID: "res-2", Status: task.TurnCompleted, CostUSD: 0.25, InputTokens: 100,
		OutputTokens: 50, CacheReadTokens: 7, CacheCreationTokens: 3, DurationMS: 1200, NumTurns: 2,
	}
	applied, err := store.CommitTurn(ctx, db, commit)
	must(t, err)
	if !applied {
		t.Fatal("first commit of turn 2 not applied")
	}
	afterCommit := snapshot(t, db, "t")
	// The same commit again (a duplicate delivery), and one with other numbers: no-ops.
	applied, err = store.CommitTurn(ctx, db, commit)
	must(t, err)
	other := commit
	other.CostUSD, other.LastMessageUUID, other.SessionID = 5, "u-other", "sess-other"
	applied2, err := store.CommitTurn(ctx, db, other)
	must(t, err)
	if applied || applied2 {
		t.Fatal("a second commit of turn 2 was applied")
	}
	if got := snapshot(t, db, "t"); got != afterCommit {
		t.Fatalf("a commit of a finished turn wrote:\nbefore %s\nafter  %s", afterCommit, got)
	}

	e, err := store.GetExecutor(ctx, db, "t")
	must(t, err)
	if e.SessionID != "sess" || e.LastMessageUUID != "u2" || e.Status != store.ExecutorIdle || e.Error != "" {
		t.Fatalf("executor after commit = %+v, want idle at (sess, u2)", e)
	}
	r = getTurn(t, db, "t", 2)
	if r.Status != task.TurnCompleted || r.CostUSD != 0.25 || r.InputTokens != 100 || r.OutputTokens != 50 ||
		r.CacheReadTokens != 7 || r.CacheCreationTokens != 3 || r.DurationMS != 1200 || r.NumTurns != 2 ||
		r.ResultUUID != "res-2" || r.LastMessageUUID != "u2" || r.FinishedAt.IsZero() || r.Attempts != 2 ||
		r.IsError || r.ResumeFromUUID != "u1" {
		t.Fatalf("turn 2 = %+v", r)
	}

	// An attempt that starts after the commit (its predecessor's answer was lost) finds the turn
	// finished and unchanged, the committed point, and the row idle again under its ownership.
	b = begin(t, db, attempt("t", "a4", 2))
	if r := b.Turn; !r.Finished() || r.Attempts != 2 || r.CostUSD != 0.25 || r.ResumeFromUUID != "u1" || r.LastMessageUUID != "u2" {
		t.Fatalf("attempt of a finished turn got %+v, want it unchanged", r)
	}
	if b.SessionID != "sess" || b.LastMessageUUID != "u2" || b.PriorCostUSD != 0.375 {
		t.Fatalf("attempt of a finished turn = %+v, want committed point (sess, u2) and prior cost 0.375", b)
	}
	e, err = store.GetExecutor(ctx, db, "t")
	must(t, err)
	if e.Status != store.ExecutorIdle || e.AttemptID != "a4" || e.SessionID != "sess" || e.LastMessageUUID != "u2" {
		t.Fatalf("executor after an attempt of a finished turn = %+v, want idle, owned by a4, at (sess, u2)", e)
	}

	totals, err := store.TaskTotals(ctx, db, "t")
	must(t, err)
	want := store.Totals{Turns: 2, CostUSD: 0.375, InputTokens: 110, OutputTokens: 70, CacheReadTokens: 7, CacheCreationTokens: 3}
	if totals != want {
		t.Fatalf("totals = %+v, want %+v", totals, want)
	}
	turns, err := store.ListTurns(ctx, db, "t")
	must(t, err)
	if len(turns) != 2 || turns[0].Turn != 1 || turns[1].Turn != 2 || turns[1] != r {
		t.Fatalf("ListTurns = %+v", turns)
	}
}

func TestRetryResumesFromOriginalPointWhenRowChanged(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	begin(t, db, attempt("t", "a1", 1))
	commitTurn(t, db, "t", 1, "a1", "sess", "u1", 1)
	begin(t, db, attempt("t", "a2", 2))

	// A failed attempt forgets the row's committed point without giving up the turn: the retry
	// still resumes where the turn's first attempt did.
	must(t, store.EndAttempt(ctx, db, store.AttemptEnd{
		TaskID: "t", AttemptID: "a2", Status: store.ExecutorFailed, Error: "x", ForgetSession: true,
	}))
	s := attempt("t", "a3", 2)
	s.FallbackSessionID, s.FallbackMessageUUID = "sess-other", "u-other"
	if b := begin(t, db, s); b.Turn.Attempts != 2 || b.Turn.ResumeSessionID != "sess" || b.Turn.ResumeFromUUID != "u1" {
		t.Fatalf("retry after the row forgot its point = %+v, want attempts 2 resuming at (sess, u1)", b.Turn)
	}

	// The executor row is lost altogether; the next retry offers another point, and still
	// resumes where the turn's first attempt did.
	_, err := db.Exec(ctx, `DELETE FROM executors_running WHERE task_id = $1`, "t")
	must(t, err)
	s = attempt("t", "a4", 2)
	s.FallbackSessionID, s.FallbackMessageUUID = "sess-caller", "u-caller"
	if b := begin(t, db, s); b.Turn.Attempts != 3 || b.Turn.ResumeSessionID != "sess" || b.Turn.ResumeFromUUID != "u1" {
		t.Fatalf("retry after the row was lost = %+v, want attempts 3 resuming at (sess, u1)", b.Turn)
	}
}

func TestCommitTurnMovesResumePoint(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	begin(t, db, attempt("t", "a1", 1))
	must(t, store.SetExecutorRunning(ctx, db, "t", "a1", 77))
	commitTurn(t, db, "t", 1, "a1", "s1", "u1", 1)
	e, err := store.GetExecutor(ctx, db, "t")
	must(t, err)
	// The process stays up for the next turn: its pid is kept.
	if e.Status != store.ExecutorIdle || e.SessionID != "s1" || e.LastMessageUUID != "u1" || e.PID != 77 {
		t.Fatalf("after committing turn 1: %+v, want idle with pid 77 at (s1, u1)", e)
	}

	// A commit that reports no session or message keeps the committed point. (The next attempt
	// comes without the warm process: the row forgets its pid.)
	b := begin(t, db, attempt("t", "a2", 2))
	if b.Turn.ResumeSessionID != "s1" || b.Turn.ResumeFromUUID != "u1" {
		t.Fatalf("turn 2 resumes at (%q, %q), want (s1, u1)", b.Turn.ResumeSessionID, b.Turn.ResumeFromUUID)
	}
	if e := getExecutor(t, db, "t"); e.Status != store.ExecutorStarting || e.PID != 0 || !pidIsNull(t, db, "t") {
		t.Fatalf("an attempt without a process left the row %+v, want starting with no pid", e)
	}
	commitTurn(t, db, "t", 2, "a2", "", "", 1)
	e, err = store.GetExecutor(ctx, db, "t")
	must(t, err)
	if e.Status != store.ExecutorIdle || e.SessionID != "s1" || e.LastMessageUUID != "u1" {
		t.Fatalf("after an empty commit: %+v, want idle at (s1, u1)", e)
	}

	begin(t, db, attempt("t", "a3", 3))
	commitTurn(t, db, "t", 3, "a3", "s2", "u3", 1)
	b = begin(t, db, attempt("t", "a4", 4))
	if b.Turn.ResumeSessionID != "s2" || b.Turn.ResumeFromUUID != "u3" || b.PriorCostUSD != 3 {
		t.Fatalf("turn 4 = %+v, want resume at (s2, u3) and prior cost 3", b)
	}
}

func TestConcurrentCommitsCountOnce(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	begin(t, db, attempt("t", "a", 1))

	const n = 8
	var wg sync.WaitGroup
	applied := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			applied[i], errs[i] = store.CommitTurn(ctx, db, store.TurnCommit{
				TaskID: "t", Turn: 1, AttemptID: "a", SessionID: "s", LastMessageUUID: "u",
				Status: task.TurnCompleted, CostUSD: 1.5, OutputTokens: 10,
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
	if totals.CostUSD != 1.5 || totals.OutputTokens != 10 || totals.Turns != 1 {
		t.Fatalf("totals = %+v, want one turn, cost 1.5 and 10 output tokens", totals)
	}
	e, err := store.GetExecutor(ctx, db, "t")
	must(t, err)
	if e.Status != store.ExecutorIdle || e.SessionID != "s" || e.LastMessageUUID != "u" {
		t.Fatalf("executor after the commits = %+v, want idle at (s, u)", e)
	}
}

func TestBeginAttemptRefusesAnotherPromptAndWritesNothing(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	// Turn 2's record exists with its own prompt (written directly: a stray record), and turn 1
	// is begun by attempt a1, with a process, so that turn 1 is an earlier turn left running
	// (which a successful attempt of turn 2 would close) and the row is a1's.
	first := attempt("t", "a0", 2)
	_, err := db.Exec(ctx, `INSERT INTO task_turns (task_id, turn, prompt, prompt_uuid) VALUES ($1, $2, $3, $4)`,
		first.TaskID, first.Turn, first.Prompt, first.PromptUUID)
	must(t, err)
	s := attempt("t", "a1", 1)
	s.AttemptToken, s.HostID, s.Model = []byte("tok-a1"), "host-1", "m1"
	begin(t, db, s)
	must(t, store.SetExecutorRunning(ctx, db, "t", "a1", 4242))
	before := snapshot(t, db, "t")

	other := attempt("t", "a2", 2)
	other.Prompt, other.PromptUUID = "another prompt", "ffffffff-0000-4000-8000-000000000002"
	other.HostID, other.PID = "host-2", 99
	_, err = store.BeginAttempt(ctx, db, other)
	if !errors.Is(err, store.ErrPromptMismatch) {
		t.Fatalf("BeginAttempt with another prompt uuid = %v, want ErrPromptMismatch", err)
	}
	if got := snapshot(t, db, "t"); got != before {
		t.Fatalf("a refused attempt wrote:\nbefore %s\nafter  %s", before, got)
	}

	// A finished turn too is refused to another prompt.
	commitTurn(t, db, "t", 1, "a1", "s", "u", 1)
	before = snapshot(t, db, "t")
	other = attempt("t", "a3", 1)
	other.PromptUUID = "ffffffff-0000-4000-8000-000000000001"
	if _, err := store.BeginAttempt(ctx, db, other); !errors.Is(err, store.ErrPromptMismatch) {
		t.Fatalf("BeginAttempt of a finished turn with another prompt uuid = %v, want ErrPromptMismatch", err)
	}
	if got := snapshot(t, db, "t"); got != before {
		t.Fatalf("a refused attempt of a finished turn wrote:\nbefore %s\nafter  %s", before, got)
	}
}

func TestBeginAttemptClosesLostTurns(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)

	begin(t, db, attempt("t", "a1", 1))
	commitTurn(t, db, "t", 1, "a1", "s", "u1", 1)
	// Turn 2 is begun and left running, and turn 3's record too (a stray record, written
	// directly: a straggler attempt of an earlier turn may not claim the row).
	if b := begin(t, db, attempt("t", "a3", 2)); b.LostTurns != 0 {
		t.Fatalf("turn 2 closed %d turns, want 0 (turn 1 is committed)", b.LostTurns)
	}
	third := attempt("t", "a2", 3)
	_, err := db.Exec(t.Context(), `INSERT INTO task_turns (task_id, turn, prompt, prompt_uuid) VALUES ($1, $2, $3, $4)`,
		third.TaskID, third.Turn, third.Prompt, third.PromptUUID)
	must(t, err)
	turn1 := getTurn(t, db, "t", 1)

	s := attempt("t", "a4", 4)
	s.LostTurnError = "the worker was lost"
	b := begin(t, db, s)
	if b.LostTurns != 2 {
		t.Fatalf("LostTurns = %d, want 2", b.LostTurns)
	}
	for _, turn := range []int{2, 3} {
		r := getTurn(t, db, "t", turn)
		if r.Status != task.TurnFailed || !r.IsError || r.Error != "the worker was lost" || r.FinishedAt.IsZero() || r.CostUSD != 0 {
			t.Errorf("lost turn %d = %+v, want failed with the lost-turn error", turn, r)
		}
	}
	if r := getTurn(t, db, "t", 1); r != turn1 {
		t.Errorf("a committed turn changed:\nbefore %+v\nafter  %+v", turn1, r)
	}
	if r := getTurn(t, db, "t", 4); r.Status != task.TurnRunning {
		t.Errorf("the new turn = %+v, want running", r)
	}
	if b := begin(t, db, attempt("t", "a5", 4)); b.LostTurns != 0 || b.Turn.Attempts != 2 {
		t.Fatalf("retry of turn 4 = %+v, want no lost turns and attempts 2", b)
	}
}

func TestEndAttemptAbandonsTurn(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	begin(t, db, attempt("t", "a1", 1))
	must(t, store.EndAttempt(ctx, db, store.AttemptEnd{
		TaskID: "t", AttemptID: "a1", Status: store.ExecutorFailed, Error: "resume rejected", AbandonTurn: 1,
	}))
	r := getTurn(t, db, "t", 1)
	if r.Status != task.TurnFailed || !r.IsError || r.Error != "resume rejected" || r.CostUSD != 0 || r.FinishedAt.IsZero() {
		t.Fatalf("abandoned turn = %+v", r)
	}

	// Abandoning it again leaves the record alone; a late commit is not applied and writes
	// nothing, the executor row included.
	must(t, store.EndAttempt(ctx, db, store.AttemptEnd{
		TaskID: "t", AttemptID: "a1", Status: store.ExecutorFailed, Error: "again", AbandonTurn: 1,
	}))
	if again := getTurn(t, db, "t", 1); again != r {
		t.Fatalf("abandoning a finished turn changed it:\nbefore %+v\nafter  %+v", r, again)
	}
	before := snapshot(t, db, "t")
	applied, err := store.CommitTurn(ctx, db, store.TurnCommit{
		TaskID: "t", Turn: 1, AttemptID: "a1", SessionID: "s", LastMessageUUID: "u", Status: task.TurnCompleted, CostUSD: 3,
	})
	must(t, err)
	if applied {
		t.Fatal("a commit of an abandoned turn was applied")
	}
	if got := snapshot(t, db, "t"); got != before {
		t.Fatalf("a commit of an abandoned turn wrote:\nbefore %s\nafter  %s", before, got)
	}

	// A committed turn is not abandoned.
	begin(t, db, attempt("t", "a2", 2))
	commitTurn(t, db, "t", 2, "a2", "s", "u2", 0.5)
	committed := getTurn(t, db, "t", 2)
	must(t, store.EndAttempt(ctx, db, store.AttemptEnd{
		TaskID: "t", AttemptID: "a2", Status: store.ExecutorFailed, Error: "late failure", AbandonTurn: 2,
	}))
	if r := getTurn(t, db, "t", 2); r != committed {
		t.Fatalf("abandoning a committed turn changed it:\nbefore %+v\nafter  %+v", committed, r)
	}

	// Without AbandonTurn the turn stays open for the next attempt.
	begin(t, db, attempt("t", "a3", 3))
	must(t, store.EndAttempt(ctx, db, store.AttemptEnd{TaskID: "t", AttemptID: "a3", Status: store.ExecutorFailed, Error: "x"}))
	if r := getTurn(t, db, "t", 3); r.Status != task.TurnRunning {
		t.Fatalf("a failed attempt closed its turn: %+v", r)
	}

	totals, err := store.TaskTotals(ctx, db, "t")
	must(t, err)
	if totals.Turns != 3 || totals.CostUSD != 0.5 {
		t.Fatalf("totals = %+v, want 3 turns costing 0.5", totals)
	}
}

func TestCommitUnknownTurnWritesNothing(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	begin(t, db, attempt("t", "a", 1))
	before := snapshot(t, db, "t")
	_, err := store.CommitTurn(ctx, db, store.TurnCommit{
		TaskID: "t", Turn: 7, AttemptID: "a", SessionID: "s", LastMessageUUID: "u", Status: task.TurnCompleted,
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("CommitTurn of a turn never begun = %v, want ErrNotFound", err)
	}
	if got := snapshot(t, db, "t"); got != before {
		t.Fatalf("a failed commit wrote:\nbefore %s\nafter  %s", before, got)
	}
}

func TestCommitTurnJoinsCallerTransaction(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	begin(t, db, attempt("t", "a", 1))
	before := snapshot(t, db, "t")

	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		commitTurn(t, tx, "t", 1, "a", "s", "u", 2)
		if _, _, err := store.AppendEvents(ctx, tx, "t", []store.EventInput{{Type: "complete"}}); err != nil {
			return err
		}
		return errors.New("roll back")
	})
	if err == nil || err.Error() != "roll back" {
		t.Fatalf("transaction err = %v", err)
	}
	events, err := store.ListEvents(ctx, db, "t", 0, 0)
	must(t, err)
	if got := snapshot(t, db, "t"); got != before || len(events) != 0 {
		t.Fatalf("rolled-back transaction left %d events and rows:\nbefore %s\nafter  %s", len(events), before, got)
	}
	commitTurn(t, db, "t", 1, "a", "s", "u", 2) // still committable once
	if totals, err := store.TaskTotals(ctx, db, "t"); err != nil || totals.CostUSD != 2 {
		t.Fatalf("totals = %+v, %v; want cost 2", totals, err)
	}
}

func TestTurnLookups(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	if _, err := store.GetTurn(ctx, db, "nope", 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetTurn(unknown) = %v, want ErrNotFound", err)
	}
	if turns, err := store.ListTurns(ctx, db, "nope"); err != nil || len(turns) != 0 {
		t.Errorf("ListTurns(unknown) = %+v, %v; want none", turns, err)
	}
	if totals, err := store.TaskTotals(ctx, db, "nope"); err != nil || totals != (store.Totals{}) {
		t.Errorf("TaskTotals(unknown) = %+v, %v; want zero", totals, err)
	}

	// Turns of other tasks are not counted.
	begin(t, db, attempt("other", "o", 1))
	commitTurn(t, db, "other", 1, "o", "s", "u", 9)
	begin(t, db, attempt("t", "a", 1))
	commitTurn(t, db, "t", 1, "a", "s", "u", 1)
	if b := begin(t, db, attempt("t", "b", 2)); b.PriorCostUSD != 1 {
		t.Fatalf("PriorCostUSD = %v, want 1 (the task's own turns only)", b.PriorCostUSD)
	}
	totals, err := store.TaskTotals(ctx, db, "t")
	must(t, err)
	if want := (store.Totals{Turns: 2, CostUSD: 1, InputTokens: 10, OutputTokens: 20}); totals != want {
		t.Fatalf("totals = %+v, want %+v (a running turn counts as begun, with no cost)", totals, want)
	}
}

func TestCommitTurnRefusesBadInput(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	begin(t, db, attempt("t", "a", 1))
	before := snapshot(t, db, "t")

	for name, c := range map[string]store.TurnCommit{
		"status running":  {TaskID: "t", Turn: 1, AttemptID: "a", Status: task.TurnRunning},
		"no status":       {TaskID: "t", Turn: 1, AttemptID: "a"},
		"unknown status":  {TaskID: "t", Turn: 1, AttemptID: "a", Status: "done"},
		"no attempt id":   {TaskID: "t", Turn: 1, Status: task.TurnCompleted},
		"no task id":      {Turn: 1, AttemptID: "a", Status: task.TurnCompleted},
		"unknown task id": {TaskID: "nope", Turn: 1, AttemptID: "a", Status: task.TurnCompleted},
	} {
		applied, err := store.CommitTurn(ctx, db, c)
		if err == nil || applied {
			t.Errorf("CommitTurn with %s = %v, %v; want an error", name, applied, err)
		}
	}
	if _, err := store.CommitTurn(ctx, db, store.TurnCommit{TaskID: "nope", Turn: 1, AttemptID: "a", Status: task.TurnCompleted}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CommitTurn of an unknown task = %v, want ErrNotFound", err)
	}
	if got := snapshot(t, db, "t"); got != before {
		t.Fatalf("refused commits wrote:\nbefore %s\nafter  %s", before, got)
	}
}

// TestCommitTurnRecordsTheCheckpoint: a managed task's checkpoint is stored with its turn and
// becomes the executor row's last committed one, which the next attempt's begin reads back; a
// retry of a turn that failed finds the same; a commit without one keeps it.
func TestCommitTurnRecordsTheCheckpoint(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	b := begin(t, db, attempt("t", "a1", 1))
	if b.Checkpoint != "" || b.CheckpointTurn != 0 {
		t.Fatalf("a new task begins at checkpoint (%q, %d), want none", b.Checkpoint, b.CheckpointTurn)
	}
	_, err := store.CommitTurn(ctx, db, store.TurnCommit{TaskID: "t", Turn: 1, AttemptID: "a1", SessionID: "s", LastMessageUUID: "u1",
		Status: task.TurnCompleted, Checkpoint: "c1"})
	must(t, err)
	rec, err := store.GetTurn(ctx, db, "t", 1)
	must(t, err)
	if rec.Checkpoint != "c1" {
		t.Errorf("turn 1 records checkpoint %q, want c1", rec.Checkpoint)
	}
	b = begin(t, db, attempt("t", "a2", 2))
	if b.Checkpoint != "c1" || b.CheckpointTurn != 1 {
		t.Fatalf("turn 2 begins at checkpoint (%q, %d), want (c1, 1)", b.Checkpoint, b.CheckpointTurn)
	}
	must(t, store.EndAttempt(ctx, db, store.AttemptEnd{TaskID: "t", AttemptID: "a2", Status: store.ExecutorFailed, Error: "x"}))
	b = begin(t, db, attempt("t", "a2b", 2))
	if b.Checkpoint != "c1" || b.CheckpointTurn != 1 {
		t.Fatalf("turn 2's retry begins at checkpoint (%q, %d), want (c1, 1)", b.Checkpoint, b.CheckpointTurn)
	}
	commitTurn(t, db, "t", 2, "a2b", "s", "u2", 1)
	if e := getExecutor(t, db, "t"); e.Checkpoint != "c1" || e.CheckpointTurn != 1 {
		t.Fatalf("a commit without a checkpoint left (%q, %d), want (c1, 1)", e.Checkpoint, e.CheckpointTurn)
	}
}

package store_test

import (
	"math"
	"testing"

	"github.com/drover-run/drover/internal/testkit/pgtest"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

func TestSpendCountsFailedAttemptsOnce(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	spend := func() store.Spend {
		t.Helper()
		s, err := store.TaskSpend(ctx, db, "t")
		must(t, err)
		return s
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
	cost := func(attemptID string, turn int, usd float64) {
		t.Helper()
		must(t, store.RecordAttemptCost(ctx, db, store.AttemptCost{TaskID: "t", AttemptID: attemptID, Turn: turn, CostUSD: usd}))
	}

	// Turn 1: attempt a1 is billed twice as it runs, then dies with its worker.
	begin(t, db, attempt("t", "a1", 1))
	cost("a1", 1, 0.01)
	cost("a1", 1, 0.03)
	cost("a1", 1, 0.02) // a stale write does not lower it
	near("failed, while a1 runs", spend().FailedAttemptsUSD, 0.03)

	// a2 retries the turn, is billed, and commits it: its cost becomes the turn's.
	begin(t, db, attempt("t", "a2", 1))
	cost("a2", 1, 0.05)
	commitTurn(t, db, "t", 1, "a2", "sess", "u1", 0.05)
	s := spend()
	near("committed", s.CommittedUSD, 0.05)
	near("failed", s.FailedAttemptsUSD, 0.03)
	near("billed", s.BilledUSD(), 0.08)

	// A second commit of the same turn changes nothing.
	applied, err := store.CommitTurn(ctx, db, store.TurnCommit{TaskID: "t", Turn: 1, AttemptID: "a2", SessionID: "sess",
		LastMessageUUID: "u1", Status: task.TurnCompleted, CostUSD: 0.05})
	must(t, err)
	if applied {
		t.Fatal("second commit applied")
	}
	near("billed after a second commit", spend().BilledUSD(), 0.08)
	near("another task", func() float64 {
		s, err := store.TaskSpend(ctx, db, "other")
		must(t, err)
		return s.BilledUSD()
	}(), 0)
}

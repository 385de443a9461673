package store_test

import (
	"errors"
	"testing"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// A rewind sets the executor row's resume point and checkpoint back to a completed turn's end,
// and the next attempt begins there; a running turn, a turn that did not complete and a task with
// no executor refuse it.
func TestRewindSetsTheCommittedPointBack(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	for turn, id := range []string{"a1", "a2", "a3"} {
		begin(t, db, attempt("t", id, turn+1))
		_, err := store.CommitTurn(ctx, db, store.TurnCommit{TaskID: "t", Turn: turn + 1, AttemptID: id, SessionID: "s",
			LastMessageUUID: "u" + id, Status: task.TurnCompleted, Checkpoint: "c" + id})
		must(t, err)
	}
	p, err := store.TurnEnd(ctx, db, "t", 1)
	must(t, err)
	if p != (store.RewindPoint{Turn: 1, SessionID: "s", LastMessageUUID: "ua1", Checkpoint: "ca1"}) {
		t.Fatalf("turn 1 ended at %+v", p)
	}
	must(t, store.Rewind(ctx, db, "t", p))
	b := begin(t, db, attempt("t", "a4", 4))
	if b.Turn.ResumeSessionID != "s" || b.Turn.ResumeFromUUID != "ua1" || b.Checkpoint != "ca1" || b.CheckpointTurn != 1 {
		t.Fatalf("turn 4 begins at %s/%s, checkpoint (%s, %d); want s/ua1, (ca1, 1)", b.Turn.ResumeSessionID, b.Turn.ResumeFromUUID, b.Checkpoint, b.CheckpointTurn)
	}
	if err := store.Rewind(ctx, db, "t", p); !errors.Is(err, store.ErrTurnRunning) {
		t.Errorf("a rewind while turn 4 runs: %v", err)
	}
	if _, err := store.TurnEnd(ctx, db, "t", 4); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the end of a running turn: %v", err)
	}
	if err := store.Rewind(ctx, db, "nobody", p); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a rewind of a task with no executor: %v", err)
	}
	// Turn 0: the start, a new session, the base.
	must(t, store.EndAttempt(ctx, db, store.AttemptEnd{TaskID: "t", AttemptID: "a4", Status: store.ExecutorFailed, Error: "x"}))
	zero, err := store.TurnEnd(ctx, db, "t", 0)
	must(t, err)
	must(t, store.Rewind(ctx, db, "t", zero))
	if e := getExecutor(t, db, "t"); e.SessionID != "" || e.LastMessageUUID != "" || e.Checkpoint != "" || e.CheckpointTurn != 0 {
		t.Fatalf("after a rewind to the start: %+v", e)
	}
}

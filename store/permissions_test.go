package store_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/pgtest"
	"github.com/drover-run/drover/store"
)

// ask records a pending request of a turn about a Bash command.
func ask(t *testing.T, db store.TxDB, taskID string, turn int, command string) store.PermissionRequest {
	t.Helper()
	input, _ := json.Marshal(map[string]string{"command": command})
	r, fresh, err := store.AskPermission(t.Context(), db, store.Ask{
		TaskID: taskID, RequestID: fmt.Sprintf("req-%d-%s", turn, command), Turn: turn, Attempt: 1,
		CLIRequestID: "cli-" + command, Kind: "tool", ToolName: "Bash", Input: input, InputHash: "hash-" + command,
		Summary: command, Deadline: time.Now().Add(time.Hour),
	})
	must(t, err)
	if !fresh {
		t.Fatalf("request about %q found an earlier one", command)
	}
	return r
}

// CancelTurnPermissions closes what one turn still has pending, and only that: not the other
// turns' requests, not another task's, not what was decided.
func TestCancelTurnPermissions(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	left := ask(t, db, "t1", 2, "echo left")
	decided := ask(t, db, "t1", 2, "echo decided")
	must(t, store.DecidePermission(ctx, db, "t1", decided.RequestID, store.Decision{Status: store.RequestAllowed, DecidedBy: "carol"}))
	otherTurn := ask(t, db, "t1", 3, "echo later")
	otherTask := ask(t, db, "t2", 2, "echo elsewhere")

	closed, err := store.CancelTurnPermissions(ctx, db, "t1", 2, "the turn ended")
	must(t, err)
	if len(closed) != 1 || closed[0].RequestID != left.RequestID || closed[0].Status != store.RequestCancelled {
		t.Fatalf("closed %+v, want only %s", closed, left.RequestID)
	}
	for id, want := range map[string]store.RequestStatus{
		left.RequestID: store.RequestCancelled, decided.RequestID: store.RequestAllowed, otherTurn.RequestID: store.RequestPending,
	} {
		r, err := store.GetPermission(ctx, db, "t1", id)
		must(t, err)
		if r.Status != want {
			t.Errorf("%s: %s, want %s", id, r.Status, want)
		}
	}
	if r, err := store.GetPermission(ctx, db, "t2", otherTask.RequestID); err != nil || r.Status != store.RequestPending {
		t.Errorf("another task's request: %+v, %v", r, err)
	}
	if r, err := store.GetPermission(ctx, db, "t1", left.RequestID); err != nil || r.DecisionReason != "the turn ended" || r.DecidedBy != "drover" {
		t.Errorf("the closed request: %+v, %v", r, err)
	}
	if _, err := store.CancelTurnPermissions(ctx, db, "t1", 0, "no turn"); err == nil {
		t.Error("turn 0 accepted")
	}
}

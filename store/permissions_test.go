package store_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/testkit/pgtest"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
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
	must(t, store.DecidePermission(ctx, db, "t1", decided.RequestID, store.Decision{Status: task.OutcomeAllowed, DecidedBy: "carol"}))
	otherTurn := ask(t, db, "t1", 3, "echo later")
	otherTask := ask(t, db, "t2", 2, "echo elsewhere")

	closed, err := store.CancelTurnPermissions(ctx, db, "t1", 2, "the turn ended")
	must(t, err)
	if len(closed) != 1 || closed[0].RequestID != left.RequestID || closed[0].Status != task.OutcomeCancelled {
		t.Fatalf("closed %+v, want only %s", closed, left.RequestID)
	}
	for id, want := range map[string]task.Outcome{
		left.RequestID: task.OutcomeCancelled, decided.RequestID: task.OutcomeAllowed, otherTurn.RequestID: task.OutcomePending,
	} {
		r, err := store.GetPermission(ctx, db, "t1", id)
		must(t, err)
		if r.Status != want {
			t.Errorf("%s: %s, want %s", id, r.Status, want)
		}
	}
	if r, err := store.GetPermission(ctx, db, "t2", otherTask.RequestID); err != nil || r.Status != task.OutcomePending {
		t.Errorf("another task's request: %+v, %v", r, err)
	}
	if r, err := store.GetPermission(ctx, db, "t1", left.RequestID); err != nil || r.DecisionReason != "the turn ended" || r.DecidedBy != "drover" {
		t.Errorf("the closed request: %+v, %v", r, err)
	}
	if _, err := store.CancelTurnPermissions(ctx, db, "t1", 0, "no turn"); err == nil {
		t.Error("turn 0 accepted")
	}
}

// askAs records an ask of attempt about a Bash command and returns the row and whether it is new.
func askAs(t *testing.T, db store.TxDB, attempt int, id, command string) (store.PermissionRequest, bool) {
	t.Helper()
	input, _ := json.Marshal(map[string]string{"command": command})
	r, fresh, err := store.AskPermission(t.Context(), db, store.Ask{
		TaskID: "t1", RequestID: id, Turn: 1, Attempt: attempt, CLIRequestID: "cli-" + id, Kind: "tool",
		ToolName: "Bash", Input: input, InputHash: "hash-" + command, Summary: command, Deadline: time.Now().Add(time.Hour),
	})
	must(t, err)
	return r, fresh
}

// A retry's n-th ask of a thing finds the n-th request an earlier attempt made about it, pending
// or decided; the same attempt asking again after an answer asks anew; what no attempt asked
// before is marked as asked again after a retry only when a retry asks it.
func TestAskPermissionAcrossAttempts(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	check := func(what string, r store.PermissionRequest, fresh bool, wantID string, wantFresh bool, want task.Outcome) {
		t.Helper()
		if r.RequestID != wantID || fresh != wantFresh || r.Status != want {
			t.Fatalf("%s: request %s (fresh %v, %s), want %s (fresh %v, %s)", what, r.RequestID, fresh, r.Status, wantID, wantFresh, want)
		}
	}
	r, fresh := askAs(t, db, 1, "a", "make test")
	check("the first ask", r, fresh, "a", true, task.OutcomePending)
	must(t, store.DecidePermission(ctx, db, "t1", "a", store.Decision{Status: task.OutcomeDenied, DecidedBy: "carol", Reason: "not now"}))
	r, fresh = askAs(t, db, 1, "b", "make test")
	check("the same attempt asking again after a denial", r, fresh, "b", true, task.OutcomePending)
	if r.Reasked {
		t.Error("a second ask in the same attempt is marked as asked again after a retry")
	}

	r, fresh = askAs(t, db, 2, "c", "make test")
	check("the retry's first ask", r, fresh, "a", false, task.OutcomeDenied)
	r, fresh = askAs(t, db, 2, "d", "make test")
	check("the retry's second ask", r, fresh, "b", false, task.OutcomePending)
	if r.Attempt != 2 || r.CLIRequestID != "cli-d" {
		t.Errorf("the pending request answers to attempt %d, CLI request %s; want 2, cli-d", r.Attempt, r.CLIRequestID)
	}
	must(t, store.DecidePermission(ctx, db, "t1", "b", store.Decision{Status: task.OutcomeAllowed, DecidedBy: "carol"}))

	r, fresh = askAs(t, db, 3, "e", "make test")
	check("a later retry's first ask", r, fresh, "a", false, task.OutcomeDenied)
	r, fresh = askAs(t, db, 3, "f", "make test")
	check("a later retry's second ask", r, fresh, "b", false, task.OutcomeAllowed)
	r, fresh = askAs(t, db, 3, "g", "make test")
	check("a third ask, beyond what earlier attempts asked", r, fresh, "g", true, task.OutcomePending)
	if r.Reasked {
		t.Error("an ask of something asked before is marked as asked again after a retry")
	}
	r, fresh = askAs(t, db, 3, "h", "make lint")
	check("a retry asking something new", r, fresh, "h", true, task.OutcomePending)
	if !r.Reasked {
		t.Error("something no attempt asked before, asked by a retry, is not marked")
	}
}

// A turn given to a host again counts its attempts anew: its first attempt, under the number an
// earlier attempt had, finds what that attempt asked, because it is another attempt (its id);
// the same attempt asking again asks anew.
func TestAskPermissionSameNumberOtherAttempt(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	input, _ := json.Marshal(map[string]string{"command": "make deploy"})
	askOf := func(attemptID, id string) (store.PermissionRequest, bool) {
		t.Helper()
		r, fresh, err := store.AskPermission(ctx, db, store.Ask{
			TaskID: "t1", RequestID: id, Turn: 1, Attempt: 1, AttemptID: attemptID, CLIRequestID: "cli-" + id, Kind: "tool",
			ToolName: "Bash", Input: input, InputHash: "hash-deploy", Summary: "make deploy", Deadline: time.Now().Add(time.Hour),
		})
		must(t, err)
		return r, fresh
	}
	if r, fresh := askOf("run/5/1", "a"); !fresh || r.RequestID != "a" {
		t.Fatalf("the first ask: %s, fresh %v", r.RequestID, fresh)
	}
	must(t, store.DecidePermission(ctx, db, "t1", "a", store.Decision{Status: task.OutcomeAllowed, DecidedBy: "carol"}))
	if r, fresh := askOf("run/11/1", "b"); fresh || r.RequestID != "a" || r.Status != task.OutcomeAllowed {
		t.Fatalf("the ask of the turn's next activity, attempt 1 again: %s (fresh %v, %s); want a, decided", r.RequestID, fresh, r.Status)
	}
	if r, fresh := askOf("run/11/1", "c"); !fresh || r.RequestID != "c" {
		t.Fatalf("the same attempt asking again: %s, fresh %v; want a new request", r.RequestID, fresh)
	}
}

package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/testkit/pgtest"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

func TestInstallationKeyIsMadeOnce(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	k1, err := store.InstallationKey(ctx, db)
	must(t, err)
	k2, err := store.InstallationKey(ctx, db)
	must(t, err)
	if len(k1) != 32 || !bytes.Equal(k1, k2) {
		t.Fatalf("keys %x and %x: want one key of 32 bytes", k1, k2)
	}
}

// An account nothing limits lets every turn go, and says whether the task has a wait to end.
func TestAccountCheckSaysWhetherTheTaskWaits(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	const acct = "acct-w"
	for i, want := range []bool{true, false} { // the first check makes the account's row
		g, err := store.CheckAccount(ctx, db, acct, "t1", time.Minute)
		must(t, err)
		if !g.Go || g.Probe || g.Waiting != want {
			t.Fatalf("check %d: %+v, want go, waiting %v", i, g, want)
		}
	}
	_, _, _, err := store.RecordWait(ctx, db, store.AccountWait{TaskID: "t1", Account: acct, Turn: 1, Reason: "concurrency"})
	must(t, err)
	if g, err := store.CheckAccount(ctx, db, acct, "t1", time.Minute); err != nil || !g.Go || !g.Waiting {
		t.Fatalf("a task that waited: %+v, %v; want go, waiting", g, err)
	}
	if g, err := store.CheckAccount(ctx, db, acct, "t2", time.Minute); err != nil || !g.Go || g.Waiting {
		t.Fatalf("another task: %+v, %v; want go, not waiting", g, err)
	}
}

// A usage limit holds every turn of the account until its reset; after it exactly one turn goes
// first, and the others wait until it got through; then the waiting tasks are named.
func TestAccountLimitLetsOneTurnProbeAfterTheReset(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	const acct = "acct-a"
	g, err := store.CheckAccount(ctx, db, acct, "t1", time.Minute)
	must(t, err)
	if !g.Go || g.Probe {
		t.Fatalf("fresh account: %+v, want go without probe", g)
	}
	reset := dbNow(t, db).Add(time.Hour)
	must(t, store.LimitAccount(ctx, db, store.AccountLimit{Account: acct, Reason: task.WaitUsageLimit, LimitType: "five_hour", ResetsAt: reset}))
	for _, id := range []string{"t1", "t2"} {
		g, err := store.CheckAccount(ctx, db, acct, id, time.Minute)
		must(t, err)
		if g.Go || !g.ResetsAt.Equal(reset) || g.Reason != task.WaitUsageLimit {
			t.Fatalf("%s before the reset: %+v, want held until %s", id, g, reset)
		}
		w := store.AccountWait{TaskID: id, Account: acct, Turn: 2, Reason: g.Reason, ResetsAt: g.ResetsAt}
		_, before, isNew, err := store.RecordWait(ctx, db, w)
		must(t, err)
		_, _, again, err := store.RecordWait(ctx, db, w)
		must(t, err)
		if !isNew || again || before != map[string]int{"t1": 0, "t2": 1}[id] {
			t.Fatalf("%s's wait: new %v, again new %v, %d waiting before", id, isNew, again, before)
		}
	}
	// A success of a turn that began before the limit lifts nothing.
	if w, err := store.AccountGotThrough(ctx, db, acct); err != nil || w != nil {
		t.Fatalf("got through before the reset: %v, %v", w, err)
	}
	// The reset passes, but the limit outlasts it.
	_, err = db.Exec(ctx, `UPDATE accounts SET blocked_until = now() - interval '1 second'`)
	must(t, err)
	first, err := store.CheckAccount(ctx, db, acct, "t2", time.Minute)
	must(t, err)
	second, err := store.CheckAccount(ctx, db, acct, "t1", time.Minute)
	must(t, err)
	if !first.Go || !first.Probe || second.Go || second.ProbeUntil.IsZero() {
		t.Fatalf("after the reset: first %+v, second %+v; want exactly one probe", first, second)
	}
	// The probe is refused again: a new reset holds everyone.
	reset2 := dbNow(t, db).Add(time.Hour)
	must(t, store.LimitAccount(ctx, db, store.AccountLimit{Account: acct, Reason: task.WaitUsageLimit, ResetsAt: reset2}))
	if g, _ := store.CheckAccount(ctx, db, acct, "t2", time.Minute); g.Go {
		t.Fatalf("after the probe was refused: %+v", g)
	}
	_, err = db.Exec(ctx, `UPDATE accounts SET blocked_until = now() - interval '1 second'`)
	must(t, err)
	if g, _ := store.CheckAccount(ctx, db, acct, "t1", time.Minute); !g.Probe {
		t.Fatalf("second reset: %+v, want a probe", g)
	}
	waiters, err := store.AccountGotThrough(ctx, db, acct)
	must(t, err)
	if len(waiters) != 2 || waiters[0].TaskID != "t1" {
		t.Fatalf("waiters told: %+v", waiters)
	}
	if g, _ := store.CheckAccount(ctx, db, acct, "t2", time.Minute); !g.Go || g.Probe {
		t.Fatalf("after the probe got through: %+v", g)
	}
	counts, err := store.TasksWaiting(ctx, db)
	must(t, err)
	if counts[string(task.WaitUsageLimit)] != 2 {
		t.Fatalf("tasks waiting: %v", counts)
	}
	if _, ok, err := store.EndWait(ctx, db, "t1"); !ok || err != nil {
		t.Fatalf("ending t1's wait: %v %v", ok, err)
	}
}

// A spend cap holds until an operator resumes the account; a usage limit met meanwhile does not
// replace it.
func TestSpendCapHoldsUntilResumed(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	const acct = "acct-b"
	must(t, store.LimitAccount(ctx, db, store.AccountLimit{Account: acct, Reason: task.WaitSpendCap, LimitType: "overage"}))
	must(t, store.LimitAccount(ctx, db, store.AccountLimit{Account: acct, Reason: task.WaitUsageLimit, ResetsAt: time.Now().Add(-time.Hour)}))
	g, err := store.CheckAccount(ctx, db, acct, "t1", time.Minute)
	must(t, err)
	if g.Go || g.Reason != task.WaitSpendCap {
		t.Fatalf("capped: %+v", g)
	}
	if w, _ := store.AccountGotThrough(ctx, db, acct); w != nil {
		t.Fatal("a spend cap lifted without an operator")
	}
	if _, err := store.ResumeAccount(ctx, db, "acct-unknown"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("resuming an unknown account: %v", err)
	}
	_, err = store.ResumeAccount(ctx, db, acct)
	must(t, err)
	if g, _ := store.CheckAccount(ctx, db, acct, "t1", time.Minute); !g.Go {
		t.Fatalf("resumed: %+v", g)
	}
}

// Slots: at most Max turns hold one; the others queue in order of arrival; a lease that is not
// renewed expires and its slot goes to the next in line.
func TestAccountSlotsQueueInOrderAndExpire(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	req := func(id string) store.SlotRequest {
		return store.SlotRequest{Account: "acct-c", TaskID: id, HostID: "h", Max: 2, Lease: time.Hour, QueueStale: time.Hour}
	}
	for i, want := range []int{0, 0, 1, 2, 3} {
		granted, pos, err := store.AcquireSlot(ctx, db, req(fmt.Sprint("t", i)))
		must(t, err)
		if granted != (want == 0) || pos != want {
			t.Fatalf("t%d: granted %v position %d, want position %d", i, granted, pos, want)
		}
	}
	// Asking again keeps the place.
	if _, pos, _ := store.AcquireSlot(ctx, db, req("t3")); pos != 2 {
		t.Fatalf("t3 asked again: position %d", pos)
	}
	next, err := store.ReleaseSlot(ctx, db, "acct-c", "t0", 2)
	must(t, err)
	if len(next) != 1 || next[0] != "t2" {
		t.Fatalf("after a release, next: %v", next)
	}
	if granted, _, _ := store.AcquireSlot(ctx, db, req("t3")); granted {
		t.Fatal("t3 jumped the queue")
	}
	if granted, _, _ := store.AcquireSlot(ctx, db, req("t2")); !granted {
		t.Fatal("t2 did not get the free slot")
	}
	// t1's host dies: its lease runs out.
	_, err = db.Exec(ctx, `UPDATE account_slots SET lease_until = now() - interval '1 second' WHERE task_id = 't1'`)
	must(t, err)
	if granted, _, _ := store.AcquireSlot(ctx, db, req("t3")); !granted {
		t.Fatal("an expired lease still holds its slot")
	}
	if err := store.RenewSlot(ctx, db, "acct-c", "t1", time.Hour); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("renewing an expired slot: %v", err)
	}
	a, err := store.GetAccount(ctx, db, "acct-c")
	if err == nil && (a.Running != 2 || a.Queued != 1) {
		t.Fatalf("account: %+v", a)
	}
}

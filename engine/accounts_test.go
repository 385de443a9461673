package engine_test

import (
	"testing"
	"time"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/fakecli"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// While its account is limited, a turn waits without starting the CLI (so without a request);
// once a turn of the account got through after the reset, the next one runs.
func TestLimitedAccountHoldsTheTurnBeforeTheCLI(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) { c.Reply("echo: " + p.Text) })
	})
	acct, err := r.eng.Account(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	if err := store.LimitAccount(r.ctx, r.db, store.AccountLimit{Account: acct, Reason: task.WaitUsageLimit, LimitType: "seven_day", ResetsAt: reset}); err != nil {
		t.Fatal(err)
	}
	_, e := r.run(r.req(1, 1, "go"))
	if e == nil || e.Type != task.ErrTypeAccountLimited || e.Wait == nil || !e.Wait.ResetsAt.Equal(reset) || e.Wait.RetryAt.Before(reset) {
		t.Fatalf("attempt on a limited account: %v (wait %+v); want AccountLimited until %s", e, e.Wait, reset)
	}
	if n := len(r.cli.Launches()); n != 0 {
		t.Fatalf("%d CLI processes started while the account was limited", n)
	}
	if _, err := r.db.Exec(r.ctx, `UPDATE accounts SET blocked_until = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if _, e := r.run(r.req(1, 2, "go")); e != nil {
		t.Fatalf("the first turn after the reset: %v", e)
	}
	a, err := store.GetAccount(r.ctx, r.db, acct)
	if err != nil || a.Reason != "" || a.Waiting != 0 {
		t.Fatalf("account after a turn got through: %+v, %v", a, err)
	}
}

// An account's slots: with AccountMaxConcurrentTurns 1, a second task's turn queues (AccountBusy
// with its position) while the first holds the slot.
func TestAccountSlotQueuesTheSecondTurn(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	r := newRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			<-release
			c.Reply("echo: " + p.Text)
		})
	}, func(cfg *engine.Config) { cfg.AccountMaxConcurrentTurns = 1 })
	first := r.req(1, 1, "first")
	done := make(chan *engine.Error, 1)
	go func() {
		_, e := r.run(first)
		done <- e
	}()
	r.waitAccountRunning(1) // the first turn took its slot
	second := r.otherTask(1)
	_, e := r.run(second)
	if e == nil || e.Type != task.ErrTypeAccountBusy || e.Wait == nil || e.Wait.Position != 1 {
		t.Fatalf("second turn: %v (wait %+v); want AccountBusy, first in the queue", e, e.Wait)
	}
	close(release)
	if e := <-done; e != nil {
		t.Fatal(e)
	}
	if _, e := r.run(second); e != nil {
		t.Fatalf("second turn once the slot is free: %v", e)
	}
}

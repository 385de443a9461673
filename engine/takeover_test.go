package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/testkit/fakecli"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// asksOnce is the script of a CLI that, on each prompt, asks about `make deploy` and replies once
// answered; prompts counts the prompts it read.
func asksOnce(got *answers, prompts *atomic.Int32) func(c *fakecli.CLI) {
	return func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			prompts.Add(1)
			c.Init()
			ask(c, got, "a1", "Bash", map[string]any{"command": "make deploy"})
			c.Reply("deployed")
		})
	}
}

// runAsync runs req in the background, with ctx.
func (r *rig) runAsync(ctx context.Context, req engine.Request) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := r.eng.RunTurn(ctx, req)
		done <- err
	}()
	return done
}

// waitAdopted waits until the second attempt records a CLI on the executor row, and checks that
// it is the first attempt's, the only one started.
func (r *rig) waitAdopted() {
	t := r.t
	t.Helper()
	var x store.Executor
	for x.AttemptID != "run/1/2" || x.PID == 0 {
		select {
		case <-r.ctx.Done():
			t.Fatalf("the second attempt recorded no CLI: %+v", x)
		case <-time.After(10 * time.Millisecond):
		}
		x, _ = store.GetExecutor(r.ctx, r.db, r.taskID)
	}
	if procs := r.cli.Procs(); len(procs) != 1 || x.PID != procs[0].Pid() || procs[0].Stopped() {
		t.Fatalf("the second attempt runs pid %d; %d CLIs started, the first stopped: %v", x.PID, len(procs), procs[0].Stopped())
	}
}

// checkTakenOver checks what a turn taken over leaves: one CLI started and one prompt read, the
// request asked once and decided once in the log, the turn's text once, its complete event the
// adopting attempt's, and the turn committed by it.
func (r *rig) checkTakenOver(prompts *atomic.Int32, got *answers, p store.PermissionRequest) {
	t := r.t
	t.Helper()
	if n := len(r.cli.Launches()); n != 1 {
		t.Errorf("%d CLIs started, want 1", n)
	}
	if n := prompts.Load(); n != 1 {
		t.Errorf("the CLI read %d prompts, want 1", n)
	}
	if a := got.of("a1"); a["behavior"] != "allow" {
		t.Errorf("the CLI's request was answered %+v, want allow", a)
	}
	var asked, decided, texts, completes int
	for _, ev := range r.events() {
		switch ev.Type {
		case events.TypePermissionRequest:
			asked++
		case events.TypePermissionDecision:
			decided++
			if ev.PendingID != p.RequestID {
				t.Errorf("decision on %s, want %s", ev.PendingID, p.RequestID)
			}
		case events.TypeMessageChunk:
			if ev.Text == "deployed" {
				texts++
			}
		case events.TypeComplete:
			completes++
		}
	}
	if asked != 1 || decided != 1 || completes != 1 {
		t.Errorf("the log holds %d requests, %d decisions, %d complete events; want 1 each", asked, decided, completes)
	}
	if texts == 0 {
		t.Errorf("the turn's text is not in the log")
	}
	x := r.executor()
	if x.AttemptID != "run/1/2" || x.LastMessageUUID == "" {
		t.Errorf("executor row %+v, want turn 1 committed by attempt 2", x)
	}
}

// A newer attempt of the running turn on the same host takes the running CLI over, with its
// pending request: the old attempt ends as superseded without stopping the CLI, the prompt is
// sent once, and the decision reaches the original request.
func TestNewerAttemptTakesTheRunningTurnOver(t *testing.T) {
	t.Parallel()
	got := &answers{}
	var prompts atomic.Int32
	r, _ := supervisedRig(t, asksOnce(got, &prompts))
	first := r.runAsync(r.ctx, r.supervisedReq(1, 1, task.Supervised))
	p := r.waitPending(1)
	second := r.runAsync(r.ctx, r.supervisedReq(1, 2, task.Supervised))
	err := <-first
	var e *engine.Error
	if !errors.As(err, &e) || e.Type != task.ErrTypeAttemptSuperseded {
		t.Fatalf("the first attempt ended with %v, want AttemptSuperseded", err)
	}
	r.waitAdopted()
	r.decide(p, task.OutcomeAllowed)
	if err := <-second; err != nil {
		t.Fatalf("the attempt that took the turn over: %v", err)
	}
	r.checkTakenOver(&prompts, got, p)
}

// An attempt that Temporal gives up (its heartbeat timed out) leaves its running turn for the
// retry, which takes it over; with no retry coming, the CLI is stopped after TakeoverWait.
func TestTurnLeftByALostHeartbeat(t *testing.T) {
	t.Parallel()
	lose := func(ctx context.Context) (context.Context, func()) {
		ctx, cancel := context.WithCancelCause(ctx)
		return ctx, func() {
			cancel(&engine.Error{Type: task.ErrTypeAttemptTimedOut, Err: engine.HeartbeatLost(errors.New("activity not found"))})
		}
	}
	t.Run("taken over", func(t *testing.T) {
		t.Parallel()
		got := &answers{}
		var prompts atomic.Int32
		r, _ := supervisedRig(t, asksOnce(got, &prompts))
		ctx, lost := lose(r.ctx)
		first := r.runAsync(ctx, r.supervisedReq(1, 1, task.Supervised))
		p := r.waitPending(1)
		lost()
		var e *engine.Error
		if err := <-first; !errors.As(err, &e) || e.Type != task.ErrTypeAttemptTimedOut {
			t.Fatalf("the first attempt ended with %v, want AttemptTimedOut", err)
		}
		// Decided while nobody runs the turn: the answer waits in the parked turn.
		r.decide(p, task.OutcomeAllowed)
		second := r.runAsync(r.ctx, r.supervisedReq(1, 2, task.Supervised))
		r.waitAdopted()
		if err := <-second; err != nil {
			t.Fatalf("the retry: %v", err)
		}
		r.checkTakenOver(&prompts, got, p)
	})
	t.Run("nobody takes it", func(t *testing.T) {
		t.Parallel()
		got := &answers{}
		var prompts atomic.Int32
		r, _ := supervisedRig(t, asksOnce(got, &prompts), func(c *engine.Config) {
			c.TakeoverWait = 300 * time.Millisecond
			c.AccountMaxConcurrentTurns = 1
		})
		ctx, lost := lose(r.ctx)
		first := r.runAsync(ctx, r.supervisedReq(1, 1, task.Supervised))
		r.waitPending(1)
		lost()
		<-first
		proc := r.cli.Procs()[0]
		select {
		case <-proc.Exited():
		case <-r.ctx.Done():
			t.Fatal("the CLI of a turn nobody took over was not stopped")
		}
		if !proc.Stopped() {
			t.Fatal("the CLI exited but was not stopped")
		}
		// The slot the parked turn kept for its taker is free again.
		r.waitAccountRunning(0)
		if _, e := r.run(r.otherTask(1)); e != nil {
			t.Fatalf("another task's turn once the parked turn was stopped: %v", e)
		}
	})
}

// A turn taken over runs on in the account's slot its first attempt held: with one slot,
// another task's turn queues while the adopting attempt runs it, and gets through once it ends.
func TestTakenOverTurnKeepsItsAccountSlot(t *testing.T) {
	t.Parallel()
	got := &answers{}
	var prompts atomic.Int32
	r, _ := supervisedRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			if p.Text != "other" {
				prompts.Add(1)
				ask(c, got, "a1", "Bash", map[string]any{"command": "make deploy"})
			}
			c.Reply("deployed")
		})
	}, func(c *engine.Config) { c.AccountMaxConcurrentTurns = 1 })
	first := r.runAsync(r.ctx, r.supervisedReq(1, 1, task.Supervised))
	p := r.waitPending(1)
	second := r.runAsync(r.ctx, r.supervisedReq(1, 2, task.Supervised))
	var e *engine.Error
	if err := <-first; !errors.As(err, &e) || e.Type != task.ErrTypeAttemptSuperseded {
		t.Fatalf("the first attempt ended with %v, want AttemptSuperseded", err)
	}
	r.waitAdopted()
	if _, e := r.run(r.otherTask(1)); e == nil || e.Type != task.ErrTypeAccountBusy {
		t.Fatalf("another task's turn while the taken-over turn runs: %v; want AccountBusy", e)
	}
	r.decide(p, task.OutcomeAllowed)
	if err := <-second; err != nil {
		t.Fatalf("the attempt that took the turn over: %v", err)
	}
	r.checkTakenOver(&prompts, got, p)
	r.waitAccountRunning(0)
	if _, e := r.run(r.otherTask(2)); e != nil {
		t.Fatalf("another task's turn once the taken-over turn ended: %v", e)
	}
}

// otherTask is turn 1 of another task than the rig's, attempt n, prompt "other".
func (r *rig) otherTask(attempt int) engine.Request {
	req := r.req(1, attempt, "other")
	req.TaskID = r.taskID + "-other"
	req.PromptUUID = promptUUID(req.TaskID, 1)
	req.AttemptID = fmt.Sprintf("run-other/1/%d", attempt)
	return req
}

// waitAccountRunning waits until n turns hold the slots of the host's account.
func (r *rig) waitAccountRunning(n int) {
	r.t.Helper()
	acct, err := r.eng.Account(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		a, err := store.GetAccount(r.ctx, r.db, acct)
		if err == nil && a.Running == n {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the account's running turns: %+v, %v; want %d", a, err, n)
		}
	}
}

// An attempt delivered twice (a poll's answer held by a silent link arrives after Temporal gave
// the task to another poll) runs once: the copy answers with the running attempt's answer.
func TestAttemptDeliveredTwiceRunsOnce(t *testing.T) {
	t.Parallel()
	got := &answers{}
	var prompts atomic.Int32
	r, _ := supervisedRig(t, asksOnce(got, &prompts))
	req := r.supervisedReq(1, 1, task.Supervised)
	first := r.runAsync(r.ctx, req)
	p := r.waitPending(1)
	copied := r.runAsync(r.ctx, req)
	r.decide(p, task.OutcomeAllowed)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-copied; err != nil {
		t.Fatalf("the copy: %v", err)
	}
	if n, m := len(r.cli.Launches()), prompts.Load(); n != 1 || m != 1 {
		t.Fatalf("%d CLIs started, %d prompts read; want 1 and 1", n, m)
	}
	if procs := r.cli.Procs(); procs[0].Stopped() {
		t.Fatal("the copy stopped the running CLI")
	}
}

package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/fakecli"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// turnResult is what one RunTurn call returned.
type turnResult struct {
	res task.RunTurnResult
	err *engine.Error
}

// start runs req in the background and waits until its CLI runs the turn.
func (r *rig) start(req engine.Request) <-chan turnResult {
	r.t.Helper()
	done := make(chan turnResult, 1)
	go func() {
		res, err := r.eng.RunTurn(r.ctx, req)
		if err != nil {
			done <- turnResult{res, engine.AsError(err, "")}
			return
		}
		done <- turnResult{res: res}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if x, err := store.GetExecutor(r.ctx, r.db, r.taskID); err == nil && x.Status == store.ExecutorRunning {
			return done
		}
		if time.Now().After(deadline) {
			r.t.Fatal("the turn never started running")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// within returns what ch yields, failing the test when it yields nothing for 30 s.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: nothing after 30 s", what)
		var zero T
		return zero
	}
}

// drainInBackground calls Drain and returns its count once it returns; it waits until the
// engine says it drains.
func (r *rig) drainInBackground(timeout time.Duration) <-chan int {
	r.t.Helper()
	stopped := make(chan int, 1)
	go func() { stopped <- r.eng.Drain(r.ctx, timeout) }()
	for !r.eng.Draining() {
		time.Sleep(time.Millisecond)
	}
	return stopped
}

// A turn running when the drain begins may finish within the drain timeout: it commits, and
// Drain returns once it has, having stopped nothing.
func TestDrainLetsARunningTurnFinish(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	r := newRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			c.Text("m", "working")
			<-release
			c.Result("done", fakecli.Usage{})
		})
	})
	done := r.start(r.req(1, 1, "go"))
	stopped := r.drainInBackground(time.Minute)

	select {
	case n := <-stopped:
		t.Fatalf("Drain returned %d while a turn ran", n)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	got := within(t, done, "the turn")
	if got.err != nil || got.res.Status != task.TurnCompleted {
		t.Fatalf("the running turn ended with %+v, %v; want it completed", got.res, got.err)
	}
	if n := within(t, stopped, "Drain"); n != 0 {
		t.Fatalf("Drain stopped %d turns, want 0", n)
	}
	if rec := r.turn(1); !rec.Finished() || rec.Status != task.TurnCompleted {
		t.Fatalf("turn record = %+v, want committed", rec)
	}
	if procs := r.cli.Procs(); len(procs) != 1 || procs[0].Stopped() {
		t.Fatal("the CLI of a turn that finished in time was stopped by the drain")
	}
}

// A turn still running at the drain timeout is stopped as WorkerStopping, its CLI with it; the
// turn stays open for the host that takes it over.
func TestDrainStopsTurnsPastItsTimeout(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) {
			c.Init()
			c.Text("m", "working")
			c.Hang()
		})
	})
	done := r.start(r.req(1, 2, "go"))
	stopped := r.drainInBackground(200 * time.Millisecond)

	got := within(t, done, "the turn")
	if got.err == nil || got.err.Type != task.ErrTypeWorkerStopping {
		t.Fatalf("the turn ended with %+v, %v; want %s", got.res, got.err, task.ErrTypeWorkerStopping)
	}
	if n := within(t, stopped, "Drain"); n != 1 {
		t.Fatalf("Drain stopped %d turns, want 1", n)
	}
	procs := r.cli.Procs()
	if len(procs) != 1 || !procs[0].Stopped() {
		t.Fatal("the turn's CLI was not stopped")
	}
	select {
	case <-procs[0].Exited():
	default:
		t.Fatal("the turn's CLI still runs after Drain returned")
	}
	if x := r.executor(); x.Status != store.ExecutorStopped || x.AttemptID != "run/1/2" || x.PID != 0 {
		t.Fatalf("executor row = %+v, want the attempt stopped without a process", x)
	}
	if rec := r.turn(1); rec.Finished() {
		t.Fatalf("turn record = %+v, want it left open for the next host", rec)
	}
}

// A turn that reaches a draining host is refused at once as WorkerStopping: no CLI starts and
// nothing is written, so the turn is whole for the host that takes it.
func TestDrainingHostRefusesNewTurns(t *testing.T) {
	t.Parallel()
	r := newRig(t, reply)
	if n := r.eng.Drain(r.ctx, time.Minute); n != 0 {
		t.Fatalf("Drain of an idle host stopped %d turns", n)
	}
	if !r.eng.Draining() {
		t.Fatal("Draining() is false after Drain")
	}
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	_, err := r.eng.RunTurn(ctx, r.req(1, 1, "go"))
	if e := engine.AsError(err, ""); e == nil || e.Type != task.ErrTypeWorkerStopping {
		t.Fatalf("RunTurn on a draining host = %v, want %s", err, task.ErrTypeWorkerStopping)
	}
	if ctx.Err() != nil {
		t.Fatal("RunTurn waited instead of refusing at once")
	}
	if n := len(r.cli.Launches()); n != 0 {
		t.Fatalf("%d CLIs launched on a draining host", n)
	}
	r.noRow()
}

package engine_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/fakecli"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// A host's CLI processes, running a turn, idle or still being stopped, never number more than
// MaxConcurrentTurns + MaxIdle: a new one waits until an idle one, stopped to make room, has exited. The
// fake CLIs here take a while to exit once their input closes, as the real one does.
func TestCLIProcessesStayWithinTheHostsLimits(t *testing.T) {
	t.Parallel()
	var (
		mu             sync.Mutex
		alive, most    int
		launcher       *fakecli.Launcher
		slowExit       = 300 * time.Millisecond
		maxTurns, idle = 1, 1
	)
	r := newRig(t, func(c *fakecli.CLI) {
		mu.Lock()
		alive++
		most = max(most, alive)
		mu.Unlock()
		defer func() {
			mu.Lock()
			alive--
			mu.Unlock()
		}()
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) { c.Reply("echo: " + p.Text) })
		time.Sleep(slowExit)
	}, func(cfg *engine.Config) {
		cfg.MaxConcurrentTurns, cfg.MaxIdle = maxTurns, idle
		cfg.StopTimeout = 5 * slowExit // stopping waits for the exit, never kills
	})
	launcher = r.cli
	for i := range 4 {
		req := r.req(1, 1, fmt.Sprintf("task %d", i))
		req.TaskID = fmt.Sprintf("%s-%d", r.taskID, i)
		req.PromptUUID = promptUUID(req.TaskID, 1)
		req.AttemptID = fmt.Sprintf("run-%d/1/1", i)
		if _, e := r.run(req); e != nil {
			t.Fatalf("task %d: %v", i, e)
		}
	}
	if n := len(launcher.Launches()); n != 4 {
		t.Fatalf("%d CLI processes started for 4 tasks", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if most > maxTurns+idle {
		t.Errorf("%d CLI processes alive at once, over MaxConcurrentTurns + MaxIdle = %d", most, maxTurns+idle)
	}
}

// A task whose next prompt is queued keeps its idle CLI process for that prompt: another task's
// first turn, arriving while the host has no room, evicts an idle process whose task has nothing
// queued, though that one has been idle for less time. Four tasks, four CLI starts (the fake
// launcher's count); without the hold, the first task's next turn starts a fifth. The first
// task's slot is handed over to its next turn meanwhile: the other tasks' turns run on the
// host's other slot.
func TestAQueuedPromptKeepsItsProcess(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *fakecli.CLI) {
		c.Serve(func(c *fakecli.CLI, p fakecli.Line) { c.Reply("echo: " + p.Text) })
	}, func(cfg *engine.Config) {
		cfg.MaxConcurrentTurns, cfg.MaxIdle = 2, 1
	})
	queued := func(n int) {
		t.Helper()
		st, err := json.Marshal(task.State{Status: task.StatusRunning, Pending: make([]task.QueuedPrompt, n)})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.RecordTaskState(r.ctx, r.db, r.taskID, task.StatusRunning, st, time.Now(), recordedSeq.Add(1)); err != nil {
			t.Fatal(err)
		}
	}
	firstTurn := func(name string) {
		t.Helper()
		req := r.req(1, 1, "first turn of "+name)
		req.TaskID = r.taskID + "-" + name
		req.PromptUUID = promptUUID(req.TaskID, 1)
		req.AttemptID = name + "/1/1"
		if _, e := r.run(req); e != nil {
			t.Fatalf("%s: %v", name, e)
		}
	}
	queued(1)
	if _, e := r.run(r.req(1, 1, "one")); e != nil {
		t.Fatal(e)
	}
	firstTurn("idle")
	firstTurn("idle-too") // the host's room is full now: three processes idle, the first one held
	firstTurn("other")    // evicts the longest idle one that is not held
	queued(0)
	if _, e := r.run(r.req(2, 1, "two")); e != nil {
		t.Fatal(e)
	}
	if n := len(r.cli.Launches()); n != 4 {
		t.Fatalf("%d CLI starts for four tasks, want 4: the queued turn reuses its process", n)
	}
}

// recordedSeq orders the states the tests record for the read side.
var recordedSeq atomic.Int64

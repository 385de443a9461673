package engine_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/fakecli"
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

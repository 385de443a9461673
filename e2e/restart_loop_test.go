package e2e

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	fa "github.com/drover-run/drover/internal/offlinemodel"
)

var (
	restartN    = flag.Int("restart.n", 15, "TestRestartLoop: how many times to restart the worker, each followed by a prompt (make test-restart: 50)")
	restartSeed = flag.Uint64("restart.seed", 0, "TestRestartLoop: the seed of the restart points (0: from the clock)")
)

// restartPoint is where in a task's life TestRestartLoop stops the worker.
type restartPoint int

const (
	// restartIdle: the turn ended and the task waits for its next prompt.
	restartIdle restartPoint = iota
	// restartJustEnded: at once after the turn's end is known, while the CLI may still write.
	restartJustEnded
	// restartStarting: a random moment in the first 300 ms after the prompt was accepted.
	restartStarting
	// restartStreaming: the model's answer is half streamed.
	restartStreaming
	// restartTool: a Bash tool's command runs.
	restartTool
	// restartRetired: the task idled past the worker's keep-alive and its CLI was stopped.
	restartRetired
	numRestartPoints
)

func (p restartPoint) String() string {
	return [...]string{"idle", "just ended", "starting", "streaming", "tool running", "CLI retired"}[p]
}

// The worker is stopped -restart.n times, by SIGTERM (its drain) or SIGKILL, at varied points
// of a task's life (idle, just after a turn, as a turn starts, while the answer streams, while a
// tool runs), and started again at once; a prompt follows each restart. The session must go on:
// the last conversation the fake API receives holds every prompt once, no turn fails, and the
// task's session never changes.
func TestRestartLoop(t *testing.T) {
	t.Parallel()
	n := *restartN
	t.Logf("restart loop: %d restarts", n)
	s := &restartScript{loopScript: newLoopScript[restartPoint]()}
	// SIGTERM stops running turns after a second (they continue on the restarted worker).
	// The timeout is a safety net: on a loaded machine one restart (a worker's start, a CLI's
	// start, a turn) takes a minute or two.
	l := newWorkerLoop(t, "restart", *restartSeed, envGuard+time.Duration(n)*2*time.Minute, s,
		"--drain-timeout", "1s", "--keep-alive", "3s")
	e, id, rng := l.e, l.id, l.rng

	var session string
	counts := map[string]int{}
	for k := 1; k <= n+1; k++ {
		p := restartPoint(rng.IntN(int(numRestartPoints)))
		kill := rng.IntN(2) == 0
		if k > n {
			p = restartIdle // the last prompt only checks the session
		}
		s.setPoint(k, p)
		accepted := l.prompt(k, restartPrompt(k))
		if k <= n {
			s.waitForPoint(e, id, k, p, accepted, rng)
			how := "SIGTERM"
			if kill {
				how = "SIGKILL"
				l.w.kill()
			} else {
				l.w.stop()
			}
			counts[fmt.Sprintf("%s %s", how, p)]++
			s.markStopped(k)
			l.startWorker()
		}
		st := e.waitTurns(id, k)
		if st.Totals.FailedTurns != 0 || st.LastError != "" {
			t.Fatalf("after restart %d (%s): %d failed turns, last error %q", k, p, st.Totals.FailedTurns, st.LastError)
		}
		if session == "" {
			session = st.SessionID
		}
		if st.SessionID != session {
			t.Fatalf("after restart %d (%s): the task's session changed from %s to %s", k, p, session, st.SessionID)
		}
	}
	t.Logf("restarts by signal and point: %v", counts)

	// The witness: the conversation the API received last holds every prompt once, in order.
	main := e.fake.MainRequests()
	if len(main) == 0 {
		t.Fatal("the API received no request")
	}
	var all strings.Builder
	for _, m := range main[len(main)-1].Messages {
		if m.Role == "user" {
			all.WriteString(m.Text())
			all.WriteString("\n")
		}
	}
	text := all.String()
	last := -1
	for k := 1; k <= n+1; k++ {
		p := restartPrompt(k)
		if c := strings.Count(text, p); c != 1 {
			t.Errorf("the last conversation the API received holds prompt %d %d times", k, c)
			continue
		}
		if i := strings.Index(text, p); i < last {
			t.Errorf("the last conversation holds prompt %d out of order", k)
		} else {
			last = i
		}
	}
	l.w.stop()
}

func restartPrompt(k int) string { return fmt.Sprintf("restart turn %d: go on", k) }

// restartScript answers TestRestartLoop's main conversation: per turn, by restart point, and
// at once once the worker restarted in that turn.
type restartScript struct {
	loopScript[restartPoint]
	tools    map[int]bool // turns whose tool ran
	streamed map[int]bool // turns whose held answer was asked for
}

func (s *restartScript) respond(r *fa.Request) (fa.Response, bool) {
	if r.Class != fa.ClassMain {
		return fa.Response{}, false
	}
	k, _ := turnOf(r, "restart turn ")
	followUp := len(r.Messages) > 0 && len(r.Messages[len(r.Messages)-1].ToolResults()) > 0
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tools == nil {
		s.tools, s.streamed = map[int]bool{}, map[int]bool{}
	}
	done := fa.Reply(fa.Text(fmt.Sprintf("restart turn %d done", k)))
	switch p := s.point[k]; {
	case s.stopped[k] > 0 || k == 0 || followUp:
		return done, true
	case p == restartStreaming:
		s.streamed[k] = true
		return fa.Reply(fa.Text(fmt.Sprintf("restart turn %d half", k)), fa.Text("never sent")).WithHold(1, s.never), true
	case p == restartTool:
		s.tools[k] = true
		return fa.Reply(fa.UseBash(fmt.Sprintf("echo restartmark-%d; sleep 30", k))), true
	case p == restartStarting:
		return done.WithDelay(100 * time.Millisecond), true
	}
	return done, true
}

// waitForPoint returns at turn k's restart point.
func (s *restartScript) waitForPoint(e *env, id string, k int, p restartPoint, accepted time.Time, rng *rand.Rand) {
	switch p {
	case restartIdle:
		e.waitTurns(id, k)
		time.Sleep(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
	case restartJustEnded:
		e.waitTurns(id, k)
	case restartStarting:
		time.Sleep(time.Until(accepted.Add(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))))
	case restartStreaming:
		e.waitFor("the answer to stream", func() bool { return logged(e, id, k, fmt.Sprintf("restart turn %d half", k)) })
	case restartTool:
		e.waitFor("the tool to run", func() bool { return len(withMarker(fmt.Sprintf("restartmark-%d", k))) > 0 })
	case restartRetired:
		e.waitTurns(id, k)
		e.waitFor("the idle CLI to be retired", func() bool { pid := e.executorPID(id); return pid == 0 || !alive(pid) })
	}
}

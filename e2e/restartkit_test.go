package e2e

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover/claudecode"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/task"
)

// workerLoop is one task on one worker that a test stops and starts again in the middle of its
// turns (TestRestartLoop, TestSoak): the worker's host, the task, and the random source of the
// stop points.
type workerLoop struct {
	e      *env
	rng    *rand.Rand
	host   string
	id     string
	params task.Params
	args   []string
	w      *workerProc
}

// loopResponder answers a worker loop's main conversation; closeNever lets go of the answers it
// holds.
type loopResponder interface {
	respond(*fa.Request) (fa.Response, bool)
	closeNever()
}

// newWorkerLoop makes a test environment whose fake API answers with script, within timeout,
// and starts a worker (with args) as host name-<queue> for the task name; seed 0 is one from the
// clock. Whatever processes a failure leaves behind on the host are killed at the end.
func newWorkerLoop(t *testing.T, name string, seed uint64, timeout time.Duration, script loopResponder, args ...string) *workerLoop {
	t.Helper()
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("-%s.seed=%d", name, seed)
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	e.ctx = ctx
	t.Cleanup(script.closeNever) // before the fake API stops: it waits for the answers held
	e.setResponder(script.respond)
	l := &workerLoop{e: e, rng: rand.New(rand.NewPCG(seed, seed>>1|1)), host: name + "-" + e.queue,
		id: e.taskID(name), params: e.params(), args: args}
	l.params.MaxAttempts = 5
	t.Cleanup(func() { claudecode.KillTaggedUnder(l.host) })
	l.startWorker()
	return l
}

// startWorker starts the loop's worker (again).
func (l *workerLoop) startWorker() { l.w = l.e.startWorker(l.host, l.args...) }

// prompt sends turn k's prompt (the first starts the task) and returns when it was accepted.
func (l *workerLoop) prompt(k int, text string) time.Time {
	l.e.t.Helper()
	var err error
	if k == 1 {
		_, err = l.e.tc.Start(l.e.ctx, l.id, l.params, task.Prompt{Text: text}, "")
	} else {
		_, err = l.e.tc.Prompt(l.e.ctx, l.id, task.Prompt{Text: text}, "")
	}
	if err != nil {
		l.e.t.Fatal(err)
	}
	return time.Now()
}

// loopScript is what the fake API's scripts of a worker loop keep: the stop point P of each
// turn, how often the worker was stopped in each turn, and a channel that holds the answers of
// attempts about to be stopped.
type loopScript[P any] struct {
	mu      sync.Mutex
	point   map[int]P
	stopped map[int]int
	never   chan struct{}
	once    sync.Once
}

func newLoopScript[P any]() loopScript[P] {
	return loopScript[P]{point: map[int]P{}, stopped: map[int]int{}, never: make(chan struct{})}
}

func (s *loopScript[P]) closeNever() { s.once.Do(func() { close(s.never) }) }

func (s *loopScript[P]) setPoint(k int, p P) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.point[k] = p
}

func (s *loopScript[P]) markStopped(k int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped[k]++
}

// turnOf is the number written after marker in the last user message that holds it (0 where
// none does), and the text of every user message of r.
func turnOf(r *fa.Request, marker string) (k int, users []string) {
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		text := m.Text()
		users = append(users, text)
		if i := strings.LastIndex(text, marker); i >= 0 {
			if v, err := strconv.Atoi(strings.TrimSuffix(strings.Fields(text[i+len(marker):])[0], ":")); err == nil {
				k = v
			}
		}
	}
	return k, users
}

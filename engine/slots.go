package engine

import (
	"context"
	"sync"
	"time"
)

// handOverWindow is how long a turn's slot stays with its task after the turn committed, when no
// prompt of the task was queued behind it: a next prompt sent as soon as the turn's result is
// seen runs on the warm process instead of waiting behind other tasks' first turns.
const handOverWindow = time.Second

// fairShare and fairTurns bound how long a task keeps its slot through hand-overs while other
// turns wait for one: once the task has run fairTurns turns on it and held it for fairShare, the
// slot goes to the turn that waited longest, and the task's next turn waits in line like any
// other. The bound in turns keeps a task's few queued prompts on their warm process on a host
// slow enough that one turn takes most of fairShare; the bound in time lets quick turns go on.
const (
	fairShare = time.Minute
	fairTurns = 3
)

// turnSlots bounds the turns that run on the host at once (Config.MaxConcurrentTurns). A turn
// takes a slot just before its prompt goes to a process and gives it back when its attempt ends.
// A turn that committed hands its slot over to its task: with prompts queued behind it, until the
// task's next turn takes it (at most holdForNextTurn); without, for handOverWindow. Meanwhile the
// slot is no other turn's. Turns without a slot wait in order of arrival.
//
// Temporal bounds only the turns it hands the host at once; this bounds the turns that run. A
// task's next turn comes on the host's warm queue (task.WarmQueue), which has room for every
// process of the host, so that first turns waiting for a slot or for room for a process never
// keep a warm process's next turn from reaching the host.
type turnSlots struct {
	mu   sync.Mutex
	free int
	// waiting are the turns waiting for a slot, the first to arrive first.
	waiting []*slotWaiter
	// handed are the slots handed over to their task's next turn, by task.
	handed map[string]*time.Timer
	// held is, for each task that holds a slot or has one handed over, when it took the slot
	// from the free ones or the line, and how many of its turns have taken it since.
	held map[string]tenure
}

type tenure struct {
	since time.Time
	turns int
}

// fairLocked says whether taskID may keep its slot for its next turn while others wait.
func (s *turnSlots) fairLocked(taskID string) bool {
	h := s.held[taskID]
	return h.turns < fairTurns || time.Since(h.since) < fairShare
}

type slotWaiter struct {
	taskID  string
	granted chan struct{}
}

func newTurnSlots(n int) *turnSlots {
	if n <= 0 {
		return nil
	}
	return &turnSlots{free: n, handed: map[string]*time.Timer{}, held: map[string]tenure{}}
}

// acquire takes a slot for a turn of taskID: the one handed over to the task, a free one when
// nobody waits, or the next one given back after every turn that waits already.
func (s *turnSlots) acquire(ctx context.Context, taskID string) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	if t, ok := s.handed[taskID]; ok {
		t.Stop()
		delete(s.handed, taskID)
		h := s.held[taskID]
		h.turns++
		s.held[taskID] = h
		s.mu.Unlock()
		return nil
	}
	if s.free > 0 && len(s.waiting) == 0 {
		s.free--
		s.held[taskID] = tenure{since: time.Now(), turns: 1}
		s.mu.Unlock()
		return nil
	}
	w := &slotWaiter{taskID: taskID, granted: make(chan struct{})}
	s.waiting = append(s.waiting, w)
	s.mu.Unlock()
	select {
	case <-w.granted:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.waiting {
		if x == w {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			return context.Cause(ctx)
		}
	}
	// Granted meanwhile: pass it on.
	delete(s.held, taskID)
	s.giveLocked()
	return context.Cause(ctx)
}

// release gives back the slot a turn of taskID took, or hands it over to the task's next turn
// for up to handOver, unless the task has had its fair share (fairTurns, fairShare) while other
// turns wait.
func (s *turnSlots) release(taskID string, handOver time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if handOver > 0 && (len(s.waiting) == 0 || s.fairLocked(taskID)) {
		var t *time.Timer
		t = time.AfterFunc(handOver, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.handed[taskID] == t {
				delete(s.handed, taskID)
				delete(s.held, taskID)
				s.giveLocked()
			}
		})
		s.handed[taskID] = t
		return
	}
	delete(s.held, taskID)
	s.giveLocked()
}

// forget gives back the slot handed over to taskID, if any: its process is gone, or the task
// ended.
func (s *turnSlots) forget(taskID string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.handed[taskID]; ok {
		t.Stop()
		delete(s.handed, taskID)
		delete(s.held, taskID)
		s.giveLocked()
	}
}

// giveLocked gives a slot to the turn that waited longest, or to the free ones.
func (s *turnSlots) giveLocked() {
	if len(s.waiting) == 0 {
		s.free++
		return
	}
	w := s.waiting[0]
	s.waiting = s.waiting[1:]
	s.held[w.taskID] = tenure{since: time.Now(), turns: 1}
	close(w.granted)
}

package engine

import (
	"context"
	"testing"
	"time"
)

// waitersAtLeast waits until n turns wait for a slot.
func (s *turnSlots) waitersAtLeast(t *testing.T, n int) {
	t.Helper()
	for {
		s.mu.Lock()
		w := len(s.waiting)
		s.mu.Unlock()
		if w >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// A committed turn's slot is handed over to its task's next turn: another task's turn waits
// meanwhile, and gets the slot when the task's turns are over; turns that wait get slots in
// order of arrival.
func TestTurnSlotsHandOverAndOrder(t *testing.T) {
	ctx := context.Background()
	s := newTurnSlots(1)
	if err := s.acquire(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	s.release("a", time.Hour) // prompts queued behind a's turn
	got := make(chan string, 2)
	for _, id := range []string{"b", "c"} {
		go func() {
			if err := s.acquire(ctx, id); err == nil {
				got <- id
			}
		}()
		s.waitersAtLeast(t, map[string]int{"b": 1, "c": 2}[id])
	}
	if err := s.acquire(ctx, "a"); err != nil { // a's next turn takes its slot, ahead of b and c
		t.Fatal(err)
	}
	select {
	case id := <-got:
		t.Fatalf("%s took the slot handed over to a", id)
	default:
	}
	s.release("a", 0) // a has no more prompts
	if id := <-got; id != "b" {
		t.Fatalf("%s got the slot first, want b, which waited longest", id)
	}
	s.release("b", time.Hour)
	s.forget("b") // b's process is gone: its slot goes on
	if id := <-got; id != "c" {
		t.Fatalf("got %s, want c", id)
	}
}

// A task keeps its slot through hand-overs while others wait for fairTurns turns however long
// they take, and gives it up once it has had both fairTurns turns and fairShare.
func TestTurnSlotsFairShare(t *testing.T) {
	ctx := context.Background()
	s := newTurnSlots(1)
	if err := s.acquire(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	granted := make(chan struct{})
	go func() {
		if err := s.acquire(ctx, "b"); err == nil {
			close(granted)
		}
	}()
	s.waitersAtLeast(t, 1)
	for turn := 1; turn < fairTurns; turn++ {
		s.mu.Lock()
		h := s.held["a"]
		h.since = time.Now().Add(-fairShare) // each turn slow
		s.held["a"] = h
		s.mu.Unlock()
		s.release("a", time.Hour)
		s.mu.Lock()
		_, kept := s.handed["a"]
		s.mu.Unlock()
		if !kept {
			t.Fatalf("a's slot went on after a's turn %d of %d", turn, fairTurns)
		}
		if err := s.acquire(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-granted:
			t.Fatalf("b took a's slot after a's turn %d of %d", turn, fairTurns)
		default:
		}
	}
	s.release("a", time.Hour)
	<-granted
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.handed["a"]; ok {
		t.Fatal("the slot was handed over to a past its fair share")
	}
}

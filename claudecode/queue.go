package claudecode

import (
	"context"
	"sync"
)

// queue is an unbounded FIFO of messages between the reader goroutine and Recv. The reader never
// blocks on it; once closed, Pop drains what is left and then returns the closing error.
type queue struct {
	mu     sync.Mutex
	items  []Message
	head   int
	closed bool
	err    error
	ready  chan struct{} // capacity 1: "something may have changed"
}

func newQueue() *queue { return &queue{ready: make(chan struct{}, 1)} }

func (q *queue) push(m Message) {
	q.mu.Lock()
	q.items = append(q.items, m)
	q.mu.Unlock()
	q.signal()
}

// close ends the queue; Pop returns err once the queue is empty. Only the first call counts.
func (q *queue) close(err error) {
	q.mu.Lock()
	if !q.closed {
		q.closed, q.err = true, err
	}
	q.mu.Unlock()
	q.signal()
}

func (q *queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// pop returns the next message, waiting for one; it returns the closing error when the queue is closed
// and empty, and ctx's error when ctx ends first.
func (q *queue) pop(ctx context.Context) (Message, error) {
	for {
		q.mu.Lock()
		if q.head < len(q.items) {
			m := q.items[q.head]
			q.items[q.head] = nil
			q.head++
			if q.head == len(q.items) {
				q.items, q.head = q.items[:0], 0
			} else if q.head > 1024 && q.head*2 > len(q.items) {
				n := copy(q.items, q.items[q.head:])
				clear(q.items[n:])
				q.items, q.head = q.items[:n], 0
			}
			more := q.head < len(q.items) || q.closed
			q.mu.Unlock()
			if more {
				q.signal() // another waiting Recv may proceed
			}
			return m, nil
		}
		if q.closed {
			err := q.err
			q.mu.Unlock()
			q.signal()
			return nil, err
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

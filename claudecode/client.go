package claudecode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ClientConfig configures a Client. The zero value is usable.
type ClientConfig struct {
	// Handler answers the CLI's control requests (can_use_tool, hook_callback, …). Nil denies every
	// can_use_tool with a message saying so, answers hooks with {} (no opinion) and answers anything
	// else with an error.
	Handler Handler
	// RequestTimeout bounds each of our control requests when its context has no earlier deadline.
	// Defaults to 60s.
	RequestTimeout time.Duration
	// Tap, if set, sees every non-blank stdout line as read, before any processing, control responses
	// and malformed lines included. It runs on the reader goroutine and must not block; the slice is
	// only valid during the call.
	Tap func(line []byte)
	// InputTap, if set, sees every line written to the CLI's stdin (prompts, our control requests and
	// answers), without its newline, in the order written. It is called while the write lock is held,
	// so it must not block or write to the Client; the slice is only valid during the call.
	InputTap func(line []byte)
	// Logger receives debug and error logs. Nil means silent.
	Logger *slog.Logger
}

const defaultRequestTimeout = 60 * time.Second

func (c ClientConfig) withDefaults() ClientConfig {
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = defaultRequestTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Errors of a Client.
var (
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("claudecode: client closed")
	// ErrInputClosed is returned by writes after CloseInput.
	ErrInputClosed = errors.New("claudecode: input closed")
	// ErrStreamEnded is returned (wrapped) by control requests still pending when the CLI's output
	// ends.
	ErrStreamEnded = errors.New("claudecode: claude output ended")
	// ErrRequestCancelled is the cause of a Handler's context when the CLI withdraws its request with
	// control_cancel_request.
	ErrRequestCancelled = errors.New("claudecode: request cancelled by claude")
	// ErrAnsweredElsewhere is the cause of a Handler's context when Answer answered its request.
	ErrAnsweredElsewhere = errors.New("claudecode: request answered through Client.Answer")
	// ErrAlreadyAnswered is returned by Answer for a request whose Handler has already answered.
	ErrAlreadyAnswered = errors.New("claudecode: request already answered")
)

// Client speaks stream-json with a Claude Code CLI over any pair of streams.
//
// One goroutine reads the CLI's output. Every message except control_response reaches the consumer
// through Recv, in order, control requests and control_cancel_request included (so that an adapter can
// report them). The reader never blocks on the consumer: messages wait in an unbounded in-memory queue
// until Recv takes them, so a consumer that stops calling Recv costs memory, never a deadlock, and a
// control request can be issued from the goroutine that calls Recv.
//
// control_response lines are consumed by the Client: an answer to one of our requests completes it;
// one with an id we never issued (the CLI echoes our own answers to its requests under
// --replay-user-messages) is dropped with a debug log. Both still reach Tap.
//
// The CLI's control requests go to ClientConfig.Handler, each in its own goroutine, so a slow handler
// (a human approving a tool) never stalls the reader.
//
// All methods are safe for concurrent use.
type Client struct {
	cfg    ClientConfig
	log    *slog.Logger
	r      io.Reader
	w      io.WriteCloser
	out    *Writer
	queue  *queue
	prefix string
	seq    atomic.Uint64

	// base is the parent of every handler context; cancelled when the stream ends or on Close.
	base       context.Context
	cancelBase context.CancelCauseFunc

	mu          sync.Mutex
	pending     map[string]chan result // our requests awaiting a control_response
	handling    map[string]*handling
	inputClosed bool
	closing     bool
	ended       bool // the reader has failed the pending requests; no new ones may wait

	handlers sync.WaitGroup
	done     chan struct{} // closed when the reader goroutine has stopped
	endErr   error         // why it stopped; io.EOF for a clean end; valid after done
}

type result struct {
	resp *ControlResponse
	err  error
}

// NewClient starts a Client reading CLI messages from r and writing to w (the CLI's stdin). If r is
// also an io.Closer, Close closes it to unblock the reader.
func NewClient(r io.Reader, w io.WriteCloser, cfg ClientConfig) *Client {
	cfg = cfg.withDefaults()
	var b [6]byte
	_, _ = rand.Read(b[:])
	base, cancel := context.WithCancelCause(context.Background())
	c := &Client{
		cfg:        cfg,
		log:        cfg.Logger,
		r:          r,
		w:          w,
		out:        &Writer{w: w, onWrite: cfg.InputTap},
		queue:      newQueue(),
		prefix:     "drover-" + hex.EncodeToString(b[:]),
		base:       base,
		cancelBase: cancel,
		pending:    make(map[string]chan result),
		handling:   make(map[string]*handling),
		done:       make(chan struct{}),
	}
	go c.readLoop()
	return c
}

// Recv returns the next message. After the last one it returns io.EOF when the CLI closed its output
// cleanly, ErrClosed after Close, or the read error. A *Malformed message stands for a line that did
// not decode; the stream carries on after it.
func (c *Client) Recv(ctx context.Context) (Message, error) {
	return c.queue.pop(ctx)
}

// Done is closed when the reader has stopped: the CLI's output ended or the Client was closed.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the reader stopped (io.EOF for a clean end), or nil while it runs.
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.endErr
	default:
		return nil
	}
}

// CloseInput closes the CLI's stdin: the running turn finishes and the CLI exits. Further writes fail
// with ErrInputClosed, answers to the CLI's control requests included, so close the input only once
// no answer is still needed (after the turn's result). It is idempotent.
func (c *Client) CloseInput() error {
	c.mu.Lock()
	if c.inputClosed {
		c.mu.Unlock()
		return nil
	}
	c.inputClosed = true
	c.mu.Unlock()
	if err := c.w.Close(); err != nil {
		return fmt.Errorf("closing claude input: %w", err)
	}
	return nil
}

// Close closes the CLI's stdin and, if the reader is an io.Closer, its output; then waits for the reader
// (a reader that is not an io.Closer must reach its end by itself) and every handler to return
// (handlers see their context cancelled). Pending requests fail. Recv still
// returns the messages read before, then the reader's end error (ErrClosed if the reader was still
// running).
func (c *Client) Close() error {
	c.mu.Lock()
	already := c.closing
	c.closing = true
	c.mu.Unlock()
	if already {
		<-c.done
		c.handlers.Wait()
		return nil
	}
	// Cancel first: the reader, seeing its stream end below, would otherwise
	// give the handlers the cause "output ended" instead of "closed".
	c.cancelBase(ErrClosed)
	err := c.CloseInput()
	if rc, ok := c.r.(io.Closer); ok {
		if cerr := rc.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("closing claude output: %w", cerr)
		}
	}
	<-c.done
	c.handlers.Wait()
	return err
}

// readLoop is the only reader of the CLI's output.
func (c *Client) readLoop() {
	rd := NewReader(c.r)
	var endErr error
	for {
		b, err := rd.ReadLine()
		if err != nil {
			endErr = err
			break
		}
		if c.cfg.Tap != nil {
			c.cfg.Tap(b)
		}
		msg, err := rd.decode(b)
		if err != nil {
			c.log.Warn("claude wrote a malformed line", "line", rd.Line(), "error", err)
			c.queue.push(newMalformed(b, rd.Line(), err))
			continue
		}
		c.dispatch(msg)
	}
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	switch {
	case closing:
		endErr = ErrClosed
	case errors.Is(endErr, io.EOF):
		endErr = io.EOF
	default:
		endErr = fmt.Errorf("reading claude output: %w", endErr)
	}
	c.endErr = endErr
	c.failPending(endErr)
	c.cancelBase(ErrStreamEnded)
	close(c.done)
	c.queue.close(endErr)
}

// dispatch routes one decoded message.
func (c *Client) dispatch(msg Message) {
	switch m := msg.(type) {
	case *ControlResponse:
		c.complete(m)
	case *ControlRequest:
		c.queue.push(m)
		c.handle(m)
	case *ControlCancelRequest:
		c.queue.push(m)
		c.mu.Lock()
		h := c.handling[m.RequestID]
		c.mu.Unlock()
		if h != nil {
			h.cancel(ErrRequestCancelled)
		}
	default:
		c.queue.push(msg)
	}
}

// complete hands a control_response to the request waiting for it.
func (c *Client) complete(m *ControlResponse) {
	c.mu.Lock()
	ch, ok := c.pending[m.RequestID]
	delete(c.pending, m.RequestID)
	c.mu.Unlock()
	if !ok {
		c.log.Debug("dropping control_response for an id we did not issue", "request_id", m.RequestID)
		return
	}
	ch <- result{resp: m} // buffered, never blocks
}

// failPending fails every request still waiting for an answer.
func (c *Client) failPending(endErr error) {
	err := ErrStreamEnded
	if errors.Is(endErr, ErrClosed) {
		err = ErrClosed
	}
	c.mu.Lock()
	pending := c.pending
	c.pending = make(map[string]chan result)
	c.ended = true
	c.mu.Unlock()
	for _, ch := range pending {
		ch <- result{err: err}
	}
}

// writeLine writes one line to the CLI's stdin.
func (c *Client) writeLine(b []byte) error {
	c.mu.Lock()
	closed, closing := c.inputClosed, c.closing
	c.mu.Unlock()
	switch {
	case closing:
		return ErrClosed
	case closed:
		return ErrInputClosed
	}
	return c.out.WriteLine(b)
}

// SendUser writes a prompt. A prompt sent while a turn runs is queued by the CLI and becomes its own
// turn. ctx is checked before writing; a write blocked on a CLI that does not read is undone by Close.
func (c *Client) SendUser(ctx context.Context, p Prompt) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sending prompt: %w", err)
	}
	b, err := MarshalPrompt(p)
	if err != nil {
		return err
	}
	if err := c.writeLine(b); err != nil {
		return fmt.Errorf("sending prompt: %w", err)
	}
	return nil
}

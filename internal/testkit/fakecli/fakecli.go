// Package fakecli is a scripted stand-in for the Claude Code CLI, for unit tests of the turn
// engine: a Launcher whose processes speak stream-json over in-memory pipes, answer the control
// plane (initialize, interrupt) by themselves, and run a test's script for each prompt. The
// frames it writes follow what the real CLI writes (docs: PROTOCOL.md; recorded transcripts under
// claudecode/testdata), so the engine's adapter reads them as it reads the real thing.
//
// A test that needs the real CLI's behaviour (its transcript, its requests to the Messages API)
// uses the real CLI against internal/offlinemodel instead; this package is for driving every
// exit path of the engine deterministically and fast.
package fakecli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/google/uuid"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/engine"
)

// Launcher starts scripted CLI processes. Its zero value is not usable: set Script.
type Launcher struct {
	// Script runs each launched CLI, in a goroutine of its own, until it returns (the process
	// then exits with status 0) or calls CLI.Exit.
	Script func(c *CLI)
	// Fail, when set, makes every Launch fail with it.
	Fail error

	mu       sync.Mutex
	launches []claudecode.Command
	procs    []*Proc
	nextPID  atomic.Int64
}

// Launch implements engine.Launcher.
func (l *Launcher) Launch(ctx context.Context, cmd claudecode.Command, cfg claudecode.ProcessConfig) (engine.Process, error) {
	l.mu.Lock()
	l.launches = append(l.launches, cmd)
	l.mu.Unlock()
	if l.Fail != nil {
		return nil, l.Fail
	}
	// The command is built as for the real CLI (validated; the MCP configuration written), then
	// the script stands in for the process.
	if _, err := cmd.Build(ctx); err != nil {
		return nil, err
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &CLI{
		Cmd:     cmd,
		in:      make(chan Line, 64),
		answers: make(chan Line, 64),
		out:     outW,
		killed:  make(chan struct{}),
		intr:    make(chan struct{}, 16),
	}
	c.SessionID = cmd.SessionID
	if cmd.Resume != "" {
		c.SessionID = cmd.Resume
	}
	p := &Proc{
		cli:    c,
		pid:    int(100000 + l.nextPID.Add(1)),
		exited: make(chan struct{}),
	}
	p.client = claudecode.NewClient(outR, inW, cfg.Client)
	l.mu.Lock()
	l.procs = append(l.procs, p)
	l.mu.Unlock()
	go c.readStdin(inR)
	go func() {
		defer p.finish()
		l.Script(c)
	}()
	return p, nil
}

// Launches returns the commands launched so far, in order.
func (l *Launcher) Launches() []claudecode.Command {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]claudecode.Command(nil), l.launches...)
}

// Procs returns the processes launched so far, in order.
func (l *Launcher) Procs() []*Proc {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Proc(nil), l.procs...)
}

// Proc is a scripted CLI process; it implements engine.Process.
type Proc struct {
	cli      *CLI
	client   *claudecode.Client
	pid      int
	exited   chan struct{}
	exitErr  error
	stopOnce sync.Once
	stopped  atomic.Bool
}

// Client implements engine.Process.
func (p *Proc) Client() *claudecode.Client { return p.client }

// ContextUsageAsks returns how many get_context_usage requests the process received.
func (p *Proc) ContextUsageAsks() int { return int(p.cli.asks.Load()) }

// Pid implements engine.Process.
func (p *Proc) Pid() int { return p.pid }

// Exited implements engine.Process.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Stopped reports whether the host stopped the process (as opposed to it exiting by itself).
func (p *Proc) Stopped() bool { return p.stopped.Load() }

// Recv implements engine.Process: at the end of the output, the exit error or io.EOF.
func (p *Proc) Recv(ctx context.Context) (claudecode.Message, error) {
	m, err := p.client.Recv(ctx)
	if err == nil || ctx.Err() != nil {
		return m, err
	}
	select {
	case <-p.exited:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if p.exitErr != nil {
		return nil, p.exitErr
	}
	return nil, io.EOF
}

// Stop implements engine.Process: close stdin; a script that does not end then is killed.
func (p *Proc) Stop(ctx context.Context) error {
	p.stopOnce.Do(func() {
		p.stopped.Store(true)
		_ = p.client.CloseInput()
		select {
		case <-p.exited:
		case <-ctx.Done():
		}
		p.cli.kill()
		<-p.exited
		_ = p.client.Close()
	})
	return p.exitErr
}

// finish ends the process once its script has returned.
func (p *Proc) finish() {
	c := p.cli
	c.mu.Lock()
	p.exitErr = c.exitErr
	c.mu.Unlock()
	_ = c.out.Close()
	<-p.client.Done()
	close(p.exited)
}

// Line is one line the host wrote to the CLI's stdin.
type Line struct {
	Type string // user, control_request, control_response
	// Subtype is a control request's subtype (initialize, interrupt, …) or a control response's.
	Subtype   string
	RequestID string
	// UUID and Text are a prompt's.
	UUID string
	Text string
	Raw  map[string]any
}

// CLI is the script's side of one process.
type CLI struct {
	// Cmd is the command the engine launched.
	Cmd claudecode.Command
	// SessionID is the session the process serves: --session-id, or --resume.
	SessionID string

	in      chan Line // prompts
	answers chan Line // control responses to the CLI's own requests
	out     *io.PipeWriter
	intr    chan struct{}
	killed  chan struct{}

	writeMu  sync.Mutex
	mu       sync.Mutex
	exitErr  error
	modes    []string     // the permission modes the host set, in order
	asks     atomic.Int32 // get_context_usage requests
	killOnce sync.Once
	eof      atomic.Bool
}

func (c *CLI) readStdin(r io.Reader) {
	defer close(c.in)
	br := bufio.NewReader(r)
	for {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			c.dispatch(b)
		}
		if err != nil {
			c.eof.Store(true)
			return
		}
	}
}

// dispatch answers the control plane itself and queues prompts for the script.
func (c *CLI) dispatch(b []byte) {
	var raw map[string]any
	if json.Unmarshal(b, &raw) != nil {
		return
	}
	l := Line{Raw: raw}
	l.Type, _ = raw["type"].(string)
	switch l.Type {
	case "user":
		l.UUID, _ = raw["uuid"].(string)
		if msg, ok := raw["message"].(map[string]any); ok {
			l.Text = textOf(msg["content"])
		}
		c.in <- l
	case "control_request":
		l.RequestID, _ = raw["request_id"].(string)
		req, _ := raw["request"].(map[string]any)
		l.Subtype, _ = req["subtype"].(string)
		switch l.Subtype {
		case "initialize":
			c.in <- l // answered by the script's next Prompt, as the CLI answers before a turn
		case "set_permission_mode":
			mode, _ := req["mode"].(string)
			c.mu.Lock()
			c.modes = append(c.modes, mode)
			c.mu.Unlock()
			c.Respond(l.RequestID, `{}`)
		case "get_context_usage":
			c.asks.Add(1)
			c.Respond(l.RequestID, fmt.Sprintf(`{"totalTokens":9524,"maxTokens":%d,"rawMaxTokens":%d,"model":%q,"categories":[]}`,
				DefaultUsage.ContextWindow, DefaultUsage.ContextWindow, Model))
		case "interrupt":
			c.Respond(l.RequestID, `{"still_queued":[]}`)
			select {
			case c.intr <- struct{}{}:
			default:
			}
		default:
			c.Writef(`{"type":"control_response","response":{"subtype":"error","request_id":%q,"error":"unsupported"}}`, l.RequestID)
		}
	case "control_response":
		resp, _ := raw["response"].(map[string]any)
		l.Subtype, _ = resp["subtype"].(string)
		l.RequestID, _ = resp["request_id"].(string)
		select {
		case c.answers <- l:
		default:
		}
	}
}

func textOf(content any) string {
	switch v := content.(type) {
	case string:
		return v
	case []any:
		s := ""
		for _, b := range v {
			if m, ok := b.(map[string]any); ok && m["type"] == "text" {
				t, _ := m["text"].(string)
				s += t
			}
		}
		return s
	}
	return ""
}

// Prompt waits for the next prompt, answering initialize requests on the way; false once stdin
// is closed (or the process is killed).
func (c *CLI) Prompt() (Line, bool) {
	for {
		select {
		case l, ok := <-c.in:
			if ok && l.Type == "control_request" {
				c.Respond(l.RequestID, `{"commands":[{"name":"review","description":"Review changes"}],"models":[]}`)
				continue
			}
			return l, ok
		case <-c.killed:
			runtime.Goexit()
			return Line{}, false
		}
	}
}

// Serve runs turn for each prompt until stdin is closed.
func (c *CLI) Serve(turn func(c *CLI, prompt Line)) {
	for {
		p, ok := c.Prompt()
		if !ok {
			return
		}
		turn(c, p)
	}
}

// Modes returns the permission modes the host set (set_permission_mode), in order.
func (c *CLI) Modes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.modes...)
}

// Request writes a control request of the CLI's own (can_use_tool, hook_callback) and waits for
// the host's answer: its payload, or "" with an error answer.
func (c *CLI) Request(requestID, request string) (Line, bool) {
	c.Writef(`{"type":"control_request","request_id":%q,"request":%s}`, requestID, request)
	return c.Answer()
}

// CancelRequest withdraws one of the CLI's pending control requests.
func (c *CLI) CancelRequest(requestID string) {
	c.Writef(`{"type":"control_cancel_request","request_id":%q}`, requestID)
}

// Interrupted is signalled when the host asks for an interrupt.
func (c *CLI) Interrupted() <-chan struct{} { return c.intr }

// Killed is closed when the host kills the process.
func (c *CLI) Killed() <-chan struct{} { return c.killed }

// Answer waits for the host's answer to one of the CLI's control requests.
func (c *CLI) Answer() (Line, bool) {
	select {
	case l := <-c.answers:
		return l, true
	case <-c.killed:
		runtime.Goexit()
		return Line{}, false
	}
}

// Hang blocks until the host kills the process.
func (c *CLI) Hang() {
	<-c.killed
	runtime.Goexit()
}

// Exit ends the process with err (nil: status 0). It does not return.
func (c *CLI) Exit(err error) {
	c.mu.Lock()
	c.exitErr = err
	c.mu.Unlock()
	runtime.Goexit()
}

// kill ends a script that did not end after its stdin closed.
func (c *CLI) kill() {
	c.killOnce.Do(func() {
		c.mu.Lock()
		if c.exitErr == nil {
			c.exitErr = &claudecode.ExitError{Code: -1, Signal: syscall.SIGKILL, Err: errors.New("signal: killed")}
		}
		c.mu.Unlock()
		close(c.killed)
		_ = c.out.CloseWithError(io.EOF)
	})
}

// Write writes one line to stdout. A write after the host stopped reading is dropped.
func (c *CLI) Write(line string) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, _ = io.WriteString(c.out, line+"\n")
}

// Writef writes one formatted line to stdout.
func (c *CLI) Writef(format string, args ...any) { c.Write(fmt.Sprintf(format, args...)) }

// Respond answers one of the host's control requests with a success payload (a JSON object).
func (c *CLI) Respond(requestID, payload string) {
	c.Writef(`{"type":"control_response","response":{"subtype":"success","request_id":%q,"response":%s}}`, requestID, payload)
}

// NewUUID returns a fresh transcript uuid.
func NewUUID() string { return uuid.NewString() }

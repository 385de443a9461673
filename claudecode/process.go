package claudecode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcessConfig configures Start. The zero value is usable.
type ProcessConfig struct {
	// Client configures the stdio client (handler, request timeout, tap, logger).
	Client ClientConfig
	// StopTimeout is how long Stop waits for the CLI to exit after closing its stdin before sending
	// SIGTERM to its process group. Defaults to 5s.
	StopTimeout time.Duration
	// TermTimeout is how long Stop waits after SIGTERM before SIGKILL. Defaults to 5s.
	TermTimeout time.Duration
	// DrainTimeout is how long, once the CLI has exited, its stdout and stderr may stay open (held by
	// a process that left its group) before they are closed on our side. Defaults to 2s.
	DrainTimeout time.Duration
	// StderrLines and StderrBytes bound the ring of recent stderr lines. Default to 100 and 64 KiB.
	StderrLines int
	StderrBytes int
}

func (c ProcessConfig) withDefaults() ProcessConfig {
	if c.StopTimeout <= 0 {
		c.StopTimeout = 5 * time.Second
	}
	if c.TermTimeout <= 0 {
		c.TermTimeout = 5 * time.Second
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 2 * time.Second
	}
	if c.StderrLines <= 0 {
		c.StderrLines = 100
	}
	if c.StderrBytes <= 0 {
		c.StderrBytes = 64 << 10
	}
	c.Client = c.Client.withDefaults()
	return c
}

// Process is a running CLI: its own process group, stdin and stdout wired to a Client, and the last
// lines of its stderr kept for errors.
//
// Whatever the path (Stop, the CLI exiting, ctx ending), the process group is killed once the CLI has
// exited, so no grandchild (a tool's background shell) outlives it, and every goroutine of the Process
// and its Client ends once Wait has returned (provided Handlers honour their context).
type Process struct {
	cmd    *exec.Cmd
	cfg    ProcessConfig
	log    *slog.Logger
	client *Client
	stderr *stderrRing
	tag    string // the TagEnv value of the CLI's tree; "" when the command carries none
	// guarded: the command is a guard (Command.Guard), which kills the CLI's tree itself.
	guarded bool

	// cli is the CLI's own process id (cliPid), found once.
	pidOnce sync.Once
	cli     int

	stopOnce sync.Once
	stopErr  error
	exited   chan struct{} // closed when the CLI has exited and been cleaned up
	waitErr  error         // valid after exited
}

// Start starts cmd (normally from Command.Build) in its own process group, with stdin and stdout wired
// to a Client and stderr to a bounded ring. cmd must not have been started nor have Stdin, Stdout or
// Stderr set. ctx bounds the life of the process: when it ends, the process group is killed.
func Start(ctx context.Context, cmd *exec.Cmd, cfg ProcessConfig) (*Process, error) {
	cfg = cfg.withDefaults()
	if cmd == nil || cmd.Process != nil {
		return nil, errors.New("starting claude: nil or already started command")
	}
	if cmd.Stdin != nil || cmd.Stdout != nil || cmd.Stderr != nil {
		return nil, errors.New("starting claude: command already has stdio")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("starting claude: %w", err)
	}
	prepareCmd(cmd)

	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("starting claude: %w", err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("starting claude: %w", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("starting claude: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, fmt.Errorf("starting claude: %w", err)
	}
	// The child has its copies; ours of its ends must go, or we would never see EOF.
	_ = inR.Close()
	_ = outW.Close()
	_ = errW.Close()

	p := &Process{
		cmd:     cmd,
		cfg:     cfg,
		log:     cfg.Client.Logger,
		stderr:  newStderrRing(cfg.StderrLines, cfg.StderrBytes, secretEnvValues(cmd.Env)),
		tag:     envValue(cmd.Env, TagEnv),
		guarded: cmd.SysProcAttr.Pdeathsig == guardDeathSignal,
		exited:  make(chan struct{}),
	}
	p.client = NewClient(outR, inW, cfg.Client)
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		p.stderr.consume(errR)
	}()
	go p.wait(ctx, errR, stderrDone)
	p.log.Debug("started claude", "pid", cmd.Process.Pid)
	return p, nil
}

// wait reaps the CLI, kills what is left of its group, drains its output, and records the outcome.
func (p *Process) wait(ctx context.Context, errR *os.File, stderrDone <-chan struct{}) {
	stop := context.AfterFunc(ctx, func() { _ = killGroup(p.cmd, syscall.SIGKILL) })
	waitErr := p.cmd.Wait()
	stop()
	// What is left of the CLI's tree must not outlive it: members of its group, and the tools'
	// own sessions (the Bash tool starts each command in a session of its own), found by tag.
	_ = killGroup(p.cmd, syscall.SIGKILL)
	// A guard that exited by itself killed the tree already (RunGuard); one that was killed did not.
	if p.tag != "" && !(p.guarded && p.cmd.ProcessState != nil && p.cmd.ProcessState.Exited()) {
		KillTagged(p.tag)
	}

	drain, cancel := context.WithTimeout(context.Background(), p.cfg.DrainTimeout)
	defer cancel()
	select {
	case <-p.client.Done():
	case <-drain.Done():
		p.log.Warn("claude exited but its stdout is still open; closing it")
	}
	select {
	case <-stderrDone:
	case <-drain.Done():
	}
	_ = errR.Close()
	<-stderrDone
	_ = p.client.Close() // stdout's end unblocks the reader if still needed; handlers are cancelled

	p.waitErr = p.classify(waitErr)
	p.log.Debug("claude exited", "pid", p.cmd.Process.Pid, "error", p.waitErr)
	close(p.exited)
}

// classify turns the outcome of Wait into the package's error types.
func (p *Process) classify(waitErr error) error {
	st := p.cmd.ProcessState
	if st == nil {
		return fmt.Errorf("waiting for claude: %w", waitErr)
	}
	stderr := p.stderr.snapshot()
	if st.Success() {
		if err := p.client.Err(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, ErrClosed) {
			return &ProtocolError{Msg: "reading stdout", Err: err}
		}
		return nil
	}
	ee := &ExitError{Code: st.ExitCode(), Stderr: stderr, Err: waitErr}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		ee.Signal = ws.Signal()
	}
	if reason, ok := resumeRejection(stderr); ok {
		return &ResumeRejectedError{Reason: reason, Err: ee}
	}
	return ee
}

// envValue returns the value of key in env, or "".
func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// Client returns the stdio client of the process.
func (p *Process) Client() *Client { return p.client }

// Pid returns the CLI's process id (also its process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stderr returns the last lines of the CLI's stderr, oldest first.
func (p *Process) Stderr() []string { return p.stderr.snapshot() }

// Exited is closed once the CLI has exited and its output has been drained.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Recv is Client().Recv, except that at the end of the output it waits for the CLI to exit and
// returns its error (*ExitError, *ResumeRejectedError, *ProtocolError) if it failed, else io.EOF.
func (p *Process) Recv(ctx context.Context) (Message, error) {
	m, err := p.client.Recv(ctx)
	if err == nil || ctx.Err() != nil {
		return m, err
	}
	select {
	case <-p.exited:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if p.waitErr != nil {
		return nil, p.waitErr
	}
	return nil, io.EOF
}

// Wait waits for the CLI to exit and returns nil for a zero exit status, else *ExitError (or
// *ResumeRejectedError wrapping one), or *ProtocolError if stdout could not be read.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.exited:
		return p.waitErr
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Stop ends the CLI: close stdin, wait up to StopTimeout, SIGTERM the process group, wait up to
// TermTimeout, SIGKILL the group. When ctx ends it skips straight to SIGKILL. It returns what Wait
// returns (an *ExitError with Signal set when it had to signal). It is safe to call more than once.
func (p *Process) Stop(ctx context.Context) error {
	p.stopOnce.Do(func() { p.stopErr = p.stop(ctx) })
	return p.stopErr
}

func (p *Process) stop(ctx context.Context) error {
	// A paused CLI would see neither its stdin close nor a SIGTERM until continued.
	if err := p.Resume(); err != nil && !errors.Is(err, errExited) {
		p.log.Debug("resuming claude to stop it", "error", err)
	}
	if err := p.client.CloseInput(); err != nil {
		p.log.Debug("closing claude stdin", "error", err)
	}
	if !p.waitFor(ctx, p.cfg.StopTimeout) {
		p.log.Debug("claude did not exit after stdin closed; sending SIGTERM", "pid", p.Pid())
		if err := killGroup(p.cmd, syscall.SIGTERM); err != nil {
			p.log.Warn("sending SIGTERM to claude", "error", err)
		}
		if !p.waitFor(ctx, p.cfg.TermTimeout) {
			p.log.Warn("claude ignored SIGTERM; sending SIGKILL", "pid", p.Pid())
			if err := killGroup(p.cmd, syscall.SIGKILL); err != nil {
				p.log.Warn("sending SIGKILL to claude", "error", err)
			}
			<-p.exited
		}
	}
	_ = p.client.Close()
	return p.waitErr
}

// waitFor waits up to d for the CLI to exit; false if it has not (or ctx ended).
func (p *Process) waitFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

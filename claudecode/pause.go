package claudecode

import (
	"errors"
	"fmt"
	"syscall"
)

// Pausing a CLI that waits for its next prompt. An idle CLI is not idle: its event loop wakes
// many times a second to poll its config folder, and a host that keeps many warm processes burns
// that for each of them. Pause stops the CLI's own process (SIGSTOP), which then burns nothing
// until Resume continues it (SIGCONT); what was written to its stdin meanwhile waits in the pipe.
//
// Only the CLI's process is paused: not its guard, which must keep watching the host and kill
// the CLI if the host dies (a SIGKILL ends a stopped process too), nor the tools it started. A
// host's Stop resumes the CLI first, so that it sees its stdin close and ends as it chooses.

// Pause stops the CLI's process until Resume. It fails when the CLI has exited, or under a
// guard whose CLI the kernel does not list.
func (p *Process) Pause() error { return p.signalCLI(syscall.SIGSTOP, "pausing") }

// Resume continues the CLI's process after Pause; resuming a CLI that runs does nothing.
func (p *Process) Resume() error { return p.signalCLI(syscall.SIGCONT, "resuming") }

// signalCLI sends sig to the CLI's own process; op names the operation in its error.
func (p *Process) signalCLI(sig syscall.Signal, op string) error {
	pid, err := p.cliPid()
	if err == nil {
		err = syscall.Kill(pid, sig)
	}
	if err != nil {
		return fmt.Errorf("%s claude: %w", op, err)
	}
	return nil
}

// errExited is the cause of a pause or resume of a CLI that has exited.
var errExited = errors.New("the process has exited")

// cliPid is the CLI's own process: the command's, or under a guard the guard's one child.
func (p *Process) cliPid() (int, error) {
	select {
	case <-p.exited:
		return 0, errExited
	default:
	}
	p.pidOnce.Do(func() {
		if !p.guarded {
			p.cli = p.cmd.Process.Pid
			return
		}
		kids, ok := childrenOf(p.cmd.Process.Pid)
		if ok && len(kids) > 0 {
			p.cli = kids[0]
		}
	})
	if p.cli == 0 {
		return 0, errors.New("the guard's CLI is not listed by the kernel")
	}
	return p.cli, nil
}

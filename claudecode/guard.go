package claudecode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// A guard is a small process between the host and the CLI. The host starts the guard (in a
// process group of its own, as the CLI would be) with its parent-death signal set; the guard
// runs the CLI as its child with the same standard streams, environment and process group, and
// waits. When the CLI exits, the guard kills what is left of its tree (every process below it:
// the guard is their subreaper; every process carrying the CLI's TagEnv where the kernel does not
// list a process's children) and exits the way the CLI did. When the host dies, however it dies, the
// guard kills the CLI and its whole tree at once and exits: no tool of a lost attempt runs on
// beside the next one. Without a guard the CLI dies with its host (parent-death signal), but the
// tools it started live on until the host's next start kills them by tag.
//
// RunGuard is the guard's main. A program that offers a guard calls it first thing when its
// arguments ask for one (see Command.Guard), before anything else runs.

// guardDeathSignal is the parent-death signal of a guard: distinct from the SIGTERM that a
// host's Stop sends the whole group, which the guard answers by waiting for the CLI.
const guardDeathSignal = syscall.SIGUSR2

// guardPoll is how often a guard checks that its host is alive, in case the parent-death
// signal was missed (it follows the thread that started the guard, not the process).
const guardPoll = 500 * time.Millisecond

// RunGuard runs a CLI under a guard and returns the exit status to exit with. args are
// "--tag=TAG -- CLI ARGS...", as Command.Build writes them after the guard command. It never
// returns before the CLI has exited.
func RunGuard(args []string) int {
	var tag string
	for len(args) > 0 && args[0] != "--" {
		if v, ok := strings.CutPrefix(args[0], "--tag="); ok {
			tag = v
		}
		args = args[1:]
	}
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "claude guard: usage: --tag=TAG -- COMMAND [ARGS...]")
		return 2
	}
	argv := args[1:]
	host := os.Getppid()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, guardDeathSignal, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if os.Getppid() != host || host == 1 {
		return 1 // the host died while the guard started
	}

	// Every process of the CLI's tree stays below the guard, so that its end is found there.
	subreaper := becomeSubreaper() == nil
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "claude guard: starting %s: %v\n", argv[0], err)
		return 127
	}
	// The guard holds no stream of the CLI's: its ends of the pipes go, so the host sees EOF
	// as soon as the CLI closes its own.
	_ = os.Stdin.Close()
	_ = os.Stdout.Close()

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(guardPoll)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if !subreaper || !killDescendants() {
				killTree(tag)
			}
			return exitStatus(err)
		case sig := <-sigs:
			if sig == guardDeathSignal {
				return orphaned(cmd, tag, done)
			}
			// The host's Stop signals the whole group, the CLI included: let the CLI end as it
			// chooses; the host escalates if it does not.
		case <-tick.C:
			if subreaper {
				reapOrphans(cmd.Process.Pid)
			}
			if os.Getppid() != host {
				return orphaned(cmd, tag, done)
			}
		}
	}
}

// orphaned ends everything after the host died: the CLI and every process of its tree,
// wherever it went, then the guard's own group, the guard with it.
func orphaned(cmd *exec.Cmd, tag string, done <-chan error) int {
	killTree(tag)
	_ = cmd.Process.Kill()
	<-done
	killTree(tag) // anything started in between
	_ = syscall.Kill(-syscall.Getpgrp(), syscall.SIGKILL)
	return 137
}

// killTree kills the processes of the CLI's tree that outlived it.
func killTree(tag string) {
	if tag != "" {
		KillTagged(tag)
	}
}

// exitStatus turns the CLI's end into the guard's exit status; a CLI killed by a signal makes
// the guard die of the same signal, so the host sees what the CLI saw.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 1
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		sig := ws.Signal()
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig)
		time.Sleep(100 * time.Millisecond) // the signal lands
		return 128 + int(sig)
	}
	return ee.ExitCode()
}

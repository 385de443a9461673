package claudecode

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// readPID waits for a script to write a pid to file.
func readPID(t *testing.T, file string) int {
	t.Helper()
	var pid int
	eventually(t, "the script to write "+file, func() bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	return pid
}

// A command a tool runs in a session of its own (as the CLI's Bash tool does) leaves the CLI's
// process group; stopping the CLI must still end it.
func TestStopKillsToolsThatLeftTheGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "tool.pid")
	c := Command{Path: "/bin/sh", Env: []string{"PATH=" + os.Getenv("PATH")}, TagPrefix: "test-host"}
	cmd, err := c.Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Run a shell instead of the CLI, keeping the built environment (and its tag).
	cmd.Args = []string{"/bin/sh", "-c", "setsid sleep 300 & echo $! > " + pidFile + "; sleep 300"}
	cmd.Path = "/bin/sh"
	p, err := Start(context.Background(), cmd, quick)
	if err != nil {
		t.Fatal(err)
	}
	tool := readPID(t, pidFile)
	eventually(t, "the tool to leave the CLI's group (the test proves nothing otherwise)", func() bool {
		pgid, err := syscall.Getpgid(tool)
		return err == nil && pgid != p.Pid()
	})
	_ = p.Stop(context.Background())
	eventually(t, "the tool to be killed", func() bool { return gone(tool) })
}

// When the host dies outright, its guard kills the CLI and every process of its tree.
func TestGuardKillsTheTreeWhenItsHostDies(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	toolPID, cliPID, hostPID := filepath.Join(dir, "tool.pid"), filepath.Join(dir, "cli.pid"), filepath.Join(dir, "host.pid")
	c := Command{Path: "/bin/sh", Guard: []string{self}, TagPrefix: "test-host",
		Env: []string{"PATH=" + os.Getenv("PATH"), guardEnv + "=1"}}
	built, err := c.Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The guarded "CLI" starts a tool in a session of its own and waits.
	cli := "echo $$ > " + cliPID + "; setsid sleep 300 & echo $! > " + toolPID + "; sleep 300"
	guardArgs := append([]string{}, built.Args[1:]...)
	guardArgs = append(guardArgs[:len(guardArgs)-len(c.allArgs())], "-c", cli)
	// A stand-in host: a shell that starts the guard and is then killed with SIGKILL.
	var q []string
	for _, a := range append([]string{self}, guardArgs...) {
		q = append(q, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	host := exec.Command("/bin/sh", "-c", "echo $$ > "+hostPID+"; "+strings.Join(q, " ")+" & wait")
	host.Env = built.Env
	host.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-host.Process.Pid, syscall.SIGKILL); _ = host.Wait() })
	readPID(t, hostPID)
	claude, tool := readPID(t, cliPID), readPID(t, toolPID)
	_ = syscall.Kill(host.Process.Pid, syscall.SIGKILL)
	_ = host.Wait()
	eventually(t, "the guarded CLI to die with its host", func() bool { return gone(claude) })
	eventually(t, "the tool to die with its host", func() bool { return gone(tool) })
}

// When a guarded CLI exits, its guard ends the tools it left, even one that cleared its
// environment (and with it the tag): they are below the guard, which adopts them.
func TestGuardKillsWhatTheCLILeftWhenItExits(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	toolPID := filepath.Join(t.TempDir(), "tool.pid")
	c := Command{Path: "/bin/sh", Guard: []string{self}, TagPrefix: "test-host",
		Env: []string{"PATH=" + os.Getenv("PATH"), guardEnv + "=1"}}
	built, err := c.Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The "CLI" starts a tool in a session of its own with an empty environment, then exits.
	script := "env -i setsid sleep 300 & echo $! > " + toolPID + "; while [ ! -s " + toolPID + " ]; do :; done; exit 0"
	built.Args = append(built.Args[:len(built.Args)-len(c.allArgs())], "-c", script)
	p, err := Start(context.Background(), built, quick)
	if err != nil {
		t.Fatal(err)
	}
	tool := readPID(t, toolPID)
	<-p.Exited()
	eventually(t, "the tool the CLI left to be killed", func() bool { return gone(tool) })
}

// A host that starts again kills what CLIs of its earlier run left, by their tag.
func TestKillTaggedUnderFindsLeftovers(t *testing.T) {
	leftover := exec.Command("/bin/sh", "-c", "exec sleep 300")
	leftover.Env = []string{TagEnv + "=other-host/1"}
	mine := exec.Command("/bin/sh", "-c", "exec sleep 300")
	mine.Env = []string{TagEnv + "=this-host/abc"}
	for _, c := range []*exec.Cmd{leftover, mine} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	}
	if n := KillTaggedUnder("this-host"); n != 1 {
		t.Fatalf("killed %d processes, want 1", n)
	}
	_ = mine.Wait()
	if gone(leftover.Process.Pid) {
		t.Fatal("another host's process was killed")
	}
}

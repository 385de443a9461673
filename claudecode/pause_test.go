package claudecode

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/testkit/procstat"
)

// A guarded CLI paused is stopped as the kernel sees it, its guard is not (it must still watch
// the host), and it runs again when resumed; a paused CLI that is stopped ends by its stdin
// closing, as a running one does, not by a signal.
func TestPauseStopsTheCLIAndNotItsGuard(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cliPID := filepath.Join(t.TempDir(), "cli.pid")
	c := Command{Path: "/bin/sh", Guard: []string{self}, TagPrefix: "test-host",
		Env: []string{"PATH=" + os.Getenv("PATH"), guardEnv + "=1"}}
	built, err := c.Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	built.Args = append(built.Args[:len(built.Args)-len(c.allArgs())], "-c",
		"echo $$ > "+cliPID+"; cat >/dev/null; echo bye >&2; exit 0")
	cfg := quick
	cfg.StopTimeout = 30 * time.Second // a stop that needed a signal fails the test below
	cfg.Client.Logger = testLogger(t)
	p, err := Start(context.Background(), built, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	cli := readPID(t, cliPID)
	for range 2 {
		if err := p.Pause(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the paused CLI to be stopped", func() bool { return procstat.State(cli) == "T" })
		if s := procstat.State(p.Pid()); s == "T" || s == "" {
			t.Fatalf("the guard is in state %q: it must run while its CLI is paused", s)
		}
		if err := p.Resume(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the resumed CLI to run", func() bool { s := procstat.State(cli); return s != "T" && s != "" })
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the paused CLI to be stopped", func() bool { return procstat.State(cli) == "T" })
	if err := p.Stop(waitCtx(t)); err != nil {
		t.Fatalf("Stop of a paused CLI: %v, want its own exit 0", err)
	}
	if !slices.Equal(p.Stderr(), []string{"bye"}) {
		t.Errorf("stderr = %q: the paused CLI did not end through its stdin closing", p.Stderr())
	}
	if err := p.Pause(); err == nil {
		t.Error("a CLI that exited was paused")
	}
}

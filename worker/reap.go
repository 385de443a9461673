package worker

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"syscall"

	"github.com/drover-run/drover/store"
)

// reapOrphans kills CLI processes that an earlier run of this host recorded and
// that still run: a worker killed with SIGKILL cannot stop its children, and a
// stray CLI would keep writing to a transcript the next attempt resumes. Only a
// live process whose command line is a claude binary is touched, so a reused
// pid is left alone.
func reapOrphans(ctx context.Context, db store.DB, executorID string, log *slog.Logger) {
	execs, err := store.ListExecutorsOnHost(ctx, db, executorID)
	if err != nil {
		log.Warn("listing this host's executors", "error", err)
		return
	}
	for _, ex := range execs {
		if ex.PID <= 0 || !isClaudeProcess(ex.PID) {
			continue
		}
		// The CLI runs in its own process group, led by itself.
		if err := syscall.Kill(-ex.PID, syscall.SIGKILL); err != nil {
			_ = syscall.Kill(ex.PID, syscall.SIGKILL)
		}
		log.Warn("killed a claude process left by an earlier worker", "task_id", ex.TaskID, "pid", ex.PID)
	}
}

func isClaudeProcess(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return bytes.HasSuffix(argv0, []byte("claude")) || bytes.Contains(cmdline, []byte("claude-code"))
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/workspace"
)

// TestWorkspaceFailureTypes: each failure of package workspace reaches the workflow with its
// own type and retryability, and a locked worktree's message names the lock and what to do.
func TestWorkspaceFailureTypes(t *testing.T) {
	ctx := context.Background()
	git := func(stderr string) error {
		return fmt.Errorf("restoring t1: %w", &workspace.GitError{Args: []string{"read-tree"}, Err: errors.New("exit status 128"), Stderr: stderr})
	}
	for _, c := range []struct {
		err       error
		want      string
		retryable bool
		says      string
	}{
		{git("fatal: Unable to create '/w/.git/worktrees/t1/index.lock': File exists."), task.ErrTypeWorkspaceLocked, true, "index.lock"},
		{git("fatal: write error: No space left on device"), task.ErrTypeDiskFull, true, "No space"},
		{fmt.Errorf("x: %w", workspace.ErrBaseMissing), task.ErrTypeBaseMissing, false, ""},
		{git("fatal: bad object"), task.ErrTypeWorkspaceFailed, true, "bad object"},
	} {
		f := workspaceFailure(ctx, "restoring the worktree", c.err)
		if f.Type != c.want || f.Retryable() != c.retryable || !strings.Contains(f.Error(), c.says) {
			t.Errorf("%v: got %s (retryable %v) %q, want %s (retryable %v) saying %q", c.err, f.Type, f.Retryable(), f.Error(), c.want, c.retryable, c.says)
		}
	}
	if f := workspaceFailure(ctx, "x", git("fatal: Unable to create '/w/index.lock': File exists.")); !strings.Contains(f.Error(), "remove that file") {
		t.Errorf("a locked worktree's message does not say what to do: %q", f.Error())
	}
}

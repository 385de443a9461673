package engine

import (
	"context"

	"github.com/drover-run/drover/task"
)

// workspace is the folder the attempt runs in: an unmanaged task's own (resolveWorkspace), or a
// managed task's worktree on this host.
func (a *attempt) workspace(ctx context.Context) (string, *Error) {
	if a.req.Repo == "" {
		return resolveWorkspace(a.e.cfg.WorkspaceRoot, a.req.Workspace)
	}
	m := a.e.cfg.Workspaces
	if m == nil {
		return "", failure(task.ErrTypeWorkspacesUnmanaged,
			"task %s works on the repository %s, and host %s manages no workspaces (its worker needs git and a --worktree-root)",
			a.req.TaskID, a.req.Repo, a.e.cfg.HostID)
	}
	if f := a.forkWorkspace(ctx, m); f != nil {
		return "", f
	}
	return m.Dir(a.req.TaskID), nil
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/workspace"
)

// forkWorkspace makes a forked task's worktree from the turn it was forked from (see
// task.ForkPoint), when its first turn runs on a host with no worktree of it. Later turns, and a
// host that takes the task after its first checkpoint, make it from the task's own refs.
func (a *attempt) forkWorkspace(ctx context.Context, m *workspace.Manager) *Error {
	f := a.req.Fork
	if f == nil || a.req.Turn != 1 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(m.Dir(a.req.TaskID), ".git")); err == nil {
		return nil
	}
	_, err := m.Fork(ctx, workspace.Task{ID: f.Task, Repo: a.req.Repo}, a.req.TaskID, f.Turn)
	switch {
	case err == nil:
		a.log.Info("forked the workspace", "from_task", f.Task, "from_turn", f.Turn)
		return nil
	case errors.Is(err, workspace.ErrNoCheckpoint):
		return failure(task.ErrTypeInvalidInput, "task %s forks turn %d of task %s, which has no checkpoint: %v", a.req.TaskID, f.Turn, f.Task, err)
	case errors.Is(err, workspace.ErrUnreachable):
		return failure(task.ErrTypeRepoUnreachable, "forking the workspace of task %s: %v", f.Task, err)
	case errors.Is(err, workspace.ErrDiskFull):
		return failure(task.ErrTypeDiskFull, "forking the workspace of task %s: %v", f.Task, err)
	}
	return failure(task.ErrTypeInternal, "forking the workspace of task %s: %v", f.Task, err)
}

// forksSession reports whether the attempt resumes the session of the turn its task was forked
// from: its first turn, before it has a session of its own.
func (a *attempt) forksSession(at resumePoint) bool {
	f := a.req.Fork
	return f != nil && f.SessionID != "" && at.sessionID == f.SessionID && at.uuid == f.LastMessageUUID
}

// forkSession makes spec resume the forked-from session in a session of its own
// (--fork-session, with a new id fixed in advance), so that the other task's session goes on
// untouched. The CLI keeps a session's transcript in the project folder of the workspace it ran
// in: the transcript, restored from the mirror for the other task's workspace, is copied into
// this one's first.
func (a *attempt) forkSession(spec *executorSpec, workspace string) *Error {
	if dir := a.e.cfg.Claude.ConfigDir; dir != "" {
		if err := copyTranscript(dir, a.req.Fork.SessionID, workspace); err != nil {
			return failure(task.ErrTypeInternal, "forking session %s: %v", a.req.Fork.SessionID, err)
		}
	}
	spec.sessionID = uuid.NewString()
	spec.cmd.SessionID = spec.sessionID
	spec.cmd.ForkSession = true
	spec.resumeSessionID = ""
	return nil
}

// copyTranscript puts the session's transcript into workspace's project folder, from whichever
// project folder holds it, unless it is there already.
func copyTranscript(configDir, sessionID, workspace string) error {
	folder, ok := projectFolder(workspace)
	if !ok {
		return fmt.Errorf("the workspace path %s is too long to name its project folder", workspace)
	}
	to := filepath.Join(configDir, "projects", folder, sessionID+".jsonl")
	if _, err := os.Stat(to); err == nil {
		return nil
	}
	found, err := (&mirrorMarks{}).search(configDir, sessionID)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return fmt.Errorf("no transcript of the session in %s", configDir)
	}
	content, err := os.ReadFile(filepath.Join(configDir, found[0]))
	if err != nil {
		return err
	}
	return writeAtomically(to, content)
}

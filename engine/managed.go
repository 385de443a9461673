package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/streamjson"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/workspace"
)

// A managed task (one that names a repository) runs in its own worktree, Config.Workspaces'
// Dir(task id), the same path on every host. Its attempt, before anything runs in it:
//
//   - makes the worktree when this host has none: from the remote, at the task's newest
//     checkpoint (workspace.Ensure), or, before the task has any, from the repository at its base
//     (workspace.Prepare);
//   - after begin, puts it back at the checkpoint Postgres committed last (the executor row's,
//     never the remote's newest ref, which a crash after a push and before the commit leaves
//     ahead): a retried attempt always (workspace_restored, cause retry), the first attempt of a
//     turn when someone changed the worktree between turns (cause changed_by_hand). Either way
//     what the worktree held instead is kept on a side ref, and the event names it.
//
// When the turn reaches its result, commit records the worktree as the turn's checkpoint before
// anything of the turn is stored, and the turn is committed with it or not at all.

// workspace is the folder the attempt runs in: an unmanaged task's own (resolveWorkspace), or a
// managed task's worktree on this host, made when missing.
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
	dir := m.Dir(a.req.TaskID)
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return dir, nil
	}
	if f := a.forkWorkspace(ctx, m); f != nil {
		return "", f
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return dir, nil // forked
	}
	t := a.wsTask()
	cp, err := m.Ensure(ctx, t)
	if errors.Is(err, workspace.ErrNoCheckpoint) {
		// No host recorded the task's base yet: its first attempt starts from the repository.
		cp, err = m.Prepare(ctx, t, a.req.Base)
	}
	if err != nil {
		return "", workspaceFailure(ctx, "making the worktree", err)
	}
	a.log.Info("made the task's worktree", "dir", dir, "at", cp)
	return dir, nil
}

// wsTask names the attempt's task to package workspace.
func (a *attempt) wsTask() workspace.Task {
	return workspace.Task{ID: a.req.TaskID, Repo: a.req.Repo}
}

// managed reports whether the attempt's task runs in a managed worktree.
func (a *attempt) managed() bool { return a.req.Repo != "" && a.e.cfg.Workspaces != nil }

// restoreWorktree puts a managed task's worktree back at the checkpoint Postgres committed last
// (begun's), before the attempt runs anything in it, and says so in the log when it changed
// anything or the attempt is a retry.
func (a *attempt) restoreWorktree(ctx context.Context, begun store.AttemptBegun) *Error {
	if !a.managed() {
		return nil
	}
	retry := a.req.Attempt > 1 || begun.LostTurns > 0 || begun.Turn.Attempts > 1
	r, err := a.e.cfg.Workspaces.RestoreTo(ctx, a.wsTask(), begun.Checkpoint)
	if err != nil {
		return workspaceFailure(ctx, "restoring the worktree", err)
	}
	if !retry && r.Kept == "" {
		return nil
	}
	w := &events.WorkspaceRestore{Cause: events.RestoredForRetry, Checkpoint: r.Checkpoint, Turn: begun.CheckpointTurn,
		Kept: r.Kept, Files: r.Files}
	at := fmt.Sprintf("turn %d's checkpoint %s", begun.CheckpointTurn, short(r.Checkpoint))
	if begun.CheckpointTurn == 0 {
		at = "the task's base " + short(r.Checkpoint)
	}
	switch {
	case !retry && a.req.Rewound:
		w.Cause = events.RestoredForRewind
		w.Message = fmt.Sprintf("the task was rewound: the files are back at %s, where its conversation now resumes; what the worktree held (%d files) is kept on %s",
			at, len(r.Files), r.Kept)
	case !retry:
		w.Cause = events.RestoredChangedByHand
		w.Message = fmt.Sprintf("the worktree was changed between turns (%d files); the changes are kept on %s, and the files are back at %s, as the conversation saw them",
			len(r.Files), r.Kept, at)
	case r.Kept != "":
		w.Message = fmt.Sprintf("the files are back at %s; what the earlier attempt left (%d files) is kept on %s. Side effects outside the worktree (a database written, a message sent) cannot be rolled back",
			at, len(r.Files), r.Kept)
	default:
		w.Message = fmt.Sprintf("the files are at %s, as the earlier attempt left them. Side effects outside the worktree (a database written, a message sent) cannot be rolled back", at)
	}
	a.log.Info("restored the worktree", "cause", w.Cause, "checkpoint", r.Checkpoint, "kept", r.Kept, "files", len(r.Files))
	a.restored = w
	return nil
}

// checkpoint records a managed task's worktree as the turn's checkpoint and puts its commit in
// c and in the turn's complete event, which the log held back for it. The turn is not committed
// without it: a failure fails the attempt.
func (a *attempt) checkpoint(ctx context.Context, c *store.TurnCommit, res *task.RunTurnResult) *Error {
	if !a.managed() {
		return nil
	}
	msg := fmt.Sprintf("drover: task %s turn %d (%s)\n\nAttempt %d; session %s, last message %s.\n",
		a.req.TaskID, a.req.Turn, c.Status, a.req.Attempt, c.SessionID, c.LastMessageUUID)
	if c.Error != "" {
		msg += "Error: " + c.Error + "\n"
	}
	cp, err := a.e.cfg.Workspaces.Checkpoint(ctx, a.wsTask(), a.req.Turn, msg)
	if err != nil {
		return workspaceFailure(ctx, "checkpointing the worktree", err)
	}
	c.Checkpoint, res.Checkpoint = cp, cp
	a.hold.release(cp)
	a.log.Info("checkpointed the worktree", "checkpoint", cp)
	return nil
}

// removeWorktree takes a task's worktree off this host when the task ends; its checkpoints stay
// on the remote until their retention ends.
func (e *Engine) removeWorktree(ctx context.Context, taskID, repo string) {
	if repo == "" || e.cfg.Workspaces == nil {
		return
	}
	// A large worktree takes a while to remove: it is the task's last step on this host.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := e.cfg.Workspaces.Remove(ctx, workspace.Task{ID: taskID, Repo: repo}); err != nil {
		e.cfg.Logger.Warn("removing the ended task's worktree", "task_id", taskID, "error", err)
		return
	}
	e.cfg.Logger.Info("removed the ended task's worktree", "task_id", taskID)
}

// workspaceFailure types a failure of package workspace: a full disk, an unreachable
// repository and a locked worktree are retryable, a missing base and a file over the limit are
// not.
func workspaceFailure(ctx context.Context, what string, err error) *Error {
	t := task.ErrTypeWorkspaceFailed
	switch {
	case ctx.Err() != nil:
		return contextFailure(ctx)
	case errors.Is(err, workspace.ErrDiskFull):
		t = task.ErrTypeDiskFull
	case errors.Is(err, workspace.ErrFileTooLarge):
		t = task.ErrTypeFileTooLarge
		err = fmt.Errorf("%w; remove it or list it in .gitignore", err)
	case errors.Is(err, workspace.ErrBaseMissing):
		t = task.ErrTypeBaseMissing
	case errors.Is(err, workspace.ErrUnreachable):
		t = task.ErrTypeRepoUnreachable
	case errors.Is(err, workspace.ErrLocked):
		t = task.ErrTypeWorkspaceLocked
		err = fmt.Errorf("%w; a git command runs in the worktree, or one that was stopped left its lock file: "+
			"remove that file once no git runs there (the worktree's changes are kept on a side ref)", err)
	}
	return &Error{Type: t, Err: fmt.Errorf("%s: %w", what, err)}
}

// short is a commit id's first twelve characters.
func short(commit string) string { return commit[:min(len(commit), 12)] }

// holdSink passes events to next, except a managed turn's main complete event and all that
// follow it, which it holds until release: so that the complete event carries the turn's
// checkpoint, which is taken once the turn's result is in. A nil holdSink holds nothing.
type holdSink struct {
	next     streamjson.Sink
	mu       sync.Mutex
	holding  bool
	released bool
	held     []events.AgentEvent
}

// Emit passes ev on, or holds it.
func (h *holdSink) Emit(ev events.AgentEvent) {
	h.mu.Lock()
	if !h.released && (h.holding || isMainComplete(ev)) {
		h.holding = true
		h.held = append(h.held, ev)
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.next.Emit(ev)
}

// release passes on what was held, the main complete events with checkpoint (when not empty),
// and everything after them as it comes.
func (h *holdSink) release(checkpoint string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return
	}
	h.released = true
	for _, ev := range h.held {
		if checkpoint != "" && isMainComplete(ev) {
			c := *ev.Data.Completion
			c.Checkpoint = checkpoint
			d := *ev.Data
			d.Completion = &c
			ev.Data = &d
		}
		h.next.Emit(ev)
	}
	h.held = nil
}

func isMainComplete(ev events.AgentEvent) bool {
	return ev.Type == events.TypeComplete && ev.ParentToolCallID == "" && ev.Data != nil && ev.Data.Completion != nil
}

// managedAttachments loads a managed task's attachments from its restored worktree; an
// unmanaged task's were loaded by prepare.
func (a *attempt) managedAttachments(in prepared) ([]claudecode.Image, *Error) {
	if !a.managed() {
		return in.images, nil
	}
	images, err := loadAttachments(in.workspace, a.req.Prompt.Attachments)
	if err != nil {
		return nil, &Error{Type: task.ErrTypeInvalidInput, Err: err}
	}
	return images, nil
}

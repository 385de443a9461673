package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/workspace"
)

// Rewind sets a managed task's committed point back to the end of in.Turn: on the workspace
// remote, the turn's checkpoint becomes the newest and the later turns' checkpoints are kept
// aside (workspace.Manager.Rewind); in Postgres, the executor row's resume point and checkpoint
// become the turn's. The task's next attempt then resumes its session at the turn's last message
// (a warm process elsewhere in the session is not reused) and restores the worktree to the turn's
// checkpoint. It is idempotent: run again, it finds the same turn newest. A turn that did not
// complete, or has no checkpoint, is task.ErrTypeCannotRewind.
func (e *Engine) Rewind(ctx context.Context, in task.RewindInput) (task.Rewound, error) {
	m := e.cfg.Workspaces
	if m == nil {
		return task.Rewound{}, failure(task.ErrTypeCannotRewind, "this host manages no workspaces (its worker needs git and a --worktree-root)")
	}
	p, err := store.TurnEnd(ctx, e.cfg.DB, in.TaskID, in.Turn)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return task.Rewound{}, &Error{Type: task.ErrTypeCannotRewind, Err: err}
	case err != nil:
		return task.Rewound{}, &Error{Type: task.ErrTypeStoreUnavailable, Err: err}
	}
	r, err := m.Rewind(ctx, workspace.Task{ID: in.TaskID, Repo: in.Repo}, in.Turn)
	switch {
	case errors.Is(err, workspace.ErrNoCheckpoint), errors.Is(err, workspace.ErrNotManaged):
		return task.Rewound{}, failure(task.ErrTypeCannotRewind, "turn %d of task %s has no checkpoint to go back to: %v", in.Turn, in.TaskID, err)
	case err != nil:
		return task.Rewound{}, failure(task.ErrTypeStoreUnavailable, "rewinding the checkpoints of task %s: %v", in.TaskID, err)
	}
	if in.Turn > 0 && p.Checkpoint != r.Checkpoint {
		return task.Rewound{}, failure(task.ErrTypeCannotRewind, "turn %d of task %s committed checkpoint %s, the remote holds %s", in.Turn, in.TaskID, p.Checkpoint, r.Checkpoint)
	}
	if err := store.Rewind(ctx, e.cfg.DB, in.TaskID, p); err != nil {
		if errors.Is(err, store.ErrTurnRunning) || errors.Is(err, store.ErrNotFound) {
			return task.Rewound{}, &Error{Type: task.ErrTypeCannotRewind, Err: err}
		}
		return task.Rewound{}, &Error{Type: task.ErrTypeStoreUnavailable, Err: fmt.Errorf("rewinding task %s: %w", in.TaskID, err)}
	}
	e.cfg.Logger.Info("task rewound", "task_id", in.TaskID, "turn", in.Turn, "set_aside", r.Turns)
	return task.Rewound{Turn: in.Turn, SessionID: p.SessionID, LastMessageUUID: p.LastMessageUUID,
		Checkpoint: r.Checkpoint, SetAside: r.Turns, KeptRefs: r.Set}, nil
}

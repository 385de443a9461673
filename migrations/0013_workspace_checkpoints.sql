-- A managed task's checkpoints: the commit that recorded its worktree when a turn committed,
-- stored with the turn, and the task's last committed one on its executor row (the commit and its
-- turn), written in the turn's commit transaction. A retried attempt restores the worktree to the
-- executor row's checkpoint: the one Postgres committed, never a newer one a crash left pushed but
-- uncommitted. Empty (and turn 0) for an unmanaged task, or a managed one before its first commit:
-- its worktree then restores to its base.
ALTER TABLE task_turns ADD COLUMN checkpoint text NOT NULL DEFAULT '';
ALTER TABLE executors_running ADD COLUMN checkpoint text NOT NULL DEFAULT '';
ALTER TABLE executors_running ADD COLUMN checkpoint_turn integer NOT NULL DEFAULT 0;

-- executors_running says one thing per column.
--
-- The row holds the committed resume point (session_id, last_message_uuid: written only when a
-- turn commits), the attempt that owns the row (attempt_id, compare-and-set key) with the handle
-- that lets the host end that attempt from outside (attempt_token), and the host and process
-- serving the task. The session a process runs before its first commit is not recorded: nothing
-- can resume there.

UPDATE executors_running SET session_id = resume_token;
ALTER TABLE executors_running DROP COLUMN resume_token;
ALTER TABLE executors_running DROP COLUMN resumable;
ALTER TABLE executors_running DROP COLUMN metadata;
ALTER TABLE executors_running RENAME COLUMN execution_id TO attempt_id;
ALTER TABLE executors_running RENAME COLUMN executor_id TO host_id;
ALTER TABLE executors_running RENAME COLUMN worktree_path TO workspace;
ALTER TABLE executors_running RENAME COLUMN error_message TO error;
ALTER TABLE executors_running ADD COLUMN attempt_token bytea;
ALTER TABLE executors_running ADD COLUMN turn integer NOT NULL DEFAULT 0;

DROP INDEX executors_running_executor_id_idx;
CREATE INDEX executors_running_host_id_idx ON executors_running (host_id, status);

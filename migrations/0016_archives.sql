-- Retention and archives: a finished task (completed, cancelled, failed) keeps its rows for its
-- retention after its last activity; then the archive job writes it to one compressed file and
-- deletes its rows, a small batch at a time.
--
-- archived_at is set, with archive_path, once the task's archive file is durable, in the same
-- transaction that tells its watchers (a notice on drover_events with "archived": true); its rows
-- are deleted after that, the tasks row last. imported_at marks a task brought back from its
-- archive: readable, never run again.
ALTER TABLE tasks
    ADD COLUMN archived_at  timestamptz,
    ADD COLUMN archive_path text NOT NULL DEFAULT '',
    ADD COLUMN imported_at  timestamptz;

-- The job's search: finished tasks by their last activity, oldest first.
CREATE INDEX tasks_finished_idx ON tasks (updated_at, task_id)
    WHERE status IN ('completed', 'cancelled', 'failed') AND archived_at IS NULL;
CREATE INDEX tasks_archived_idx ON tasks (archived_at) WHERE archived_at IS NOT NULL;

-- A task's rows found by its id, for deletion.
CREATE INDEX session_chunks_task_idx ON session_chunks (task_id);
CREATE INDEX session_mirrors_task_idx ON session_mirrors (task_id);
CREATE INDEX api_idempotency_keys_task_idx ON api_idempotency_keys (task_id);
CREATE INDEX account_slots_task_idx ON account_slots (task_id);
CREATE INDEX account_queue_task_idx ON account_queue (task_id);

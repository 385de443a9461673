-- A task's title: what a person reads in lists. The workflow records it in its state; the
-- column keeps it beside the status for listing and searching.
ALTER TABLE tasks ADD COLUMN title text NOT NULL DEFAULT '';
UPDATE tasks SET title = coalesce(state->>'title', '');

-- Every change of what a task's listing shows is announced on drover_tasks with the task's id,
-- so that a reader (the console's list, board and inbox) reads again when, and only when,
-- something changed: the recorded state, a turn's accounting, a permission request.
CREATE FUNCTION drover_notify_task() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('drover_tasks', NEW.task_id);
    RETURN NULL;
END $$;

CREATE TRIGGER tasks_notify AFTER INSERT OR UPDATE ON tasks
    FOR EACH ROW EXECUTE FUNCTION drover_notify_task();
CREATE TRIGGER task_turns_notify AFTER INSERT OR UPDATE ON task_turns
    FOR EACH ROW EXECUTE FUNCTION drover_notify_task();
CREATE TRIGGER permission_requests_notify AFTER INSERT OR UPDATE ON permission_requests
    FOR EACH ROW EXECUTE FUNCTION drover_notify_task();

-- Who asked for a task's cancel (an API token's name, a user of the command line).
ALTER TABLE task_cancels ADD COLUMN requested_by text NOT NULL DEFAULT '';

-- The read side: what the command line and the HTTP API show of a task without asking Temporal.
--
-- tasks holds each task's state as its workflow last recorded it (task.State as JSON, its
-- status apart for filtering). The workflow records it whenever what it publishes changes;
-- (recorded_at, recorded_seq) orders the writes, so a late retry never overwrites a newer state.
CREATE TABLE tasks (
    task_id      text        PRIMARY KEY,
    status       text        NOT NULL,
    state        jsonb       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),   -- when the task was first recorded
    recorded_at  timestamptz NOT NULL,
    recorded_seq bigint      NOT NULL
);

-- A person's decision on a pending request, recorded before any worker applies it: set once,
-- by compare-and-set on a pending request without one, so that a second decision is refused.
-- The workflow applies it when its worker runs (status then leaves 'pending').
ALTER TABLE permission_requests ADD COLUMN requested_decision jsonb;      -- the task.Decision
ALTER TABLE permission_requests ADD COLUMN requested_by       text NOT NULL DEFAULT '';
ALTER TABLE permission_requests ADD COLUMN requested_at       timestamptz;
ALTER TABLE permission_requests ADD CONSTRAINT permission_requests_requested_check
    CHECK ((requested_decision IS NULL) = (requested_at IS NULL));

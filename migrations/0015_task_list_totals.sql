-- A listing costs a page, however many tasks the database holds.
--
-- What a list shows of a task (its turns, cost and tokens, the turn that runs, the requests that
-- wait for a person and since when, when it began and when anything last happened) is kept on
-- its tasks row as it changes, by triggers on the tables that change it, in the transaction
-- that changes them: a turn begun or committed (task_turns), a request asked or decided
-- (permission_requests), an attempt's executor row (executors_running). A list then reads a page
-- of tasks rows in index order and aggregates nothing.
--
-- A task that no workflow has recorded yet has a row too: its state is NULL, its status is
-- running while a turn runs and idle otherwise (kept by the same triggers), and its
-- (recorded_at, recorded_seq) is older than any record, so that the first record wins.

ALTER TABLE tasks ALTER COLUMN state DROP NOT NULL;
ALTER TABLE tasks ALTER COLUMN recorded_at SET DEFAULT '-infinity';
ALTER TABLE tasks ALTER COLUMN recorded_seq SET DEFAULT -1;
ALTER TABLE tasks
    ADD COLUMN updated_at            timestamptz NOT NULL DEFAULT now(),  -- the last activity
    ADD COLUMN turns                 integer     NOT NULL DEFAULT 0,      -- turns begun
    ADD COLUMN failed_turns          integer     NOT NULL DEFAULT 0,
    ADD COLUMN running_turns         integer     NOT NULL DEFAULT 0,
    ADD COLUMN running_turn          integer     NOT NULL DEFAULT 0,      -- the highest running turn; 0: none
    ADD COLUMN cost_usd              numeric     NOT NULL DEFAULT 0,      -- what the finished turns cost
    ADD COLUMN input_tokens          bigint      NOT NULL DEFAULT 0,
    ADD COLUMN output_tokens         bigint      NOT NULL DEFAULT 0,
    ADD COLUMN cache_read_tokens     bigint      NOT NULL DEFAULT 0,
    ADD COLUMN cache_creation_tokens bigint      NOT NULL DEFAULT 0,
    ADD COLUMN pending_approvals     integer     NOT NULL DEFAULT 0,      -- requests waiting for a person
    ADD COLUMN waiting_since         timestamptz;                         -- when the oldest of them was asked

-- The totals of the tasks already there, once.
INSERT INTO tasks (task_id, status, created_at)
SELECT task_id, 'idle', min(at) FROM (
    SELECT task_id, started_at AS at FROM task_turns
    UNION ALL SELECT task_id, created_at FROM permission_requests
    UNION ALL SELECT task_id, created_at FROM executors_running) s
GROUP BY task_id
ON CONFLICT (task_id) DO NOTHING;

UPDATE tasks t SET turns = a.turns, failed_turns = a.failed, running_turns = a.running,
    running_turn = a.running_turn, cost_usd = a.cost, input_tokens = a.input, output_tokens = a.output,
    cache_read_tokens = a.cache_read, cache_creation_tokens = a.cache_creation,
    created_at = least(t.created_at, a.first_at), updated_at = greatest(t.recorded_at, a.last_at),
    status = CASE WHEN t.state IS NULL THEN CASE WHEN a.running > 0 THEN 'running' ELSE 'idle' END ELSE t.status END
FROM (SELECT task_id, count(*)::int AS turns, (count(*) FILTER (WHERE status = 'failed'))::int AS failed,
        (count(*) FILTER (WHERE status = 'running'))::int AS running,
        coalesce(max(turn) FILTER (WHERE status = 'running'), 0) AS running_turn,
        sum(cost_usd) AS cost, sum(input_tokens) AS input, sum(output_tokens) AS output,
        sum(cache_read_tokens) AS cache_read, sum(cache_creation_tokens) AS cache_creation,
        min(started_at) AS first_at, max(coalesce(finished_at, started_at)) AS last_at
    FROM task_turns GROUP BY task_id) a
WHERE a.task_id = t.task_id;

UPDATE tasks t SET pending_approvals = a.pending, waiting_since = a.since,
    created_at = least(t.created_at, a.first_at), updated_at = greatest(t.updated_at, a.last_at)
FROM (SELECT task_id, (count(*) FILTER (WHERE status = 'pending' AND requested_at IS NULL))::int AS pending,
        min(created_at) FILTER (WHERE status = 'pending' AND requested_at IS NULL) AS since,
        min(created_at) AS first_at, max(updated_at) AS last_at
    FROM permission_requests GROUP BY task_id) a
WHERE a.task_id = t.task_id;

UPDATE tasks t SET created_at = least(t.created_at, x.created_at), updated_at = greatest(t.updated_at, x.updated_at)
FROM executors_running x WHERE x.task_id = t.task_id;

UPDATE tasks SET updated_at = greatest(updated_at, recorded_at) WHERE state IS NOT NULL;

-- A turn begun, finished, failed or billed. Deleting turns (archival) deletes the task's row
-- with them, so that no trigger follows deletes.
CREATE FUNCTION task_turns_totals() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    d_running integer := coalesce((NEW.status = 'running')::int, 0) - coalesce((OLD.status = 'running')::int, 0);
BEGIN
    INSERT INTO tasks AS t (task_id, status, created_at, updated_at, turns, failed_turns, running_turns,
        running_turn, cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens)
    VALUES (NEW.task_id, CASE WHEN NEW.status = 'running' THEN 'running' ELSE 'idle' END,
        NEW.started_at, coalesce(NEW.finished_at, NEW.started_at),
        CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE 0 END,
        (NEW.status = 'failed')::int - coalesce((OLD.status = 'failed')::int, 0),
        d_running, CASE WHEN NEW.status = 'running' THEN NEW.turn ELSE 0 END,
        NEW.cost_usd - coalesce(OLD.cost_usd, 0),
        NEW.input_tokens - coalesce(OLD.input_tokens, 0),
        NEW.output_tokens - coalesce(OLD.output_tokens, 0),
        NEW.cache_read_tokens - coalesce(OLD.cache_read_tokens, 0),
        NEW.cache_creation_tokens - coalesce(OLD.cache_creation_tokens, 0))
    ON CONFLICT (task_id) DO UPDATE SET
        turns = t.turns + EXCLUDED.turns,
        failed_turns = t.failed_turns + EXCLUDED.failed_turns,
        running_turns = t.running_turns + EXCLUDED.running_turns,
        running_turn = CASE WHEN d_running = 0 THEN t.running_turn
            ELSE coalesce((SELECT max(turn) FROM task_turns r WHERE r.task_id = NEW.task_id AND r.status = 'running'), 0) END,
        status = CASE WHEN t.state IS NOT NULL THEN t.status
            WHEN t.running_turns + EXCLUDED.running_turns > 0 THEN 'running' ELSE 'idle' END,
        cost_usd = t.cost_usd + EXCLUDED.cost_usd,
        input_tokens = t.input_tokens + EXCLUDED.input_tokens,
        output_tokens = t.output_tokens + EXCLUDED.output_tokens,
        cache_read_tokens = t.cache_read_tokens + EXCLUDED.cache_read_tokens,
        cache_creation_tokens = t.cache_creation_tokens + EXCLUDED.cache_creation_tokens,
        created_at = least(t.created_at, EXCLUDED.created_at),
        updated_at = greatest(t.updated_at, EXCLUDED.updated_at);
    RETURN NULL;
END $$;

CREATE TRIGGER task_turns_totals AFTER INSERT OR UPDATE ON task_turns
    FOR EACH ROW EXECUTE FUNCTION task_turns_totals();

-- A request asked, re-asked, decided or applied: the task's waits.
CREATE FUNCTION permission_requests_waits() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    d_pending integer := coalesce((NEW.status = 'pending' AND NEW.requested_at IS NULL)::int, 0)
        - coalesce((OLD.status = 'pending' AND OLD.requested_at IS NULL)::int, 0);
BEGIN
    INSERT INTO tasks AS t (task_id, status, created_at, updated_at, pending_approvals, waiting_since)
    VALUES (NEW.task_id, 'idle', NEW.created_at, NEW.updated_at, d_pending,
        CASE WHEN d_pending > 0 THEN NEW.created_at END)
    ON CONFLICT (task_id) DO UPDATE SET
        pending_approvals = t.pending_approvals + EXCLUDED.pending_approvals,
        waiting_since = CASE WHEN d_pending = 0 THEN t.waiting_since
            ELSE (SELECT min(created_at) FROM permission_requests r
                WHERE r.task_id = NEW.task_id AND r.status = 'pending' AND r.requested_at IS NULL) END,
        created_at = least(t.created_at, EXCLUDED.created_at),
        updated_at = greatest(t.updated_at, EXCLUDED.updated_at);
    RETURN NULL;
END $$;

CREATE TRIGGER permission_requests_waits AFTER INSERT OR UPDATE ON permission_requests
    FOR EACH ROW EXECUTE FUNCTION permission_requests_waits();

-- An attempt's executor row: activity. A write that moves no time leaves the task's row alone.
CREATE FUNCTION executors_running_activity() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tasks AS t (task_id, status, created_at, updated_at)
    VALUES (NEW.task_id, 'idle', NEW.created_at, NEW.updated_at)
    ON CONFLICT (task_id) DO UPDATE SET
        created_at = least(t.created_at, EXCLUDED.created_at),
        updated_at = greatest(t.updated_at, EXCLUDED.updated_at)
    WHERE t.created_at > EXCLUDED.created_at OR t.updated_at < EXCLUDED.updated_at;
    RETURN NULL;
END $$;

CREATE TRIGGER executors_running_activity AFTER INSERT OR UPDATE ON executors_running
    FOR EACH ROW EXECUTE FUNCTION executors_running_activity();

-- One index per filter a list offers, each in the list's order (newest first, ties by id), so
-- that a page, and the page after a cursor, reads its rows and no more.
CREATE INDEX tasks_created_idx ON tasks (created_at DESC, task_id DESC);
CREATE INDEX tasks_status_created_idx ON tasks (status, created_at DESC, task_id DESC);
CREATE INDEX tasks_awaiting_created_idx ON tasks (created_at DESC, task_id DESC) WHERE pending_approvals > 0;
CREATE INDEX tasks_updated_idx ON tasks (updated_at DESC, task_id DESC);

-- The inbox: the requests that wait for a person, oldest first, by cursor.
CREATE INDEX permission_requests_waiting_idx ON permission_requests (created_at, task_id, request_id)
    WHERE status = 'pending' AND requested_at IS NULL;

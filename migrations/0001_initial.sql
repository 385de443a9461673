-- The state of drover's tasks that must outlive a process: who runs each task and where its
-- session can resume, the per-task event log, and one accounting row per turn.

-- One row per task: the attempt that owns it (execution_id, compare-and-set key), the host and
-- process serving it, and the committed resume point. session_id is the session the latest
-- process runs; resume_token and last_message_uuid are written together, only when a turn
-- commits, and are what the next attempt resumes from.
CREATE TABLE executors_running (
    task_id           text PRIMARY KEY,
    session_id        text        NOT NULL DEFAULT '',
    resume_token      text        NOT NULL DEFAULT '',
    status            text        NOT NULL DEFAULT 'starting'
        CHECK (status IN ('starting', 'running', 'idle', 'failed', 'stopped')),
    resumable         boolean     NOT NULL DEFAULT false,
    last_message_uuid text        NOT NULL DEFAULT '',
    execution_id      text        NOT NULL,
    executor_id       text        NOT NULL DEFAULT '',
    pid               integer,
    worktree_path     text        NOT NULL DEFAULT '',
    model             text        NOT NULL DEFAULT '',
    error_message     text        NOT NULL DEFAULT '',
    metadata          jsonb       NOT NULL DEFAULT '{}',
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

-- What a host serves: found again after a worker restarts.
CREATE INDEX executors_running_executor_id_idx ON executors_running (executor_id, status);

-- The last sequence number handed out per task. Appenders update this row (and so queue behind
-- each other) inside the transaction that inserts their events, which keeps a task's sequence
-- numbers gapless and makes them commit in order.
CREATE TABLE task_event_counters (
    task_id  text PRIMARY KEY,
    last_seq bigint NOT NULL CHECK (last_seq >= 0)
);

-- The normalized event log: seq counts 1, 2, 3, … per task.
CREATE TABLE task_events (
    task_id    text        NOT NULL,
    seq        bigint      NOT NULL CHECK (seq >= 1),
    turn       integer     NOT NULL DEFAULT 0,
    attempt    integer     NOT NULL DEFAULT 0,
    type       text        NOT NULL CHECK (type <> ''),
    payload    jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, seq)
);

-- One accounting row per turn. The resume point is the one recorded by the turn's first attempt;
-- cost and tokens are written once, when the turn finishes (finished_at goes from NULL to set).
CREATE TABLE task_turns (
    task_id               text        NOT NULL,
    turn                  integer     NOT NULL CHECK (turn >= 0),
    prompt                text        NOT NULL,
    prompt_uuid           text        NOT NULL DEFAULT '',
    resume_session_id     text        NOT NULL DEFAULT '',
    resume_from_uuid      text        NOT NULL DEFAULT '',
    status                text        NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
    attempts              integer     NOT NULL DEFAULT 1 CHECK (attempts >= 1),
    cost_usd              numeric     NOT NULL DEFAULT 0,
    input_tokens          bigint      NOT NULL DEFAULT 0,
    output_tokens         bigint      NOT NULL DEFAULT 0,
    cache_read_tokens     bigint      NOT NULL DEFAULT 0,
    cache_creation_tokens bigint      NOT NULL DEFAULT 0,
    duration_ms           bigint      NOT NULL DEFAULT 0,
    num_turns             integer     NOT NULL DEFAULT 0,
    result_uuid           text        NOT NULL DEFAULT '',
    last_message_uuid     text        NOT NULL DEFAULT '',
    is_error              boolean     NOT NULL DEFAULT false,
    error                 text        NOT NULL DEFAULT '',
    started_at            timestamptz NOT NULL DEFAULT now(),
    finished_at           timestamptz,
    PRIMARY KEY (task_id, turn),
    CHECK ((status = 'running') = (finished_at IS NULL))
);

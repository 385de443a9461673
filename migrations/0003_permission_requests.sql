-- Permission requests: a tool call (or a question, or a plan) that waits for a person's decision
-- in a supervised or plan-mode task. A request is recorded once, when the CLI first asks; when
-- a retried attempt of the same turn asks again for the same tool with the same input, it finds
-- this row (input_hash) and is not put to the person a second time.
CREATE TABLE permission_requests (
    task_id         text        NOT NULL,
    request_id      text        NOT NULL,   -- drover's id: stable across the CLI's re-asks
    turn            integer     NOT NULL CHECK (turn >= 1),
    attempt         integer     NOT NULL CHECK (attempt >= 1),  -- the attempt that asked last
    cli_request_id  text        NOT NULL,   -- the CLI's request_id of the last ask
    kind            text        NOT NULL CHECK (kind IN ('tool', 'question', 'plan')),
    tool_name       text        NOT NULL,
    tool_use_id     text        NOT NULL DEFAULT '',
    input           jsonb       NOT NULL,
    input_hash      text        NOT NULL,
    summary         text        NOT NULL DEFAULT '',
    suggestions     jsonb,
    blocked_path    text        NOT NULL DEFAULT '',
    cli_reason      text        NOT NULL DEFAULT '',
    reasked         boolean     NOT NULL DEFAULT false,
    status          text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'allowed', 'denied', 'expired', 'cancelled')),
    decision        jsonb,                  -- the answer the CLI gets (engine's form)
    decided_by      text        NOT NULL DEFAULT '',
    decision_reason text        NOT NULL DEFAULT '',
    decided_at      timestamptz,
    deadline        timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, request_id),
    CHECK ((status = 'pending') = (decided_at IS NULL))
);

-- Re-asks: the same tool with the same input in the same turn.
CREATE INDEX permission_requests_same_ask_idx ON permission_requests (task_id, turn, input_hash);

-- The inbox: everything waiting, oldest first.
CREATE INDEX permission_requests_pending_idx ON permission_requests (created_at) WHERE status = 'pending';

-- What the API billed each attempt of a turn, as the attempt learns it: written while the
-- attempt runs (each billed answer, then the turn's result), so that an attempt lost with its
-- worker keeps what it spent. The commit of a turn marks its attempt committed: that cost is the
-- turn's (task_turns.cost_usd). The others are what the task's failed attempts cost.
CREATE TABLE task_attempt_costs (
    task_id    text        NOT NULL,
    attempt_id text        NOT NULL,
    turn       integer     NOT NULL CHECK (turn >= 1),
    cost_usd   numeric     NOT NULL DEFAULT 0 CHECK (cost_usd >= 0),
    committed  boolean     NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, attempt_id)
);

-- The accounts a fleet's hosts share (the credential their CLIs use), and what limits them.
-- An account is named by a keyed hash of its credential: the key is this installation's own,
-- made once and kept here; the credential is never stored.
CREATE TABLE installation (
    singleton   boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    account_key bytea       NOT NULL CHECK (length(account_key) >= 32),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per account that ran a turn. reason is NULL while nothing limits the account;
-- usage_limit or rate_limit until blocked_until (the announced reset), after which exactly one
-- turn (probe_task, until probe_until) may go; spend_cap until an operator resumes it.
CREATE TABLE accounts (
    account_id    text        PRIMARY KEY,
    reason        text        CHECK (reason IN ('usage_limit', 'rate_limit', 'spend_cap')),
    limit_type    text,
    blocked_until timestamptz,
    limited_at    timestamptz,
    probe_task    text,
    probe_until   timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- The tasks whose turn waits for its account, so that whoever lifts the limit can tell them.
CREATE TABLE account_waits (
    task_id    text        PRIMARY KEY,
    account_id text        NOT NULL,
    turn       integer     NOT NULL,
    reason     text        NOT NULL,
    limit_type text,
    since      timestamptz NOT NULL DEFAULT now(),
    resets_at  timestamptz,
    retry_at   timestamptz
);
CREATE INDEX account_waits_account ON account_waits (account_id, since);

-- The turns running on an account, one lease each: a host renews its leases while the turn
-- runs; a lease not renewed (its host died) expires and frees the slot.
CREATE TABLE account_slots (
    account_id  text        NOT NULL,
    task_id     text        NOT NULL,
    host_id     text        NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT now(),
    lease_until timestamptz NOT NULL,
    PRIMARY KEY (account_id, task_id)
);

-- The turns waiting for a slot of their account, in order of arrival. A turn that stops asking
-- (seen_at grows old) leaves the queue.
CREATE TABLE account_queue (
    account_id  text        NOT NULL,
    task_id     text        NOT NULL,
    enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    seen_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, task_id)
);

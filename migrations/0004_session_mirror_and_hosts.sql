-- The session mirror: what the CLI needs to resume a session on a host that never ran it (its
-- transcript, subagent transcripts, tool results stored apart, file-history backups), kept as
-- chunks per file. A chunk at file_offset 0 starts a new version of its file (the file was
-- rewritten, or its chain of appends grew long); later chunks append to it. When a new version
-- commits, the older one is deleted. Each chunk carries the hash of its own bytes and of the
-- whole file once it is applied, so a restore verifies what it rebuilds. Chunks are written in
-- the transaction that commits the turn, so the mirror never lags the resume point it serves.
CREATE TABLE session_chunks (
    session_id  text        NOT NULL,
    path        text        NOT NULL,   -- relative to the CLI's config folder
    seq         integer     NOT NULL CHECK (seq >= 1),
    file_offset bigint      NOT NULL CHECK (file_offset >= 0),
    data        bytea       NOT NULL,   -- the bytes, DEFLATE-compressed
    data_size   integer     NOT NULL CHECK (data_size >= 0),
    data_sha256 bytea       NOT NULL,
    file_size   bigint      NOT NULL CHECK (file_size = file_offset + data_size),
    file_sha256 bytea       NOT NULL,
    task_id     text        NOT NULL,
    turn        integer     NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, path, seq)
);

-- Which chunk ends each mirrored file of a session at its last commit: a restore checks the
-- chunks against it, so a chunk that went missing is seen, not silently skipped.
CREATE TABLE session_mirrors (
    session_id text        PRIMARY KEY,
    manifest   jsonb       NOT NULL,    -- {"<path>": <seq of the file's last chunk>, ...}
    task_id    text        NOT NULL,
    turn       integer     NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The worker hosts: each beats here every few seconds. A host whose beat is stale is gone; its
-- running attempts are failed so that their turns move to a live host. A draining host takes
-- no new turns.
CREATE TABLE hosts (
    host_id      text        PRIMARY KEY,
    pid          integer,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    draining     boolean     NOT NULL DEFAULT false
);

-- The Idempotency-Key of each task creation the HTTP API accepted: the digest of the request it
-- came with, the task it names, and, once the task was created, the answer. A request sent again
-- with the same key and the same body is answered from here and creates nothing; the same key
-- with another body is refused.
CREATE TABLE api_idempotency_keys (
    key            text        PRIMARY KEY,
    request_sha256 bytea       NOT NULL,
    task_id        text        NOT NULL,
    response       jsonb,
    created_at     timestamptz NOT NULL DEFAULT now(),
    completed_at   timestamptz
);

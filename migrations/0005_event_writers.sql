-- How far each attempt's event writer got: the number of events it emitted that are stored, and
-- the sequence number of the last. Written by the statement that appends the events, so after a
-- write whose outcome was lost (the connection dropped before the reply) the writer reads here
-- whether it landed, and never stores the same events twice.
CREATE TABLE task_event_writers (
    task_id    text   NOT NULL,
    attempt_id text   NOT NULL,
    emitted    bigint NOT NULL CHECK (emitted >= 0),
    last_seq   bigint NOT NULL,
    PRIMARY KEY (task_id, attempt_id)
);

-- task_events partitioned by time: one partition a week (Monday 00:00 UTC to the next,
-- task_events_wYYYYMMDD after its first day) and a DEFAULT partition, task_events_default, for
-- a row whose week has no partition yet, so that an append never fails. Old events then leave
-- by dropping their week once every task with events in it is archived (archive.Job), rather
-- than by deleting rows; store.EnsureEventPartitions makes the weeks ahead of time.
--
-- A partitioned table's unique keys must hold the partition key, so the primary key is
-- (task_id, seq, created_at): it is still the index that reads a task's events by (task_id,
-- seq), in every partition. (task_id, seq) stays unique and gapless as before, by the task's
-- task_event_counters row: every append numbers its events after the counter's value and
-- advances it in the same statement, holding the counter row's lock until commit (see
-- store.AppendEvents), and an import numbers nothing (it writes its archive's rows, and
-- refuses a task Postgres has, events included).
--
-- The existing rows are moved into their weeks' partitions, created here from the week of the
-- oldest row through two weeks after the current one.
ALTER TABLE task_events RENAME TO task_events_unpartitioned;
ALTER INDEX task_events_pkey RENAME TO task_events_unpartitioned_pkey;

CREATE TABLE task_events (
    task_id    text        NOT NULL,
    seq        bigint      NOT NULL CHECK (seq >= 1),
    turn       integer     NOT NULL DEFAULT 0,
    attempt    integer     NOT NULL DEFAULT 0,
    type       text        NOT NULL CHECK (type <> ''),
    payload    jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, seq, created_at)
) PARTITION BY RANGE (created_at);

CREATE TABLE task_events_default PARTITION OF task_events DEFAULT;

DO $$
DECLARE
    week timestamp := date_trunc('week', coalesce(
        (SELECT min(created_at) FROM task_events_unpartitioned), now()) AT TIME ZONE 'UTC');
    last timestamp := date_trunc('week', greatest(now(),
        coalesce((SELECT max(created_at) FROM task_events_unpartitioned), now())) AT TIME ZONE 'UTC')
        + interval '2 weeks';
BEGIN
    WHILE week <= last LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF task_events FOR VALUES FROM (%L) TO (%L)',
            'task_events_w' || to_char(week, 'YYYYMMDD'),
            (week AT TIME ZONE 'UTC')::text, ((week + interval '1 week') AT TIME ZONE 'UTC')::text);
        week := week + interval '1 week';
    END LOOP;
END
$$;

INSERT INTO task_events (task_id, seq, turn, attempt, type, payload, created_at)
SELECT task_id, seq, turn, attempt, type, payload, created_at FROM task_events_unpartitioned;

DROP TABLE task_events_unpartitioned;

ANALYZE task_events;

-- A task's cancel, recorded when it is accepted and before Temporal is asked to cancel the task's
-- workflow run: an attempt of that run's turns that begins afterwards refuses to run, so that no
-- request reaches the API for a cancelled task, whenever its worker comes back.
CREATE TABLE task_cancels (
    task_id      text        PRIMARY KEY,
    run_id       text        NOT NULL,            -- the workflow run the cancel was for
    requested_at timestamptz NOT NULL DEFAULT now()
);

// Package store keeps drover's durable state in Postgres through pgx: the schema migrations, the
// executors_running row that says which attempt owns a task and where its session resumes, the
// per-task event log with its notifications, and one accounting row per turn.
//
// It promises:
//
//   - ownership is compare-and-set: a write on behalf of an attempt that no longer owns the task
//     fails with ErrStaleAttempt and changes nothing;
//   - every retry of a turn resumes from the point recorded by the turn's first attempt, and a
//     turn's cost and tokens are written exactly once, however often it is committed;
//   - a task's events are numbered 1, 2, 3, … without gaps or duplicates, even under concurrent
//     appenders, and become visible in that order; each append is announced on EventsChannel
//     with ids only, never payloads;
//   - WatchEvents delivers every event of a task exactly once and in order, across lost
//     notifications and dropped connections.
//
// Functions take a DB (or a TxDB where they need their own transaction), which *pgxpool.Pool,
// *pgx.Conn and pgx.Tx all satisfy, so callers can compose them inside their own transactions.
package store

// Package activities runs the side effects of a drover task: it assigns a task
// to a host, runs one turn of the Claude Code CLI through the stream-json
// adapter while persisting its events and resume point in Postgres, and
// interrupts or stops the CLI on request.
//
// A turn's attempts are idempotent from the outside: every attempt resumes the
// session at the last message committed before the turn began, sends the same
// prompt again, and the turn's accounting is committed once. Postgres
// (executors_running) is the source of truth for where a session can resume;
// the executor row is written with compare-and-set on the attempt's execution
// id, so a stale attempt can never move it.
//
// The CLI process of a task outlives its turn on the host that ran it (for
// Config.KeepAlive), so the next turn skips the process start. A kept process is
// reused only when its session is exactly at the committed resume point;
// otherwise it is stopped and a fresh one resumes from Postgres.
package activities

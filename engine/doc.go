// Package engine runs the turns of drover's tasks on one worker host, knowing nothing of
// Temporal: it keeps a pool of Claude Code CLI processes (one per task, kept warm between turns),
// runs each attempt of a turn from a transaction that claims it to the one function that records
// its end, stores the turn's events in batches, and commits the turn's resume point and
// accounting once.
//
// It promises:
//
//   - every attempt of a turn resumes the session where the turn began (the point its first
//     attempt recorded), sends the prompt again under an uuid of its own, and the turn's cost and
//     tokens are committed exactly once, after its events are stored;
//   - every exit of an attempt — a commit, any failure, a panic, a cancellation — goes through
//     settle, which leaves the task's executor row in a true state (idle with its warm process,
//     failed or stopped without a pid) and closes the turn's record when no attempt follows;
//   - every error RunTurn returns is an *Error whose Type (task.ErrType*) says what happened and
//     whether another attempt can help;
//   - a process that failed, was cancelled or stands anywhere but at the committed point is
//     stopped with its whole tree (the tools it started included); a kept process is reused only
//     when it stands exactly at the turn's resume point.
//
// The activities package is its Temporal edge; tests drive it with internal/testkit/fakecli.
package engine

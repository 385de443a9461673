// Package workflows holds TaskWorkflow, the deterministic orchestration of one
// drover task: it queues the prompts that arrive as Updates, runs them one
// turn at a time on the task's executor host, keeps the task's resume point and
// totals, and continues as new before its history grows large.
//
// # Promises
//
//   - A prompt accepted by the prompt Update runs exactly once, in the order it
//     was accepted, under the turn number and prompt uuid it was given. Prompts
//     sent while a turn runs wait for their own turn; none is merged or dropped,
//     and pending prompts travel with every continue-as-new.
//   - A failed turn never fails the task: its error is kept in State.LastError,
//     it counts as a failed turn, and the next prompt runs as usual.
//   - A turn's cost and tokens are added to the totals once, when its RunTurn returns: the
//     store commits a turn's accounting once, and an attempt that finds its turn already
//     committed answers from that record.
//   - Every turn of a task runs on one host queue, learned once through the
//     AssignHost activity and learned again only when that host stops taking work.
//   - Cancelling the workflow cancels the running turn and stops the task's
//     executor; closing it lets the queued prompts run first.
//
// # Turn numbers and totals
//
// State.Turn is the highest turn number given out so far (the last accepted
// prompt), so Turn minus the pending prompts minus a running turn is the number
// of turns that have ended. Totals.Turns counts ended turns whatever their
// outcome; Totals.FailedTurns counts the subset that failed (a result with status
// failed, or a RunTurn activity that gave up). State.LastError keeps the most
// recent failure, naming its turn and, for an activity failure, its error type;
// a later successful turn does not clear it.
//
// # Updates and their rejections
//
// Validators reject, before anything reaches history: an empty or oversized
// prompt or an attachment path outside the workspace (task.ErrTypeInvalidPrompt,
// checked by task.ValidatePrompt), a full queue (task.ErrTypeQueueFull), and
// anything but a query once the task is closing or has ended
// (task.ErrTypeTaskClosed). A run whose params fail task.Params.Validate sets its
// handlers anyway, rejects every Update with task.ErrTypeInvalidParams naming the
// problem (so the prompt of an Update-with-Start learns why), and fails. A
// retried Update with the same update id is deduplicated by Temporal within a
// run.
//
// # Determinism
//
// The package does no I/O, reads no clock, starts no goroutines and ranges over
// no maps; it talks to the world only through the activities named in package
// task, and logs only through workflow.GetLogger.
package workflows

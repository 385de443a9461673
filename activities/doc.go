// Package activities is the Temporal edge of drover's turn engine (package engine): RunTurn runs
// one attempt of a turn, InterruptTurn and StopExecutor reach a task's CLI on its host, and
// AssignHost tells a workflow which host queue will run its turns.
//
// It promises that every error leaving an activity carries a drover type (task.ErrType*) with
// the retryability that type has (task.Retryable): errors are classified once, by the engine,
// and converted here, never wrapped on the way. The one exception is a turn cancelled by
// Temporal, which is acknowledged as Temporal's own cancellation (its details carry
// task.ErrTypeCancelled) so that the workflow and the UI see a cancelled activity.
package activities

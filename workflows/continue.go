package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// wantContinueAsNew reports whether this run has grown enough to hand over to
// a new one. A run that has started no turn continues only on its own history
// length: its history is mostly the carried state, and a new run would start
// just as large.
func (s *taskState) wantContinueAsNew(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	if info.GetCurrentHistoryLength() >= s.lim.maxHistoryLength {
		return true
	}
	if s.turnsThisRun == 0 {
		return false
	}
	return s.turnsThisRun >= s.lim.maxTurnsPerRun ||
		info.GetContinueAsNewSuggested() ||
		info.GetCurrentHistorySize() >= s.lim.maxHistoryBytes
}

// continueAsNew ends this run and starts the next with the carried state. The
// caller has made sure no turn runs and every Update handler has finished, and
// nothing yields between that check and this call, so no accepted prompt is
// left behind.
func (s *taskState) continueAsNew(ctx workflow.Context) error {
	next := s.p
	next.Carry = s.carry()
	next.First = nil // queued in the first run, and carried if it still waits
	workflow.GetLogger(ctx).Info("continuing as new",
		"turn", s.turn, "pending", len(next.Carry.Pending), "turns_this_run", s.turnsThisRun,
		"history_length", workflow.GetInfo(ctx).GetCurrentHistoryLength())
	return workflow.NewContinueAsNewError(ctx, task.WorkflowName, next)
}

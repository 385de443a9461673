package workflows

import (
	"path/filepath"
	"testing"

	"github.com/drover-run/drover/task"
)

// decideHistoryFile is a task's history recorded from a real server by
// TestRecordDecisionsHistory (go test -tags record -run TestRecordDecisionsHistory ./workflows/):
// one turn that asks twice; the first request is decided by the decide Update, which drover's
// clients no longer send, the second by the decide_later signal, the way drover decides.
const decideHistoryFile = "decide_history.json"

// A history with a decision taken by the decide Update replays: the workflow keeps the
// Update's handler, and its check, for the histories that hold one.
func TestReplayDecisions(t *testing.T) {
	t.Parallel()
	path := filepath.Join("testdata", decideHistoryFile)
	hist := readHistory(t, decideHistoryFile)
	var updates, signals int
	for _, ev := range hist.GetEvents() {
		if a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil && a.GetAcceptedRequest().GetInput().GetName() == task.UpdateDecide {
			updates++
		}
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == task.SignalDecide {
			signals++
		}
	}
	if updates != 1 || signals != 1 {
		t.Fatalf("%s holds %d decide Updates and %d decide_later signals, want one of each", path, updates, signals)
	}
	replay(t, hist)
}

package workflows

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/drover-run/drover/task"
)

// rewindHistoryFile is a task's history recorded from a real server by TestRecordRewindHistory
// (go test -tags record -run TestRecordRewindHistory ./workflows/): a managed task forked from
// another's turn runs two turns, is rewound to its first, and runs a third.
const rewindHistoryFile = "rewind_history.json"

// A history holding a fork's start and a rewind replays, and its third turn was sent the rewound
// point.
func TestReplayRewind(t *testing.T) {
	t.Parallel()
	path := filepath.Join("testdata", rewindHistoryFile)
	hist := readHistory(t, rewindHistoryFile)
	var rewinds int
	var turns []task.RunTurnInput
	for _, ev := range hist.GetEvents() {
		if a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil && a.GetAcceptedRequest().GetInput().GetName() == task.UpdateRewind {
			rewinds++
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == task.ActivityRunTurn {
			var in task.RunTurnInput
			if err := json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &in); err != nil {
				t.Fatal(err)
			}
			turns = append(turns, in)
		}
	}
	if rewinds != 1 || len(turns) != 3 {
		t.Fatalf("%s holds %d rewinds and %d turns, want 1 and 3", path, rewinds, len(turns))
	}
	if turns[0].Fork == nil || turns[0].LastMessageUUID != "m0" || !turns[2].Rewound || turns[2].LastMessageUUID != "m1" {
		t.Errorf("the turns were sent %+v", turns)
	}
	replay(t, hist)
}

package workflows

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

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
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var hist historypb.History
	if err := (temporalproto.CustomJSONUnmarshalOptions{}).Unmarshal(b, &hist); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
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
	replayer := worker.NewWorkflowReplayer()
	Register(replayer)
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := replayer.ReplayWorkflowHistory(logger, &hist); err != nil {
		t.Fatalf("replaying %s: %v", path, err)
	}
}

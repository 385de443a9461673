package workflows

import (
	"log/slog"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
)

// historyFile is a task's history recorded from a real server by the record
// test (go test -tags record -run TestRecordHistory ./workflows/): an
// Update-with-Start with the first prompt, a second prompt, a query, an
// interrupt of the running turn and a close.
const historyFile = "task_history.json"

func TestReplayRecordedHistory(t *testing.T) {
	t.Parallel()
	replayer := worker.NewWorkflowReplayer()
	Register(replayer)
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := replayer.ReplayWorkflowHistoryFromJSONFile(logger, filepath.Join("testdata", historyFile)); err != nil {
		t.Fatalf("replaying %s: %v", historyFile, err)
	}
}

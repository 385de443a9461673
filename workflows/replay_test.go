package workflows

import "testing"

// historyFile is a task's history recorded from a real server by the record
// test (go test -tags record -run TestRecordHistory ./workflows/): an
// Update-with-Start with the first prompt, a second prompt, a query, an
// interrupt of the running turn and a close.
const historyFile = "task_history.json"

func TestReplayRecordedHistory(t *testing.T) {
	t.Parallel()
	replay(t, readHistory(t, historyFile))
}

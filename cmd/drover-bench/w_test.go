package main

import "testing"

// TestWorkspaceFigures runs W1-W3 quick: a repository of 1,000 files, a task's checkpoints, its
// restores and a new host's worktree, each beside its plain-git baseline.
func TestWorkspaceFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a repository and runs git on it")
	}
	_, rows := quickRun(t, "W1", "W2", "W3")
	for _, id := range []string{"W1", "W2", "W3"} {
		if r := rows[id]; r.Unit != "ms" || r.Baseline <= 0 || r.Ratio <= 0 {
			t.Errorf("%s row = %+v", id, r)
		}
	}
}

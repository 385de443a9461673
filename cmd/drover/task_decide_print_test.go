package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/drover-run/drover/task"
)

// TestRecordedDecisionWording: a decision recorded but not waited for is said to be applied by
// the task's worker, with the flag that waits for it, whether or not a worker runs now.
func TestRecordedDecisionWording(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	a := &app{stdout: &out}
	if err := a.printDecided("t1", "r1", &decideFlags{verb: "deny", out: &output{}}, task.DecisionRecord{}, false); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.Contains(got, "when the task's worker runs") || !strings.Contains(got, "task t1: deny of request r1 recorded; the task's worker applies it (--wait DURATION waits until it has)") {
		t.Errorf("printed %q", got)
	}
}

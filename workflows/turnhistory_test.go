package workflows

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/drover-run/drover/task"
)

// saveTurnHistory, when set, is where TestWarmTurnHistory writes the history it recorded, before
// it checks anything: how testdata/record_state_activity.json was made by the code of its time.
var saveTurnHistory = flag.String("turnhistory.save", "", "write the warm turns' history to this file")

// saveIdleHistory, when set, is where TestWarmTurnHistoryWithIdleTimeout writes its history: how
// testdata/idle_timer_per_turn.json was made by the code of its time.
var saveIdleHistory = flag.String("turnhistory.saveidle", "", "write the warm turns' history, with an idle timeout, to this file")

// recordStateActivityHistory is a task of warm turns recorded when the read side's record was an
// activity of its own (recordAsActivity): it must replay as it ran.
const recordStateActivityHistory = "record_state_activity.json"

// idleTimerPerTurnHistory is a task with an idle timeout recorded when each wait for a prompt
// started a timer of its own: it must replay as it ran.
const idleTimerPerTurnHistory = "idle_timer_per_turn.json"

// warmTurns is how many warm turns TestWarmTurnHistory runs after the first one.
const warmTurns = 5

// What one warm turn (a prompt to an idle task, to the turn's end) may add to the task's history,
// each a call the server serves and persists. A turn needs one workflow task to take its prompt
// (the one Update) and schedule RunTurn and one to take the result; RunTurn is its one activity;
// each of those workflow tasks upserts what changed (the status to running, then status, cost and
// turns) in one command; the read side's record rides the same workflow tasks as a local
// activity's marker, one for each state. No signal, no timer; and nothing else (events counts
// every event of the turn, so that a new kind of event cannot slip in).
const (
	maxWorkflowTasksPerTurn = 2
	maxActivitiesPerTurn    = 1
	maxUpsertsPerTurn       = 2
	maxMarkersPerTurn       = 2
	maxUpdatesPerTurn       = 1
	// maxEventsPerTurn: the two workflow tasks' scheduled, started and completed (6), the
	// Update's accepted and completed (2), RunTurn's scheduled, started and completed (3), two
	// upserts and two markers.
	maxEventsPerTurn = 15
)

// stateWitness keeps what RecordState was asked to write, in the order asked.
type stateWitness struct {
	mu      sync.Mutex
	records []task.StateRecord
}

func (w *stateWitness) record(_ context.Context, rec task.StateRecord) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.records = append(w.records, rec)
	return nil
}

// idleAfter reports whether the last record shows the task idle after turns turns.
func (w *stateWitness) idleAfter(turns int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.records) == 0 {
		return false
	}
	st := w.records[len(w.records)-1].State
	return st.Status == task.StatusIdle && st.Totals.Turns == turns
}

func (w *stateWitness) all() []task.StateRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.records)
}

// turnCount is what one warm turn added to the history.
type turnCount struct {
	workflowTasks, upserts, markers, updates int
	signals, timers, events                  int
	activities                               []string
}

// A warm turn on a real server costs the task's history at most two workflow tasks, one
// activity (RunTurn) and two upserts, with no activity of its own for the read side, whose
// record still reaches RecordState for every change, in the workflow's order; the history
// replays, and so does one recorded when the record was an activity.
func TestWarmTurnHistory(t *testing.T) {
	t.Parallel()
	r := newServerRig(t)

	witness := &stateWitness{}
	hist := r.history(r.runWarmTurns(witness, params()))
	if *saveTurnHistory != "" {
		writeHistory(t, hist, *saveTurnHistory)
	}

	counts := countWarmTurns(hist)
	require.Len(t, counts, warmTurns, "a segment of history for each warm turn")
	for i, n := range counts {
		t.Logf("warm turn %d: %d events: %d workflow tasks, activities %v, %d upserts, %d local activity markers, %d updates, %d signals, %d timers",
			i+2, n.events, n.workflowTasks, n.activities, n.upserts, n.markers, n.updates, n.signals, n.timers)
		assert.LessOrEqual(t, n.workflowTasks, maxWorkflowTasksPerTurn, "workflow tasks of warm turn %d", i+2)
		assert.LessOrEqual(t, len(n.activities), maxActivitiesPerTurn, "activities of warm turn %d: %v", i+2, n.activities)
		assert.Equal(t, []string{task.ActivityRunTurn}, n.activities, "warm turn %d runs RunTurn and nothing else", i+2)
		assert.LessOrEqual(t, n.upserts, maxUpsertsPerTurn, "search attribute upserts of warm turn %d", i+2)
		assert.Equal(t, maxMarkersPerTurn, n.markers, "warm turn %d records running and idle for the read side, once each", i+2)
		assert.Equal(t, maxUpdatesPerTurn, n.updates, "warm turn %d takes its prompt, one Update", i+2)
		assert.Zero(t, n.signals, "signals in warm turn %d", i+2)
		assert.Zero(t, n.timers, "timers started in warm turn %d", i+2)
		assert.LessOrEqual(t, n.events, maxEventsPerTurn, "events of warm turn %d", i+2)
	}

	// The witness: every state reached RecordState, in the workflow's order, ending completed.
	recs := witness.all()
	require.NotEmpty(t, recs)
	for i := 1; i < len(recs); i++ {
		prev, cur := recs[i-1], recs[i]
		assert.False(t, cur.At.Before(prev.At) || cur.At.Equal(prev.At) && cur.Seq < prev.Seq,
			"record %d (%s, seq %d) goes back from %s, seq %d", i, cur.At, cur.Seq, prev.At, prev.Seq)
	}
	last := recs[len(recs)-1].State
	assert.Equal(t, task.StatusCompleted, last.Status)
	assert.Equal(t, warmTurns+1, last.Totals.Turns)
	running := 0
	for _, r := range recs {
		if r.State.Status == task.StatusRunning {
			running++
		}
	}
	assert.Equal(t, warmTurns+1, running, "each turn recorded as running")

	replay(t, hist)
	replay(t, readHistory(t, recordStateActivityHistory))
}

// runWarmTurns runs a task on stub activities: a first turn, then warmTurns prompts, each sent
// once the witness shows the task idle after the turn before, then a close.
func (r *serverRig) runWarmTurns(witness *stateWitness, p task.Params) (taskID, runID string) {
	t := r.t
	id := uuid.NewString()[:8]
	shared, host := "shared-"+id, task.HostQueue("host-"+id)
	sw := worker.New(r.c, shared, worker.Options{})
	Register(sw)
	sw.RegisterActivityWithOptions(func(context.Context) (string, error) { return host, nil },
		activity.RegisterOptions{Name: task.ActivityAssignHost})
	sw.RegisterActivityWithOptions(witness.record, activity.RegisterOptions{Name: task.ActivityRecordState})
	r.startWorkers(sw, r.hostWorker(host, func(ctx context.Context, in task.RunTurnInput) (task.RunTurnResult, error) {
		return task.RunTurnResult{Status: task.TurnCompleted, SessionID: "s", LastMessageUUID: uuid.NewString(),
			CostUSD: 0.01, DurationMS: 10, Attempt: int(activity.GetInfo(ctx).Attempt)}, nil
	}))

	taskID = "task-" + id
	r.startTask(taskID, shared, p, "prompt 1", nil)
	for k := 1; k <= warmTurns+1; k++ {
		if k > 1 {
			r.mustUpdate(taskID, task.UpdatePrompt, fmt.Sprintf("p%d", k), nil, task.Prompt{Text: fmt.Sprintf("prompt %d", k)})
		}
		require.Eventually(t, func() bool { return witness.idleAfter(k) }, time.Minute, 10*time.Millisecond,
			"the read side's record shows the task idle after turn %d", k)
	}
	r.mustUpdate(taskID, task.UpdateClose, "close", nil)
	st, runID := r.finish(taskID)
	require.Equal(t, task.StatusCompleted, st.Status)
	return taskID, runID
}

// countWarmTurns cuts the history at each accepted Update and counts, for each prompt after the
// first, what came between its acceptance and the next Update's (the next prompt or the close).
func countWarmTurns(hist *historypb.History) []turnCount {
	var counts []turnCount
	var cur *turnCount
	prompts := 0
	for _, ev := range hist.Events {
		if ev.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED && cur != nil {
			cur.events++
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			if cur != nil {
				counts = append(counts, *cur)
				cur = nil
			}
			if ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName() == task.UpdatePrompt {
				if prompts++; prompts > 1 {
					cur = &turnCount{updates: 1, events: 1}
				}
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if cur != nil {
				cur.signals++
			}
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			if cur != nil {
				cur.timers++
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			if cur != nil {
				cur.workflowTasks++
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if cur != nil {
				cur.activities = append(cur.activities, ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName())
			}
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			if cur != nil {
				cur.upserts++
			}
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if cur != nil && ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" {
				cur.markers++
			}
		}
	}
	return counts
}

// A task with an idle timeout keeps one timer across its turns: a warm turn starts and cancels
// none (before, each wait for a prompt started a timer and the prompt cancelled it), and the
// history replays, as does one recorded when every wait started its own timer.
func TestWarmTurnHistoryWithIdleTimeout(t *testing.T) {
	t.Parallel()
	r := newServerRig(t)

	p := params()
	p.IdleTimeout = time.Hour
	hist := r.history(r.runWarmTurns(&stateWitness{}, p))
	if *saveIdleHistory != "" {
		writeHistory(t, hist, *saveIdleHistory)
	}
	counts := countWarmTurns(hist)
	require.Len(t, counts, warmTurns, "a segment of history for each warm turn")
	for i, n := range counts {
		t.Logf("warm turn %d: %d events, %d timers started", i+2, n.events, n.timers)
		assert.Zero(t, n.timers, "timers started in warm turn %d", i+2)
		assert.LessOrEqual(t, n.events, maxEventsPerTurn, "events of warm turn %d", i+2)
	}
	started := 0
	for _, ev := range hist.Events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED {
			started++
		}
	}
	assert.Equal(t, 1, started, "one idle timer in the whole run")

	replay(t, hist)
	replay(t, readHistory(t, idleTimerPerTurnHistory))
}

package workflows

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// recordStateVersion marks the runs that record their state for the read side (RecordState):
// runs from before it replay without; version 1 runs it as an activity, version 2 as a local
// activity.
const recordStateVersion = "record-state"

// The versions of recordStateVersion.
const (
	recordAsActivity workflow.Version = 1
	// recordLocally records in the workflow task that changed the state: the write rides that
	// task (a marker in the history) instead of costing an activity task and a workflow task of
	// its own, and it lands before the commands that follow the change are sent.
	recordLocally workflow.Version = 2
)

// maxLocalRecordAttempts bounds the attempts of one local record; the recorder tries again
// after retryMax, so that a database that is down does not keep the workflow task open.
const maxLocalRecordAttempts = 3

// maxRecordedPrompt bounds the text of each queued prompt in a recorded state.
const maxRecordedPrompt = 200

// finalRecordTimeout bounds how long a task that ends waits to record its final state.
const finalRecordTimeout = time.Minute

// readSide is what the run knows of its records for the read side.
type readSide struct {
	on bool
	// local: the record is a local activity (recordLocally).
	local bool
	// changed counts the states that differ from the one before; recorded is the count the
	// recorder last wrote; last is the last state's JSON, to tell a change.
	changed  int64
	recorded int64
	last     []byte
}

// startRecording starts, on runs that record their state, the recorder: in the background, it
// records the task's latest state in Postgres whenever it changed, one write at a time.
func (s *taskState) startRecording(ctx workflow.Context) {
	v := workflow.GetVersion(ctx, recordStateVersion, workflow.DefaultVersion, recordLocally)
	if v < recordAsActivity {
		return
	}
	s.rs.on, s.rs.local = true, v >= recordLocally
	s.stateChanged()
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			if err := workflow.Await(ctx, func() bool { return s.rs.changed != s.rs.recorded }); err != nil || ctx.Err() != nil {
				return // cancelled: the task records its final state itself
			}
			if err := s.recordState(ctx, 0); err != nil && ctx.Err() == nil {
				// Retried as the activity is; an error that comes back at once must not spin.
				workflow.GetLogger(ctx).Warn("recording the task's state for the read side", "error", err)
				if workflow.Sleep(ctx, s.lim.retryMax) != nil {
					return
				}
			}
		}
	})
}

// stateChanged notes the task's state for the recorder if it differs from the last one.
func (s *taskState) stateChanged() {
	if !s.rs.on {
		return
	}
	b, err := json.Marshal(s.recordedState())
	if err != nil || bytes.Equal(b, s.rs.last) {
		return
	}
	s.rs.last = b
	s.rs.changed++
}

// recordedState is the snapshot as the read side keeps it: queued prompts clipped.
func (s *taskState) recordedState() task.State {
	st := s.snapshot()
	st.Pending = slices.Clone(st.Pending)
	for i := range st.Pending {
		st.Pending[i].Prompt.Text = truncate(st.Pending[i].Prompt.Text, maxRecordedPrompt)
		st.Pending[i].Prompt.Attachments = nil
	}
	return st
}

// recordState writes the latest state; a timeout above zero bounds the whole write (retries
// included). Without one, an activity is retried until it lands; a local activity gives up after
// a few attempts, and the recorder tries again later.
func (s *taskState) recordState(ctx workflow.Context, timeout time.Duration) error {
	seq := s.rs.changed
	rec := task.StateRecord{TaskID: s.taskID, At: workflow.Now(ctx), Seq: seq, State: s.recordedState()}
	retry := &temporal.RetryPolicy{InitialInterval: s.lim.retryInitial, MaximumInterval: s.lim.retryMax}
	var fut workflow.Future
	if s.rs.local {
		retry.MaximumAttempts = maxLocalRecordAttempts
		if timeout <= 0 {
			timeout = maxLocalRecordAttempts * (s.lim.interruptTimeout + s.lim.retryInitial)
		}
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout:    s.lim.interruptTimeout,
			ScheduleToCloseTimeout: timeout,
			RetryPolicy:            retry,
			Summary:                "record state " + string(rec.State.Status),
		})
		fut = workflow.ExecuteLocalActivity(lctx, task.ActivityRecordState, rec)
	} else {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue:              workflow.GetInfo(ctx).TaskQueueName,
			StartToCloseTimeout:    s.lim.interruptTimeout,
			ScheduleToCloseTimeout: timeout,
			RetryPolicy:            retry,
			Summary:                "record state " + string(rec.State.Status),
		})
		fut = workflow.ExecuteActivity(actx, task.ActivityRecordState, rec)
	}
	err := fut.Get(ctx, nil)
	if err == nil && s.rs.recorded < seq {
		s.rs.recorded = seq
	}
	return err
}

// recordFinal records the state a task ends with, waiting at most finalRecordTimeout.
func (s *taskState) recordFinal(ctx workflow.Context) {
	if !s.rs.on {
		return
	}
	s.stateChanged()
	if err := s.recordState(ctx, finalRecordTimeout); err != nil {
		workflow.GetLogger(ctx).Warn("recording the task's final state for the read side", "error", err)
	}
}

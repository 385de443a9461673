package task

import "time"

// ActivityRecordState records a task's state where the read side reads it (a StateRecord):
// Postgres, so that listing and showing tasks need no worker. Any worker may run it.
const ActivityRecordState = "RecordState"

// StateRecord is the input of ActivityRecordState: the task's state at a point of its workflow's
// time. At, then Seq, order the records of a task: an older one never replaces a newer one.
type StateRecord struct {
	TaskID string    `json:"task_id"`
	At     time.Time `json:"at"`
	Seq    int64     `json:"seq"`
	State  State     `json:"state"`
}

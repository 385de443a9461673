package task

// UpdateRewind takes a managed task back to an earlier turn, conversation and files: its input is
// a RewindRequest, its result a Rewound. The task must be idle (no turn running or queued).
const UpdateRewind = "rewind"

// ActivityRewind sets a managed task's committed point back to a turn's: its checkpoint refs on
// the workspace remote and its executor row in Postgres. It runs on the shared queue.
const ActivityRewind = "Rewind"

// RewindRequest is the input of UpdateRewind: the turn whose end the task goes back to (0: its
// start, before its first turn).
type RewindRequest struct {
	Turn int `json:"turn"`
}

// RewindInput is the input of ActivityRewind.
type RewindInput struct {
	TaskID string `json:"task_id"`
	Repo   string `json:"repo"`
	Turn   int    `json:"turn"`
}

// Rewound is the result of ActivityRewind and of UpdateRewind: where the task now stands.
type Rewound struct {
	// Turn is the turn gone back to; the task's next turn resumes at its end.
	Turn int `json:"turn"`
	// SessionID and LastMessageUUID are the new resume point ("" for turn 0: a new session).
	SessionID       string `json:"session_id,omitempty"`
	LastMessageUUID string `json:"last_message_uuid,omitempty"`
	// Checkpoint is the turn's checkpoint (turn 0: the task's base): the files the next turn
	// starts from.
	Checkpoint string `json:"checkpoint"`
	// SetAside are the later turns whose checkpoints were kept aside, under KeptRefs.
	SetAside []int  `json:"set_aside,omitempty"`
	KeptRefs string `json:"kept_refs,omitempty"`
}

// ErrTypeCannotRewind: a rewind was refused: the task has no managed workspace, a turn runs or
// waits in its queue, or the turn is not one it can go back to.
const ErrTypeCannotRewind = "CannotRewind"

// ForkPoint starts a managed task from another's turn (Params.Fork): its worktree from the turn's
// checkpoint on a branch of its own, its conversation resumed at the turn's last message in a
// session of its own (--fork-session), so that the other task goes on untouched.
type ForkPoint struct {
	// Task and Turn name the turn forked from (Turn 0: the task's start).
	Task string `json:"task"`
	Turn int    `json:"turn"`
	// SessionID and LastMessageUUID are where the turn left its conversation ("" for turn 0);
	// Checkpoint is the commit of its files ("" for turn 0: the task's base).
	SessionID       string `json:"session_id,omitempty"`
	LastMessageUUID string `json:"last_message_uuid,omitempty"`
	Checkpoint      string `json:"checkpoint,omitempty"`
}

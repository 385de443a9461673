package workflows

import "time"

// limits are the bounds TaskWorkflow works within. They are not part of
// task.Params because changing one changes the commands a workflow issues, and
// so must go through versioning rather than through a caller. Tests shrink them.
type limits struct {
	// maxPending bounds the prompts waiting for a turn (the running one not counted).
	maxPending int
	// maxQueuedBytes bounds all waiting prompts together, JSON-encoded, so that
	// the continue-as-new input that carries them stays well under Temporal's
	// 2 MiB payload limit. One prompt is bounded by task.MaxPromptBytes.
	maxQueuedBytes int
	// maxLastErrorBytes bounds State.LastError.
	maxLastErrorBytes int

	// maxTurnsPerRun, maxHistoryLength and maxHistoryBytes trigger
	// continue-as-new, besides the server's own suggestion.
	maxTurnsPerRun   int
	maxHistoryLength int
	maxHistoryBytes  int

	// hostStartTimeout is the ScheduleToStart bound of a turn on its host
	// queue: a host that does not pick the turn up in time is taken as gone.
	hostStartTimeout time.Duration
	// maxReassign bounds how often one turn looks for a new host.
	maxReassign int
	// heartbeatTimeout is the HeartbeatTimeout of RunTurn.
	heartbeatTimeout time.Duration
	// retryInitial is the first retry interval of RunTurn; it doubles up to retryMax.
	retryInitial time.Duration
	retryMax     time.Duration

	// assignTimeout bounds AssignHost, attempts included.
	assignTimeout time.Duration
	// interruptTimeout bounds each of InterruptTurn's ScheduleToStart and
	// StartToClose; stopTimeout does the same for StopExecutor.
	interruptTimeout time.Duration
	stopTimeout      time.Duration
	// controlAttempts bounds the attempts of InterruptTurn and StopExecutor.
	controlAttempts int
}

// defaultLimits are the limits of TaskWorkflow.
var defaultLimits = limits{
	maxPending:        100,
	maxQueuedBytes:    1 << 20,
	maxLastErrorBytes: 2 << 10,

	maxTurnsPerRun:   100,
	maxHistoryLength: 2000,
	maxHistoryBytes:  4 << 20,

	hostStartTimeout: 30 * time.Second,
	maxReassign:      5,
	heartbeatTimeout: 10 * time.Second,
	retryInitial:     time.Second,
	retryMax:         time.Minute,

	assignTimeout:    10 * time.Minute,
	interruptTimeout: 10 * time.Second,
	stopTimeout:      time.Minute,
	controlAttempts:  3,
}

package task

// SignalHostLost tells a task that a host is lost (a live host saw its beat in Postgres go
// stale): a turn running or waiting on that host's queue is given to another host at once, and
// the task's next turn is not sent there. A HostLost is its argument.
const SignalHostLost = "host_lost"

// HostLost is the argument of SignalHostLost.
type HostLost struct {
	// HostQueue is the lost host's queue (see HostQueue).
	HostQueue string `json:"host_queue"`
	// Attempt is the last attempt of the task's turn the lost host ran, counted over the turn;
	// 0 when it ran none of the current turn.
	Attempt int `json:"attempt,omitempty"`
	// Turn is the turn that attempt belonged to.
	Turn int `json:"turn,omitempty"`
}

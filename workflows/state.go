package workflows

import (
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// taskState is everything one run of TaskWorkflow knows. Update handlers and
// the turn loop share it; workflow code runs one coroutine at a time, so no
// locking is needed, but every change that must not be lost happens without a
// yield in between (see the loop in workflow.go).
type taskState struct {
	p          task.Params
	lim        limits
	taskID     string
	firstRunID string
	// invalidParams is why p cannot run, nil when it can. Every Update is
	// rejected with it, and the run ends as soon as its handlers are set.
	invalidParams error

	// turn is the highest turn number given out.
	turn int
	// idle is the run's idle timer, kept across its waits for work (idleTimerVersion).
	idle idleTimer
	// pending are the accepted prompts that wait for their turn, in order;
	// queuedBytes is the sum of their encoded sizes.
	pending     []task.QueuedPrompt
	queuedBytes int
	// running is the turn number of the running turn, 0 when none runs;
	// lastTurn is the last turn that started.
	running  int
	lastTurn int
	// turnsThisRun counts the turns started since this run began.
	turnsThisRun int
	// closing: no more prompts are accepted; the task ends once the queue drains.
	closing bool
	// rewinding: a rewind is under way (UpdateRewind); queued prompts wait for it.
	rewinding bool
	// rewound: the task was rewound since its last turn ran; the next turn says so to its host.
	rewound bool
	// final is the status the task ended with, empty while it lives.
	final task.Status

	sessionID string
	lastUUID  string
	hostQueue string
	// cancelTurn cancels the running turn's RunTurn on its host queue, while one runs; lostTurn
	// is set when it was cancelled because its host is lost (see hostLost).
	cancelTurn workflow.CancelFunc
	lostTurn   *task.HostLost
	lastError  string
	totals     task.Totals

	// recent are the latest accepted prompt Updates (see task.Carry.Recent).
	recent []task.RecentPrompt

	// awaiting are the permission requests waiting for a person, in the order asked;
	// awaitingChanged counts changes to them, so that the deadline watcher wakes up.
	awaiting        []task.PendingRequest
	awaitingChanged int
	// grants are the permissions granted for the rest of the task.
	grants []task.Grant
	// decided are the latest decisions (see task.Carry.Decided).
	decided []task.DecisionRecord
	// delivering counts the decisions on their way to the host; the run does not continue as
	// new before they have arrived.
	delivering int

	// hostBudget is the default budget of the host that ran the last turn; exhausted is set
	// while the task's budget is spent; budgeted: the running turn runs with a budget (see
	// budgetChangeID).
	hostBudget task.Budget
	exhausted  *task.BudgetExhausted
	// budgetBy names who changed the budget last (BudgetChange.By); a run that continued as
	// new starts without it.
	budgetBy string
	budgeted bool

	// attention is set while the task needs a person (see resumeRefused); newSessionTurn is the
	// turn a person chose to start in a new session.
	attention      *task.Attention
	newSessionTurn int

	published published

	// wait is what the running turn waits for, while it waits for its account.
	wait          *task.Wait
	publishedWait publishedWait
	// rs is what the run knows of its records for the read side.
	rs readSide
}

func newTaskState(p task.Params, lim limits, taskID, firstRunID string) *taskState {
	s := &taskState{p: p, lim: lim, taskID: taskID, firstRunID: firstRunID}
	if f := p.Fork; f != nil && p.Carry == nil {
		// A fork's first turn resumes the other task's conversation at the turn forked from.
		s.sessionID, s.lastUUID = f.SessionID, f.LastMessageUUID
	}
	if c := p.Carry; c != nil {
		s.turn = c.Turn
		s.sessionID = c.SessionID
		s.lastUUID = c.LastMessageUUID
		s.hostQueue = c.HostQueue
		s.totals = c.Totals
		s.closing = c.Closing
		s.lastError = c.LastError
		s.pending = slices.Clone(c.Pending)
		s.recent = slices.Clone(c.Recent)
		s.awaiting = slices.Clone(c.Awaiting)
		s.grants = slices.Clone(c.Grants)
		s.decided = slices.Clone(c.Decided)
		s.hostBudget = c.HostBudget
		if c.BudgetExhausted != nil {
			x := *c.BudgetExhausted
			s.exhausted = &x
		}
		s.attention = cloneAttention(c.Attention)
		s.newSessionTurn = c.NewSessionTurn
		for _, q := range s.pending {
			s.queuedBytes += task.PromptSize(q.Prompt)
		}
		// The carried params must not carry themselves into the next run.
		s.p.Carry = nil
	}
	return s
}

// status is the task's status as QueryState and DroverStatus show it.
func (s *taskState) status() task.Status {
	switch {
	case s.final != "":
		return s.final
	case s.wait != nil:
		return waitStatus(s.wait)
	case s.running != 0:
		return task.StatusRunning
	case s.exhausted != nil:
		return task.StatusBudgetExhausted
	case s.attention != nil:
		return task.StatusNeedsAttention
	case s.closing:
		return task.StatusClosing
	}
	return task.StatusIdle
}

// snapshot is the answer to QueryState.
func (s *taskState) snapshot() task.State {
	return task.State{
		Status:          s.status(),
		Title:           s.p.Title,
		Workspace:       s.p.Workspace,
		Repo:            s.p.Repo,
		Base:            s.p.Base,
		Model:           s.p.Profile.Model,
		PermissionMode:  s.p.Profile.PermissionMode,
		Turn:            s.turn,
		RunningTurn:     s.running,
		SessionID:       s.sessionID,
		LastMessageUUID: s.lastUUID,
		HostQueue:       s.hostQueue,
		Totals:          s.totals,
		Pending:         slices.Clone(s.pending),
		LastError:       s.lastError,
		Awaiting:        slices.Clone(s.awaiting),
		Grants:          slices.Clone(s.grants),
		Budget:          s.budget(),
		BudgetBy:        s.budgetBy,
		BudgetExhausted: cloneExhausted(s.exhausted),
		Wait:            s.waitSnapshot(),
		Attention:       cloneAttention(s.attention),
	}
}

// waitSnapshot is a copy of the running turn's wait for its account, nil when none.
func (s *taskState) waitSnapshot() *task.Wait {
	if s.wait == nil {
		return nil
	}
	w := *s.wait
	return &w
}

// carry is what the next run needs: small values and the waiting prompts.
func (s *taskState) carry() *task.Carry {
	return &task.Carry{
		Turn:            s.turn,
		SessionID:       s.sessionID,
		LastMessageUUID: s.lastUUID,
		HostQueue:       s.hostQueue,
		Totals:          s.totals,
		Pending:         slices.Clone(s.pending),
		Closing:         s.closing,
		LastError:       s.lastError,
		Recent:          slices.Clone(s.recent),
		Awaiting:        slices.Clone(s.awaiting),
		Grants:          slices.Clone(s.grants),
		Decided:         slices.Clone(s.decided),
		HostBudget:      s.hostBudget,
		BudgetExhausted: cloneExhausted(s.exhausted),
		Attention:       cloneAttention(s.attention),
		NewSessionTurn:  s.newSessionTurn,
	}
}

// maxRecentPrompts bounds the prompt Updates remembered across continue-as-new.
const maxRecentPrompts = 64

// recentAnswer returns the answer an earlier run gave to the prompt Update id.
func (s *taskState) recentAnswer(id string) (task.PromptAccepted, bool) {
	if id == "" {
		return task.PromptAccepted{}, false
	}
	for _, r := range s.recent {
		if r.UpdateID == id {
			return r.Accepted, true
		}
	}
	return task.PromptAccepted{}, false
}

// remember records the answer to the prompt Update id.
func (s *taskState) remember(id string, a task.PromptAccepted) {
	if id == "" {
		return
	}
	s.recent = append(s.recent, task.RecentPrompt{UpdateID: id, Accepted: a})
	if n := len(s.recent) - maxRecentPrompts; n > 0 {
		s.recent = slices.Clone(s.recent[n:])
	}
}

// pop takes the first waiting prompt off the queue.
func (s *taskState) pop() task.QueuedPrompt {
	q := s.pending[0]
	s.pending = slices.Clone(s.pending[1:])
	s.queuedBytes -= task.PromptSize(q.Prompt)
	return q
}

// setLastError records msg as the task's last error, bounded in size.
func (s *taskState) setLastError(msg string) {
	s.lastError = truncate(msg, s.lim.maxLastErrorBytes)
}

package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/task"
)

// runNext runs the first waiting prompt as a turn. A turn that fails is
// recorded and does not end the task; runNext returns an error only when the
// workflow is cancelled.
func (s *taskState) runNext(ctx workflow.Context) error {
	q := s.pop()
	if q.Prompt.Mode != "" {
		s.p.Profile.PermissionMode = q.Prompt.Mode
	}
	s.running = q.Turn
	s.lastTurn = q.Turn
	s.turnsThisRun++
	s.publish(ctx)
	failed := s.totals.FailedTurns
	err := s.runTurn(ctx, q)
	s.running = 0
	s.rewound = false
	if err == nil {
		// Whatever the turn still had waiting, nothing will ask for again.
		s.closeTurnRequests(ctx, q.Turn, "the turn ended")
	}
	if err == nil {
		log := workflow.GetLogger(ctx)
		if s.totals.FailedTurns != failed {
			log.Warn("turn failed", "turn", q.Turn, "error", s.lastError)
		} else {
			log.Info("turn ended", "turn", q.Turn, "session_id", s.sessionID)
		}
	}
	return err
}

// turnTries is what runTurn carries from one try of a turn to the next.
type turnTries struct {
	q task.QueuedPrompt
	// attemptsBefore counts the attempts made before this try (on other hosts, before waits).
	attemptsBefore int
	// reassigned counts the tries that looked for a new host.
	reassigned int
	// onHost is the host queue the turn was last given to, since onHostSince; lastHost is the
	// host of the task's previous turn, if it keeps the task.
	onHost      string
	onHostSince time.Time
	lastHost    string
}

// runTurn runs one turn on the task's host, looking for a new host when the
// current one stops taking work.
func (s *taskState) runTurn(ctx workflow.Context, q task.QueuedPrompt) error {
	log := workflow.GetLogger(ctx)
	t := &turnTries{q: q, lastHost: s.hostQueue}
	s.budgeted = s.budgetOn(ctx)
	for ; ; t.reassigned++ {
		if s.hostQueue == "" {
			host, err := s.assignHost(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				s.turnGaveUp(fmt.Sprintf("turn %d failed: no host to run it: %v", q.Turn, err))
				return nil
			}
			s.hostQueue = host
			log.Info("host assigned", "turn", q.Turn, "host_queue", host)
		}
		if s.hostQueue != t.onHost {
			t.onHost, t.onHostSince = s.hostQueue, workflow.Now(ctx)
		}
		res, err := s.executeRunTurn(ctx, q, t.attemptsBefore, t.lastHost != "" && s.hostQueue == t.lastHost)
		if w, attempt, ok := s.accountWaitOf(ctx, err); ok {
			// Not the turn's failure: it waits for its account, then runs again from its
			// committed point, continuing the count of attempts.
			if err := s.waitForAccount(ctx, q.Turn, w); err != nil {
				return err
			}
			t.attemptsBefore = max(attempt, t.attemptsBefore+1)
			t.reassigned--
			continue
		}
		if again, err := s.afterTry(ctx, t, res, err); !again {
			return err
		}
	}
}

// afterTry says what the end of one try of a turn means: the turn ended, and is recorded; it
// tries again (its host is alive but busy, or another host takes it over); or the task was
// cancelled (the error).
func (s *taskState) afterTry(ctx workflow.Context, t *turnTries, res task.RunTurnResult, err error) (again bool, _ error) {
	log := workflow.GetLogger(ctx)
	q := t.q
	moved, movedAttempt := s.movedTurn(ctx, err)
	switch {
	case err == nil:
		s.turnEnded(q.Turn, res)
		if s.budgeted {
			s.budgetAfterTurn(ctx, q.Turn, res)
		}
		return false, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	case isScheduleToStartTimeout(err):
		gone := s.hostQueue
		if s.hostBusy(ctx, gone, t.onHostSince) {
			// Alive, and busy with other tasks' turns: the turn waits in its queue, as turns
			// do on a host at its limit. Not a move.
			log.Info("host has not started the turn yet but is alive; the turn waits for it", "turn", q.Turn, "host_queue", gone)
			t.reassigned--
			return true, nil
		}
		s.hostQueue = ""
		if t.reassigned < s.lim.maxReassign {
			log.Warn("host did not pick up the turn; assigning another", "turn", q.Turn, "host_queue", gone)
			return true, nil
		}
		s.turnGaveUp(fmt.Sprintf("turn %d failed: no host picked it up within %s, %d tries (last %s)",
			q.Turn, s.lim.hostStartTimeout, t.reassigned+1, gone))
		return false, nil
	case moved != "":
		// The host drained or was lost mid-turn: any live host takes the turn at once, from
		// its committed point, continuing the count of attempts.
		gone := s.hostQueue
		s.hostQueue = ""
		t.attemptsBefore = max(movedAttempt, t.attemptsBefore+1)
		if t.reassigned < s.lim.maxReassign {
			log.Warn("host stopped running the turn; assigning another", "turn", q.Turn, "host_queue", gone, "reason", moved)
			return true, nil
		}
		s.turnErrored(q.Turn, err)
		return false, nil
	case s.budgeted && s.refusedForBudget(ctx, q, err):
		return false, nil
	case s.resumeRefused(ctx, q, err):
		return false, nil
	default:
		s.turnErrored(q.Turn, err)
		return false, nil
	}
}

// movedTurn reports whether a RunTurn error means that the turn's host could not run it (it
// drains, or it is lost: reported by the attempt's error, or by SignalHostLost, which cancelled
// the activity), with why and the last attempt it made.
func (s *taskState) movedTurn(ctx workflow.Context, err error) (reason string, attempt int) {
	lost := s.lostTurn
	s.lostTurn = nil
	if err == nil || ctx.Err() != nil {
		return "", 0
	}
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr) && task.Reassign(appErr.Type()):
		reason = appErr.Type()
		var d task.ReassignDetails
		if appErr.HasDetails() && appErr.Details(&d) == nil {
			attempt = d.Attempt
		}
	case lost != nil:
		reason = task.ErrTypeHostLost
		attempt = lost.Attempt
	default:
		return "", 0
	}
	if workflow.GetVersion(ctx, "reassign-lost-host", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return "", 0 // histories from before hosts handed turns over: a failed turn
	}
	return reason, attempt
}

// hostBusy reports whether the host of queue, which has not started the turn in time, is alive
// and takes work: then the turn keeps waiting for it, for up to a turn's timeout since it was
// given to that host, rather than moving (a host lost for good does not beat).
func (s *taskState) hostBusy(ctx workflow.Context, queue string, since time.Time) bool {
	if workflow.GetVersion(ctx, "busy-host-keeps-turn", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return false // histories from before: the turn moves
	}
	if workflow.Now(ctx).Sub(since) >= s.turnTimeout() {
		return false
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              workflow.GetInfo(ctx).TaskQueueName,
		ScheduleToCloseTimeout: s.lim.assignTimeout,
		StartToCloseTimeout:    s.lim.interruptTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: s.lim.retryInitial,
			MaximumInterval: s.lim.retryMax,
		},
		Summary: "is the host alive",
	})
	var alive bool
	if err := workflow.ExecuteActivity(actx, task.ActivityHostTakesWork, queue).Get(ctx, &alive); err != nil {
		if ctx.Err() == nil {
			workflow.GetLogger(ctx).Warn("could not learn whether the host is alive; the turn moves", "host_queue", queue, "error", err)
		}
		return false
	}
	return alive
}

// assignHost asks a worker on the shared queue for its own host queue.
func (s *taskState) assignHost(ctx workflow.Context) (string, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              workflow.GetInfo(ctx).TaskQueueName,
		ScheduleToCloseTimeout: s.lim.assignTimeout,
		StartToCloseTimeout:    s.lim.interruptTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: s.lim.retryInitial,
			MaximumInterval: s.lim.retryMax,
		},
		Summary: "assign host",
	})
	var host string
	if err := workflow.ExecuteActivity(actx, task.ActivityAssignHost).Get(ctx, &host); err != nil {
		return "", fmt.Errorf("assigning a host: %w", err)
	}
	if strings.TrimSpace(host) == "" {
		return "", errors.New("assigning a host: AssignHost returned no queue name")
	}
	return host, nil
}

// warmTurnPriority is the priority key of a turn on the host that ran the task's previous turn
// (Temporal's keys run smaller first; unset is the middle one, 3). Such a turn likely finds the
// task's CLI process still idle on that host: taking it before the first turns of other tasks
// uses that process instead of evicting it to start theirs, so a host with more tasks than
// process slots finishes tasks rather than restarting CLIs. Servers run it when their matching
// uses priorities (matching.useNewMatcher; see deploy/temporal/dynamicconfig.yaml).
const warmTurnPriority = 2

// executeRunTurn runs the RunTurn activity on the host queue; warm says the host ran the task's
// previous turn: the turn then goes to the host's warm queue (task.WarmQueue), first.
func (s *taskState) executeRunTurn(ctx workflow.Context, q task.QueuedPrompt, attemptsBefore int, warm bool) (task.RunTurnResult, error) {
	var priority temporal.Priority
	queue := s.hostQueue
	// Asked on every turn, so that its marker lands in the first turn's workflow task rather
	// than adding to a warm turn's history.
	warmQueue := workflow.GetVersion(ctx, "warm-turn-queue", workflow.DefaultVersion, 1) == 1
	if warm {
		priority.PriorityKey = warmTurnPriority
		if warmQueue {
			queue = task.WarmQueue(s.hostQueue)
		}
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              queue,
		Priority:               priority,
		ScheduleToStartTimeout: s.lim.hostStartTimeout,
		StartToCloseTimeout:    s.turnTimeout(),
		HeartbeatTimeout:       s.lim.heartbeatTimeout,
		WaitForCancellation:    true,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        s.lim.retryInitial,
			BackoffCoefficient:     2,
			MaximumInterval:        s.lim.retryMax,
			MaximumAttempts:        int32(s.p.MaxAttempts),
			NonRetryableErrorTypes: task.NonRetryableErrorTypes(),
		},
		Summary: fmt.Sprintf("turn %d", q.Turn),
	})
	in := task.RunTurnInput{
		TaskID:          s.taskID,
		Turn:            q.Turn,
		Prompt:          q.Prompt,
		PromptUUID:      q.PromptUUID,
		Workspace:       s.p.Workspace,
		Repo:            s.p.Repo,
		Base:            s.p.Base,
		Fork:            s.p.Fork,
		Rewound:         s.rewound,
		Profile:         s.p.Profile,
		SessionID:       s.sessionID,
		LastMessageUUID: s.lastUUID,
		Grants:          slices.Clone(s.grants),
		ApprovalTimeout: s.p.ApprovalTimeout,
		AttemptsBefore:  attemptsBefore,
	}
	s.budgetInput(&in)
	in.NewSession = s.newSessionTurn == q.Turn
	var res task.RunTurnResult
	actx, s.cancelTurn = workflow.WithCancel(actx)
	defer func() { s.cancelTurn = nil }()
	fut := workflow.ExecuteActivity(actx, task.ActivityRunTurn, in)
	s.cancelAtOnce(ctx, fut, q.Turn)
	if err := fut.Get(ctx, &res); err != nil {
		return task.RunTurnResult{}, fmt.Errorf("running turn %d: %w", q.Turn, err)
	}
	return res, nil
}

// turnTimeout bounds one attempt of a turn. A turn that may wait for a person (supervised,
// plan) also gets the time a request may wait, so that an unanswered request expires at its
// deadline rather than with the attempt. (A deadline a person moves later than that still ends
// with the attempt.)
func (s *taskState) turnTimeout() time.Duration {
	switch s.p.Profile.PermissionMode {
	case task.Supervised, task.Plan:
		return s.p.TurnTimeout + s.p.ApprovalTimeout
	}
	return s.p.TurnTimeout
}

// cancelAtOnce waits for the turn's activity; if the task is cancelled meanwhile, it asks the
// host to stop the turn at once (an attempt would otherwise learn of the cancellation only with
// its next heartbeat, seconds later) and goes on waiting for the activity to end.
func (s *taskState) cancelAtOnce(ctx workflow.Context, fut workflow.Future, turn int) {
	cancelled := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(fut, func(workflow.Future) {})
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) { cancelled = true })
	sel.Select(ctx)
	if !cancelled || fut.IsReady() {
		return
	}
	if workflow.GetVersion(ctx, "cancel-turn-at-once", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	actx := s.controlContext(dctx, s.hostQueue, s.lim.interruptTimeout, fmt.Sprintf("cancel turn %d", turn))
	in := task.InterruptTurnInput{TaskID: s.taskID, Turn: turn}
	if err := workflow.ExecuteActivity(actx, task.ActivityCancelTurn, in).Get(dctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("asking the host to stop the cancelled turn", "turn", turn, "error", err)
	}
}

// turnEnded records the result of a turn that ran to its end.
func (s *taskState) turnEnded(turn int, res task.RunTurnResult) {
	if turn == s.newSessionTurn {
		s.newSessionTurn = 0
	}
	if res.SessionID != "" {
		s.sessionID = res.SessionID
	}
	if res.LastMessageUUID != "" {
		s.lastUUID = res.LastMessageUUID
	}
	s.totals.Turns++
	s.totals.CostUSD += res.CostUSD
	s.totals.InputTokens += res.InputTokens
	s.totals.OutputTokens += res.OutputTokens
	switch res.Status {
	case task.TurnCompleted, task.TurnInterrupted:
	case task.TurnFailed:
		s.totals.FailedTurns++
		msg := res.Error
		if msg == "" {
			msg = "the turn ended with an error"
		}
		s.setLastError(fmt.Sprintf("turn %d failed: %s", turn, msg))
	default:
		s.totals.FailedTurns++
		s.setLastError(fmt.Sprintf("turn %d ended with unknown status %q", turn, res.Status))
	}
}

// turnErrored records a turn whose RunTurn activity failed for good.
func (s *taskState) turnErrored(turn int, err error) {
	errType, msg := describeError(err)
	if errType == task.ErrTypeResumeRejected {
		s.sessionID, s.lastUUID = "", ""
		s.turnGaveUp(fmt.Sprintf("turn %d failed: the CLI rejected the resume point (%s: %s); the session was cleared, so the next prompt starts a new session",
			turn, errType, msg))
		return
	}
	s.turnGaveUp(fmt.Sprintf("turn %d failed: RunTurn gave up (%s: %s)", turn, errType, msg))
}

// turnGaveUp records a turn that did not run to its end.
func (s *taskState) turnGaveUp(msg string) {
	s.totals.Turns++
	s.totals.FailedTurns++
	s.setLastError(msg)
}

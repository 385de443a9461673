package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/pricing"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// A task's budget on its host (see task.Budget). Every attempt meters what the API bills it, as
// the CLI's output reports it, and records the figure in Postgres as it grows, so that an
// attempt lost with its worker keeps what it spent (store.RecordAttemptCost). An attempt whose
// task has no budget left is refused before it starts (task.ErrTypeBudgetExhausted); one whose
// turn crosses a bound denies the CLI any further tool and interrupts the turn, which then
// commits as interrupted and reports the task's budget spent.

// budgetWriteTimeout bounds one write of an attempt's cost.
const budgetWriteTimeout = 5 * time.Second

// seenWait bounds how long a control request waits for the output before it to be metered.
const seenWait = 2 * time.Second

// budgetMeter meters one attempt.
type budgetMeter struct {
	db     store.DB
	log    logger
	cost   store.AttemptCost // the attempt's record; CostUSD is what was last written
	budget task.Budget       // the task's, completed by the host's default
	// enforced: the workflow sent a budget (histories from before budgets send none).
	enforced bool
	prior    task.Totals // the task's spend before this attempt: cost from Postgres
	start    time.Time

	mu sync.Mutex
	// answers are the API answers since the last result, by message id; reported is what the
	// CLI's results of this attempt said it cost.
	answers  map[string]*meteredAnswer
	reported float64
	crossed  task.BudgetBound
	onCross  func(task.BudgetBound)
	// seen are control requests the output loop reached (see awaitSeen), with a broadcast.
	seen     map[string]bool
	seenCond chan struct{}
	timer    *time.Timer

	dirty chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

type logger interface {
	Warn(msg string, args ...any)
	Info(msg string, args ...any)
}

type meteredAnswer struct {
	model    string
	usage    pricing.Usage
	streamed bool
}

// startBudget reads what the task spent and refuses the attempt when its budget has no room;
// otherwise it returns the attempt's meter. A request without Spent (a workflow from before
// budgets) is metered but not bounded.
func (a *attempt) startBudget(ctx context.Context) (*budgetMeter, *Error) {
	e, req := a.e, a.req
	m := &budgetMeter{db: e.cfg.DB, log: a.log,
		cost:    store.AttemptCost{TaskID: req.TaskID, AttemptID: req.AttemptID, Turn: req.Turn},
		answers: map[string]*meteredAnswer{}, seen: map[string]bool{}, seenCond: make(chan struct{}),
		dirty: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if req.Spent != nil {
		m.enforced = true
		m.budget = req.Budget.WithDefault(e.cfg.DefaultBudget)
		m.prior = *req.Spent
	}
	if !m.bounded() {
		// Nothing to refuse or cut: the attempt's cost is recorded all the same.
		go m.writer()
		return m, nil
	}
	spend, err := store.TaskSpend(ctx, e.cfg.DB, req.TaskID)
	if err != nil {
		if ctx.Err() != nil {
			return nil, contextFailure(ctx)
		}
		return nil, &Error{Type: task.ErrTypeStoreUnavailable, Err: err}
	}
	m.prior.CostUSD, m.prior.FailedAttemptsCostUSD = spend.CommittedUSD, spend.FailedAttemptsUSD
	if bound := m.budget.Reached(m.prior); bound != "" {
		x := m.exhausted(bound, m.prior, req.Turn, false)
		return nil, &Error{Type: task.ErrTypeBudgetExhausted, Details: []any{x, e.cfg.DefaultBudget},
			Err: fmt.Errorf("turn %d not run: the task has spent its budget (%s)", req.Turn, describeSpent(x))}
	}
	go m.writer()
	return m, nil
}

// bounded reports whether the attempt runs under a budget.
func (m *budgetMeter) bounded() bool { return m != nil && m.enforced && !m.budget.IsZero() }

// arm starts metering the turn in ex: its output is metered, its duration bound runs from now,
// and crossing a bound calls cut.
func (m *budgetMeter) arm(ex *executor, cut func(task.BudgetBound)) {
	m.mu.Lock()
	m.start = time.Now()
	m.onCross = cut
	if m.bounded() && m.budget.MaxDuration > 0 {
		left := m.budget.MaxDuration - m.prior.WorkDuration
		m.timer = time.AfterFunc(max(left, 0), func() { m.cross(task.BoundDuration) })
	}
	m.mu.Unlock()
	ex.spend.Store(m)
}

// observe meters one message of the CLI's output, in order (the executor's loop).
func (m *budgetMeter) observe(msg claudecode.Message) {
	switch v := msg.(type) {
	case *claudecode.StreamEvent:
		switch ev := v.Event; ev.Type {
		case "message_start":
			if ev.Message != nil {
				m.answer(ev.Message.ID, ev.Message.Model, ev.Message.Usage, true, false)
			}
		case "message_delta":
			if ev.Usage != nil {
				m.answer(v.APIMessageID, "", *ev.Usage, true, true)
			}
		}
	case *claudecode.AssistantMessage:
		if !v.IsAPIErrorMessage && v.Message.Model != "<synthetic>" {
			m.answer(v.Message.ID, v.Message.Model, v.Message.Usage, false, false)
		}
	case *claudecode.ResultMessage:
		m.result(v)
	case *claudecode.ControlRequest:
		m.mu.Lock()
		m.seen[v.RequestID] = true
		close(m.seenCond)
		m.seenCond = make(chan struct{})
		m.mu.Unlock()
	}
}

// answer takes in the usage an answer reported so far: each figure only grows. streamed says
// it comes from the answer's stream events, final that it is the answer's last usage. The cost
// bound is checked on an answer's final usage (its message_delta), or, for an answer whose
// stream the CLI does not print, on its assistant frames: never in the middle of a stream, so
// that the answer that crosses the budget is whole, and billed, when the turn is cut.
func (m *budgetMeter) answer(id, model string, u claudecode.Usage, streamed, final bool) {
	if id == "" {
		return
	}
	m.mu.Lock()
	a := m.answers[id]
	if a == nil {
		a = &meteredAnswer{}
		m.answers[id] = a
	}
	a.streamed = a.streamed || streamed
	check := final || !a.streamed
	if a.model == "" {
		a.model = model
	}
	a.usage.InputTokens = max(a.usage.InputTokens, u.InputTokens)
	a.usage.OutputTokens = max(a.usage.OutputTokens, u.OutputTokens)
	a.usage.CacheReadInputTokens = max(a.usage.CacheReadInputTokens, u.CacheReadInputTokens)
	a.usage.CacheCreationInputTokens = max(a.usage.CacheCreationInputTokens, u.CacheCreationInputTokens)
	m.mu.Unlock()
	m.wake()
	if check {
		m.checkCost()
	}
}

// result takes in a result: what the CLI says the turn cost replaces the answers priced since
// the last one.
func (m *budgetMeter) result(r *claudecode.ResultMessage) {
	m.mu.Lock()
	if r.ModelUsageSinceLastResult != nil {
		for _, u := range r.ModelUsageSinceLastResult {
			m.reported += u.CostUSD
		}
	} else {
		m.reported += m.pricedLocked()
	}
	m.answers = map[string]*meteredAnswer{}
	m.mu.Unlock()
	// The turn has ended: nothing is left to cut, and finish records the figure when the
	// attempt does not commit (a committed attempt's cost is its turn's).
}

func (m *budgetMeter) pricedLocked() float64 {
	var c float64
	for _, a := range m.answers {
		c += pricing.Cost(a.model, a.usage)
	}
	return c
}

// spent is what the API billed the attempt so far.
func (m *budgetMeter) spent() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reported + m.pricedLocked()
}

// wake tells the writer the cost grew.
func (m *budgetMeter) wake() {
	select {
	case m.dirty <- struct{}{}:
	default:
	}
}

// checkCost cuts the turn when the task's billed cost reached its bound.
func (m *budgetMeter) checkCost() {
	if m.bounded() && m.budget.MaxCostUSD > 0 && m.prior.BilledCostUSD()+m.spent() >= m.budget.MaxCostUSD {
		m.cross(task.BoundCost)
	}
}

// cross records, once, that the turn crossed bound, and cuts it.
func (m *budgetMeter) cross(bound task.BudgetBound) {
	m.mu.Lock()
	if m.crossed != "" || m.onCross == nil {
		m.mu.Unlock()
		return
	}
	m.crossed = bound
	cut := m.onCross
	m.mu.Unlock()
	m.log.Info("the turn crossed its task's budget; cutting it", "bound", bound)
	go cut(bound)
}

// crossedBound is the bound the turn crossed, if any.
func (m *budgetMeter) crossedBound() task.BudgetBound {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.crossed
}

// awaitSeen waits until the output loop has metered everything the CLI wrote before the control
// request id (the request itself is queued behind it), or for seenWait.
func (m *budgetMeter) awaitSeen(ctx context.Context, id string) {
	t := time.NewTimer(seenWait)
	defer t.Stop()
	for {
		m.mu.Lock()
		seen, ch := m.seen[id], m.seenCond
		m.mu.Unlock()
		if seen {
			return
		}
		select {
		case <-ch:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// writer records the attempt's cost in Postgres whenever it grew, until finish.
func (m *budgetMeter) writer() {
	defer close(m.done)
	for {
		select {
		case <-m.stop:
			return
		case <-m.dirty:
			m.write(context.Background())
		}
	}
}

func (m *budgetMeter) write(ctx context.Context) {
	c := m.cost
	c.CostUSD = m.spent()
	if c.CostUSD <= m.cost.CostUSD {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, budgetWriteTimeout)
	defer cancel()
	if err := store.RecordAttemptCost(ctx, m.db, c); err != nil {
		m.log.Warn("recording the attempt's cost", "cost_usd", c.CostUSD, "error", err)
		return
	}
	m.cost = c
}

// finish stops metering and, unless the attempt is about to commit its turn (whose cost is then
// the turn's), records the attempt's final cost before its end is recorded. A commit marks the
// attempt's record, if any, the turn's; no write follows it.
func (m *budgetMeter) finish(ctx context.Context, ex *executor, committing bool) {
	if m == nil {
		return
	}
	if ex != nil {
		ex.spend.CompareAndSwap(m, nil)
	}
	m.mu.Lock()
	if m.timer != nil {
		m.timer.Stop()
	}
	m.onCross = nil
	m.mu.Unlock()
	close(m.stop)
	<-m.done
	if !committing {
		m.write(context.WithoutCancel(ctx))
	}
}

// failedCommit records the final cost of an attempt whose commit failed.
func (m *budgetMeter) failedCommit(ctx context.Context) {
	if m != nil {
		m.write(context.WithoutCancel(ctx))
	}
}

// exhausted describes the task's budget spent at bound, with what it spent.
func (m *budgetMeter) exhausted(bound task.BudgetBound, spent task.Totals, turn int, cut bool) task.BudgetExhausted {
	return task.BudgetExhausted{Bound: bound, Budget: m.budget, CostUSD: spent.BilledCostUSD(), Turns: spent.Turns,
		WorkDuration: spent.WorkDuration, Turn: turn, At: time.Now().UTC(), Cut: cut}
}

// cutTurn interrupts the attempt's turn for its budget (the meter crossed a bound).
func (a *attempt) cutTurn(ex *executor) func(task.BudgetBound) {
	return func(task.BudgetBound) {
		if !ex.runningTurn(a.req.Turn) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), a.e.cfg.StopTimeout)
		defer cancel()
		if err := ex.interrupt(ctx); err != nil {
			a.log.Warn("interrupting the turn for its budget", "error", err)
		}
	}
}

// budgetResult completes the result of a turn that ran to its end: the host's default budget,
// what the task's failed attempts cost, and, when the turn crossed a bound or ended at one, the
// task's budget spent (with an event in the log).
func (a *attempt) budgetResult(ctx context.Context, res task.RunTurnResult) task.RunTurnResult {
	m := a.spend
	res.HostBudget = a.e.cfg.DefaultBudget
	if m == nil {
		return res
	}
	spend, err := store.TaskSpend(context.WithoutCancel(ctx), a.e.cfg.DB, a.req.TaskID)
	if err != nil {
		a.log.Warn("reading what the task was billed", "error", err)
		spend = store.Spend{CommittedUSD: m.prior.CostUSD + res.CostUSD, FailedAttemptsUSD: m.prior.FailedAttemptsCostUSD}
	}
	res.FailedAttemptsCostUSD = spend.FailedAttemptsUSD
	if !m.bounded() {
		return res
	}
	after := m.prior
	after.CostUSD, after.FailedAttemptsCostUSD = spend.CommittedUSD, spend.FailedAttemptsUSD
	after.Turns++
	after.WorkDuration += time.Duration(res.DurationMS) * time.Millisecond
	crossed := m.crossedBound()
	bound := crossed
	if bound == "" {
		bound = m.budget.Reached(after)
	}
	if bound == "" {
		return res
	}
	x := m.exhausted(bound, after, a.req.Turn, crossed != "" && res.Status == task.TurnInterrupted)
	res.BudgetExhausted = &x
	a.emit(events.AgentEvent{Type: events.TypeBudgetExhausted, SessionID: res.SessionID, Budget: &events.BudgetSpent{
		Bound: string(x.Bound), CostUSD: x.CostUSD, MaxCostUSD: x.Budget.MaxCostUSD, Turns: x.Turns, MaxTurns: x.Budget.MaxTurns,
		WorkDurationMS: x.WorkDuration.Milliseconds(), MaxDurationMS: x.Budget.MaxDuration.Milliseconds(), Cut: x.Cut}})
	a.log.Info("the task has spent its budget", "bound", x.Bound, "cost_usd", x.CostUSD, "turns", x.Turns, "cut", x.Cut)
	return res
}

// budgetDenial answers a control request of a turn that crossed its task's budget: no further
// tool runs. ok is false when the budget leaves the request to the task's mode.
func (ex *executor) budgetDenial(ctx context.Context, cr *claudecode.ControlRequest) (answer any, ok bool) {
	m := ex.spend.Load()
	if m == nil || !m.bounded() {
		return nil, false
	}
	m.awaitSeen(ctx, cr.RequestID)
	bound := m.crossedBound()
	if bound == "" {
		return nil, false
	}
	msg := fmt.Sprintf("The task's budget is spent (%s): no further tool runs. Stop here.", bound)
	switch {
	case cr.HookCallback != nil && cr.HookCallback.Input.HookEventName == claudecode.HookPreToolUse:
		return claudecode.PreToolUseDecision(claudecode.DecisionDeny, msg), true
	case cr.CanUseTool != nil:
		return claudecode.DenyTool(msg, true), true
	}
	return nil, false
}

// hookedForBudget makes c a process whose tool calls come to drover (bypass, with drover's hooks
// and permission prompts), so that a turn that crosses its budget can be denied further tools.
func hookedForBudget(c *claudecode.Command) {
	c.DangerouslySkipPermissions = false
	c.PermissionMode = claudecode.PermissionBypass
	c.PermissionPromptToolStdio = true
}

// describeSpent says what a task spent against the bound it reached, for a person.
func describeSpent(x task.BudgetExhausted) string {
	switch x.Bound {
	case task.BoundCost:
		return fmt.Sprintf("max_cost_usd: $%.4f billed of $%.4f", x.CostUSD, x.Budget.MaxCostUSD)
	case task.BoundTurns:
		return fmt.Sprintf("max_turns: %d of %d turns", x.Turns, x.Budget.MaxTurns)
	case task.BoundDuration:
		return fmt.Sprintf("max_duration: %s of %s", x.WorkDuration.Round(time.Millisecond), x.Budget.MaxDuration)
	}
	return string(x.Bound)
}

// hooked reports whether the attempt needs a process whose tool calls come to drover: its mode
// asks a person, or its budget may have to deny them.
func (a *attempt) hooked() bool {
	return supervisable(a.req.Profile.PermissionMode) || a.spend.bounded()
}

package engine

import (
	"context"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/metrics"
	"github.com/drover-run/drover/pricing"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/streamjson"
	"github.com/drover-run/drover/task"
)

// defaultModel names the CLI's own choice of model in metrics, for a turn that names none.
const defaultModel = "default"

// attemptMeter measures one attempt for package metrics: its start, the model's first output,
// the usage its results billed, and how it ended.
type attemptMeter struct {
	m     *metrics.Metrics
	ctx   context.Context // the attempt's, for exemplars
	req   Request
	model string
	start time.Time

	mu sync.Mutex
	// watching: the attempt ran a turn in a CLI (see watch).
	watching  bool
	firstSeen bool
	// usage is what the attempt's results billed, by model; total sums them. counted: it was
	// counted (see ended and failed).
	usage   map[string]metrics.Usage
	total   metrics.Usage
	counted bool
}

// meterAttempt counts the attempt's start: a turn's first attempt starts the turn, any other
// retries it.
func (e *Engine) meterAttempt(ctx context.Context, req Request) *attemptMeter {
	model := req.Profile.Model
	if model == "" {
		model = defaultModel
	}
	a := &attemptMeter{m: e.cfg.Metrics, ctx: ctx, req: req, model: model, start: time.Now(), usage: map[string]metrics.Usage{}}
	if req.Attempt <= 1 {
		a.m.TurnStarted(ctx, model)
	} else {
		a.m.TurnRetried(ctx, model)
	}
	return a
}

// watch returns a sink that sees the attempt's events on their way to next.
func (a *attemptMeter) watch(next streamjson.Sink) streamjson.Sink {
	a.mu.Lock()
	a.watching = true
	a.mu.Unlock()
	return streamjson.SinkFunc(func(ev events.AgentEvent) {
		a.see(ev)
		next.Emit(ev)
	})
}

func (a *attemptMeter) see(ev events.AgentEvent) {
	if ev.ParentToolCallID != "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch ev.Type {
	case events.TypeMessageChunk, events.TypeReasoning, events.TypeToolCall:
		if !a.firstSeen {
			a.firstSeen = true
			a.m.FirstToken(a.ctx, a.model, time.Since(a.start))
		}
	case events.TypeComplete:
		if ev.Data != nil && ev.Data.Completion != nil {
			a.add(ev.Data.Completion)
		}
	}
}

// add adds a result's usage, by model when the CLI reported it so.
func (a *attemptMeter) add(c *events.Completion) {
	if len(c.Models) == 0 {
		a.addUsage(metrics.Usage{Model: a.model, InputTokens: c.InputTokens, OutputTokens: c.OutputTokens,
			CacheReadInputTokens: c.CacheReadInputTokens, CacheCreationInputTokens: c.CacheCreationInputTokens, CostUSD: c.CostUSD})
		return
	}
	names := make([]string, 0, len(c.Models))
	for name := range c.Models {
		names = append(names, name)
	}
	sort.Strings(names) // the order the adapter summed them in
	for _, name := range names {
		u := c.Models[name]
		a.addUsage(metrics.Usage{Model: name, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadInputTokens: u.CacheReadInputTokens, CacheCreationInputTokens: u.CacheCreationInputTokens, CostUSD: u.CostUSD})
	}
}

func (a *attemptMeter) addUsage(u metrics.Usage) {
	a.usage[u.Model] = sumUsage(a.usage[u.Model], u)
	a.total = sumUsage(a.total, u)
}

func sumUsage(x, y metrics.Usage) metrics.Usage {
	return metrics.Usage{Model: y.Model, InputTokens: x.InputTokens + y.InputTokens, OutputTokens: x.OutputTokens + y.OutputTokens,
		CacheReadInputTokens: x.CacheReadInputTokens + y.CacheReadInputTokens, CacheCreationInputTokens: x.CacheCreationInputTokens + y.CacheCreationInputTokens,
		CostUSD: x.CostUSD + y.CostUSD}
}

// ended counts how the attempt ended. A committed turn counts as finished with its status, and
// its billed usage is counted: by model as its results reported it, or, when what they reported
// differs from what was committed, the committed totals under the turn's model. A failed attempt
// counts as failed, and finishes its turn when no attempt follows. A turn an earlier attempt had
// committed (this one only answered from its record) was counted by that attempt.
func (a *attemptMeter) ended(res task.RunTurnResult, err *Error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, took := context.WithoutCancel(a.ctx), time.Since(a.start)
	if err != nil {
		if task.Waits(err.Type) {
			// A turn that waits for its account has not failed: it runs again after the wait.
			return
		}
		a.m.AttemptFailed(ctx, a.model, err.Type)
		if err.Type != task.ErrTypeAttemptSuperseded && lastAttempt(a.req, err) {
			outcome := metrics.OutcomeFailed
			if err.Type == task.ErrTypeCancelled {
				outcome = metrics.OutcomeCancelled
			}
			a.m.TurnFinished(ctx, a.model, outcome, took)
		}
		return
	}
	if !a.watching {
		return
	}
	a.m.TurnFinished(ctx, a.model, string(res.Status), took)
	if a.counted {
		return
	}
	a.counted = true
	if a.total.InputTokens != res.InputTokens || a.total.OutputTokens != res.OutputTokens || math.Abs(a.total.CostUSD-res.CostUSD) > 1e-9 {
		a.m.Billed(ctx, metrics.Usage{Model: a.model, InputTokens: res.InputTokens, OutputTokens: res.OutputTokens, CostUSD: res.CostUSD})
		return
	}
	a.countLocked(ctx)
}

// failed counts, once, what a failed attempt was billed (drover.tokens, drover.cost): the usage
// its results reported, by model, and the answers the API billed after its last result
// (unresulted, from the attempt's budget meter), priced as a budget prices them. It is real
// spend though no turn committed it; an attempt lost with its worker is counted by no one.
func (a *attemptMeter) failed(unresulted []metrics.Usage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.counted {
		return
	}
	a.counted = true
	for _, u := range unresulted {
		a.addUsage(u)
	}
	a.countLocked(context.WithoutCancel(a.ctx))
}

// unresulted returns, by model, the answers the API billed the attempt of budget meter m after
// its last result, priced: what no result of the attempt reported.
func (m *budgetMeter) unresulted() []metrics.Usage {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	byModel := map[string]metrics.Usage{}
	for _, a := range m.answers {
		model := a.model
		if model == "" {
			model = defaultModel
		}
		u := byModel[model]
		u.Model = model
		u.InputTokens += a.usage.InputTokens
		u.OutputTokens += a.usage.OutputTokens
		u.CacheReadInputTokens += a.usage.CacheReadInputTokens
		u.CacheCreationInputTokens += a.usage.CacheCreationInputTokens
		u.CostUSD += pricing.Cost(a.model, a.usage)
		byModel[model] = u
	}
	out := make([]metrics.Usage, 0, len(byModel))
	for _, u := range byModel {
		out = append(out, u) // counted in the order of their names (countLocked)
	}
	return out
}

func (a *attemptMeter) countLocked(ctx context.Context) {
	names := make([]string, 0, len(a.usage))
	for name := range a.usage {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		a.m.Billed(ctx, a.usage[name])
	}
}

// meterApproval counts a permission request of kind as waiting until the returned function is
// called with how the wait ended; a decision's time to decide is recorded.
func (e *Engine) meterApproval(ctx context.Context, kind task.RequestKind) (done func(store.PermissionRequest, error)) {
	stop := e.cfg.Metrics.ApprovalWaiting(ctx, string(kind))
	return func(row store.PermissionRequest, err error) {
		stop()
		if err == nil && !row.DecidedAt.IsZero() && !row.CreatedAt.IsZero() {
			e.cfg.Metrics.ApprovalDecided(ctx, string(kind), string(row.Status), row.DecidedAt.Sub(row.CreatedAt))
		}
	}
}

// meterProcesses reports the host's CLI processes at each collection, until the returned
// function is called.
func (e *Engine) meterProcesses() (stop func()) {
	stop, err := e.cfg.Metrics.ObserveProcesses(e.cfg.HostID, func() map[string]int64 {
		alive := int64(e.procs.Load())
		idle := int64(len(e.idle(false)))
		return map[string]int64{metrics.ProcessIdle: idle, metrics.ProcessActive: max(alive-idle, 0)}
	})
	if err != nil {
		e.cfg.Logger.Warn("the CLI processes will not be measured", "error", err)
		return func() {}
	}
	return stop
}

// waitingTimeout bounds counting the waiting tasks at a collection.
const waitingTimeout = 5 * time.Second

// meterWaiting makes the tasks waiting for their account, counted in Postgres over the whole
// fleet, the source of drover.tasks.waiting.
func (e *Engine) meterWaiting() {
	e.cfg.Metrics.SetWaitingSource(func() map[string]int64 {
		ctx, cancel := context.WithTimeout(context.Background(), waitingTimeout)
		defer cancel()
		n, err := e.TasksWaiting(ctx)
		if err != nil {
			e.cfg.Logger.Warn("the waiting tasks will not be measured this time", "error", err)
			return nil
		}
		for _, r := range task.WaitReasons {
			// Every reason has its series, 0 when nothing waits for it.
			if _, ok := n[string(r)]; !ok {
				n[string(r)] = 0
			}
		}
		return n
	})
}

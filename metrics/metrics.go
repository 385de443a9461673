// Package metrics defines drover's OpenTelemetry instruments, all in this one file, and the
// calls that record them. Every instrument is registered by New; docs/observability.md lists
// each one's name, unit, attributes and meaning (a test holds the two together).
//
// A *Metrics records to the meter provider it was made with: the SDK's, set up by
// internal/telemetry (OTLP, Prometheus), a test's ManualReader, or the global provider, which
// drops everything until one is installed. A nil *Metrics records nothing.
package metrics

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The instruments' names.
const (
	TurnsStarted           = "drover.turns.started"
	TurnsRetried           = "drover.turns.retried"
	TurnsFinished          = "drover.turns.finished"
	AttemptsFailed         = "drover.attempts.failed"
	TurnDuration           = "drover.turn.duration"
	TimeToFirstToken       = "drover.turn.time_to_first_token"
	Tokens                 = "drover.tokens"
	Cost                   = "drover.cost"
	ApprovalsWaiting       = "drover.approvals.waiting"
	ApprovalTimeToDecision = "drover.approval.time_to_decision"
	CLIProcesses           = "drover.cli.processes"
	TasksWaiting           = "drover.tasks.waiting"
)

// The attributes' keys.
const (
	// AttrModel is the model a turn ran on, or that a share of its usage was billed for.
	AttrModel = "model"
	// AttrOutcome is how a turn ended: completed, interrupted, failed or cancelled.
	AttrOutcome = "outcome"
	// AttrErrorType is a failed attempt's error type (task.ErrType*).
	AttrErrorType = "error_type"
	// AttrKind is a token kind (input, output, cache_read, cache_creation), or a permission
	// request's kind (tool, question, plan).
	AttrKind = "kind"
	// AttrDecision is how a permission request was closed: allowed, denied, expired or
	// cancelled.
	AttrDecision = "decision"
	// AttrHost is the worker host of a process count.
	AttrHost = "host"
	// AttrState is a CLI process's state: idle (kept for its task's next turn) or active
	// (starting, running a turn, or stopping).
	AttrState = "state"
	// AttrReason is why tasks wait for their account (task.Wait reasons).
	AttrReason = "reason"
)

// Outcomes of a finished turn: the turn statuses (task.TurnStatus), and cancelled.
const (
	OutcomeCompleted   = "completed"
	OutcomeInterrupted = "interrupted"
	OutcomeFailed      = "failed"
	OutcomeCancelled   = "cancelled"
)

// Token kinds.
const (
	TokensInput         = "input"
	TokensOutput        = "output"
	TokensCacheRead     = "cache_read"
	TokensCacheCreation = "cache_creation"
)

// Process states.
const (
	ProcessIdle   = "idle"
	ProcessActive = "active"
)

// scope is the instrumentation scope of drover's instruments.
const scope = "github.com/drover-run/drover/metrics"

// latencyBuckets are the histogram bounds of durations, in seconds: from a warm answer to a
// turn of an hour.
var latencyBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// decisionBuckets are the histogram bounds of a person's time to decide, in seconds.
var decisionBuckets = []float64{1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 24 * 3600}

// Metrics holds drover's instruments. It is safe for concurrent use.
type Metrics struct {
	meter metric.Meter
	// registered are the instruments New registered, in order.
	registered []Instrument

	turnsStarted, turnsRetried, turnsFinished, attemptsFailed metric.Int64Counter
	turnDuration, firstToken, timeToDecision                  metric.Float64Histogram
	tokens                                                    metric.Int64Counter
	cost                                                      metric.Float64Counter
	approvalsWaiting                                          metric.Int64UpDownCounter
	processes, tasksWaiting                                   metric.Int64ObservableGauge

	waiting atomic.Pointer[func() map[string]int64]
}

// New registers drover's instruments with mp.
func New(mp metric.MeterProvider) (*Metrics, error) {
	m := &Metrics{meter: mp.Meter(scope)}
	r := registrar{m: m}
	m.turnsStarted = r.counter(TurnsStarted, "{turn}", "Turns whose first attempt started on this host.")
	m.turnsRetried = r.counter(TurnsRetried, "{attempt}", "Attempts after a turn's first that started on this host.")
	m.turnsFinished = r.counter(TurnsFinished, "{turn}", "Turns that ended on this host, by outcome.")
	m.attemptsFailed = r.counter(AttemptsFailed, "{attempt}", "Attempts of a turn that failed, by error type.")
	m.turnDuration = r.histogram(TurnDuration, "Time from the start of the attempt that ended a turn to its end.", latencyBuckets)
	m.firstToken = r.histogram(TimeToFirstToken, "Time from the start of an attempt to the model's first output in it.", latencyBuckets)
	m.tokens = r.counter(Tokens, "{token}", "Tokens the Messages API billed, by model and kind: committed turns and failed attempts.")
	m.cost = r.floatCounter(Cost, "{USD}", "Cost the Messages API billed, in US dollars, by model.")
	m.approvalsWaiting = r.upDown(ApprovalsWaiting, "{request}", "Permission requests an attempt on this host waits on for a person.")
	m.timeToDecision = r.histogram(ApprovalTimeToDecision, "Time from a permission request to its decision.", decisionBuckets)
	m.processes = r.gauge(CLIProcesses, "{process}", "Claude Code CLI processes of this host, from their start to their exit.")
	m.tasksWaiting = r.gauge(TasksWaiting, "{task}", "Tasks waiting for their account, by reason.")
	if r.err != nil {
		return nil, r.err
	}
	if _, err := m.meter.RegisterCallback(m.observeWaiting, m.tasksWaiting); err != nil {
		return nil, fmt.Errorf("metrics: registering the waiting tasks' callback: %w", err)
	}
	return m, nil
}

var (
	globalOnce sync.Once
	global     *Metrics
)

// Global returns the instruments of the global meter provider (otel.GetMeterProvider()), made
// once: they record to whatever provider is installed globally, now or later.
func Global() *Metrics {
	globalOnce.Do(func() {
		m, err := New(otel.GetMeterProvider())
		if err != nil {
			otel.Handle(err)
			return
		}
		global = m
	})
	return global
}

// Instrument names an instrument and its unit.
type Instrument struct {
	Name, Unit string
}

// Instruments are the instruments New registered, in order.
func (m *Metrics) Instruments() []Instrument { return append([]Instrument(nil), m.registered...) }

// TurnStarted counts a turn whose first attempt starts.
func (m *Metrics) TurnStarted(ctx context.Context, model string) {
	if m != nil {
		m.turnsStarted.Add(ctx, 1, metric.WithAttributes(attribute.String(AttrModel, model)))
	}
}

// TurnRetried counts an attempt after a turn's first.
func (m *Metrics) TurnRetried(ctx context.Context, model string) {
	if m != nil {
		m.turnsRetried.Add(ctx, 1, metric.WithAttributes(attribute.String(AttrModel, model)))
	}
}

// AttemptFailed counts a failed attempt of a turn.
func (m *Metrics) AttemptFailed(ctx context.Context, model, errorType string) {
	if m != nil {
		m.attemptsFailed.Add(ctx, 1, metric.WithAttributes(attribute.String(AttrModel, model), attribute.String(AttrErrorType, errorType)))
	}
}

// TurnFinished counts a turn that ended with outcome (Outcome*) and records d, the duration of
// the attempt that ended it.
func (m *Metrics) TurnFinished(ctx context.Context, model, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	attrs := metric.WithAttributes(attribute.String(AttrModel, model), attribute.String(AttrOutcome, outcome))
	m.turnsFinished.Add(ctx, 1, attrs)
	m.turnDuration.Record(ctx, d.Seconds(), attrs)
}

// FirstToken records the time from an attempt's start to the model's first output in it.
func (m *Metrics) FirstToken(ctx context.Context, model string, d time.Duration) {
	if m != nil {
		m.firstToken.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.String(AttrModel, model)))
	}
}

// Usage is what the Messages API billed for one model.
type Usage struct {
	Model                    string
	InputTokens              int64
	OutputTokens             int64
	CacheReadInputTokens     int64
	CacheCreationInputTokens int64
	CostUSD                  float64
}

// Billed counts what the Messages API billed: tokens by model and kind, cost by model. The
// engine calls it for every committed turn; the billed usage of an attempt that failed is
// counted by whoever accounts for it, with this same call.
func (m *Metrics) Billed(ctx context.Context, u Usage) {
	if m == nil {
		return
	}
	model := attribute.String(AttrModel, u.Model)
	for _, k := range []struct {
		kind string
		n    int64
	}{
		{TokensInput, u.InputTokens}, {TokensOutput, u.OutputTokens},
		{TokensCacheRead, u.CacheReadInputTokens}, {TokensCacheCreation, u.CacheCreationInputTokens},
	} {
		if k.n > 0 {
			m.tokens.Add(ctx, k.n, metric.WithAttributes(model, attribute.String(AttrKind, k.kind)))
		}
	}
	if u.CostUSD > 0 {
		m.cost.Add(ctx, u.CostUSD, metric.WithAttributes(model))
	}
}

// ApprovalWaiting counts a permission request of kind that an attempt starts waiting on; call
// the returned function when it stops waiting.
func (m *Metrics) ApprovalWaiting(ctx context.Context, kind string) (done func()) {
	if m == nil {
		return func() {}
	}
	attrs := metric.WithAttributes(attribute.String(AttrKind, kind))
	m.approvalsWaiting.Add(ctx, 1, attrs)
	var once sync.Once
	return func() { once.Do(func() { m.approvalsWaiting.Add(context.WithoutCancel(ctx), -1, attrs) }) }
}

// ApprovalDecided records the time a permission request of kind waited for its decision.
func (m *Metrics) ApprovalDecided(ctx context.Context, kind, decision string, d time.Duration) {
	if m != nil {
		m.timeToDecision.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.String(AttrKind, kind), attribute.String(AttrDecision, decision)))
	}
}

// ObserveProcesses reports, at each collection, the CLI processes of host by state (Process*),
// as count returns them. Call unregister when the host stops.
func (m *Metrics) ObserveProcesses(host string, count func() map[string]int64) (unregister func(), err error) {
	if m == nil {
		return func() {}, nil
	}
	reg, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for state, n := range count() {
			o.ObserveInt64(m.processes, n, metric.WithAttributes(attribute.String(AttrHost, host), attribute.String(AttrState, state)))
		}
		return nil
	}, m.processes)
	if err != nil {
		return nil, fmt.Errorf("metrics: observing the CLI processes: %w", err)
	}
	return func() { _ = reg.Unregister() }, nil
}

// SetWaitingSource makes source the count of tasks waiting for their account, by reason
// (task.Wait reasons), read at each collection. A later call replaces it; nil removes it.
func (m *Metrics) SetWaitingSource(source func() map[string]int64) {
	if m == nil {
		return
	}
	if source == nil {
		m.waiting.Store(nil)
		return
	}
	m.waiting.Store(&source)
}

func (m *Metrics) observeWaiting(_ context.Context, o metric.Observer) error {
	src := m.waiting.Load()
	if src == nil {
		return nil
	}
	for reason, n := range (*src)() {
		o.ObserveInt64(m.tasksWaiting, n, metric.WithAttributes(attribute.String(AttrReason, reason)))
	}
	return nil
}

// registrar creates instruments and remembers their names and the first error.
type registrar struct {
	m   *Metrics
	err error
}

func (r *registrar) note(name, unit string, err error) {
	r.m.registered = append(r.m.registered, Instrument{Name: name, Unit: unit})
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("metrics: registering %s: %w", name, err)
	}
}

func (r *registrar) counter(name, unit, desc string) metric.Int64Counter {
	c, err := r.m.meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	r.note(name, unit, err)
	return c
}

func (r *registrar) floatCounter(name, unit, desc string) metric.Float64Counter {
	c, err := r.m.meter.Float64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	r.note(name, unit, err)
	return c
}

func (r *registrar) upDown(name, unit, desc string) metric.Int64UpDownCounter {
	c, err := r.m.meter.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	r.note(name, unit, err)
	return c
}

func (r *registrar) histogram(name, desc string, buckets []float64) metric.Float64Histogram {
	h, err := r.m.meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(buckets...))
	r.note(name, "s", err)
	return h
}

func (r *registrar) gauge(name, unit, desc string) metric.Int64ObservableGauge {
	g, err := r.m.meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	r.note(name, unit, err)
	return g
}

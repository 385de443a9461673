package task

import "time"

// A fleet's limits: what makes a task wait although it has work (its account's usage limit,
// rate limit, spend cap or concurrency limit) and what makes it stop (its budget). The names
// below are shared by the workflow, the engine, the read side and every client; like the other
// names of this package they are part of task histories and of the HTTP API.

// The statuses of a task that waits for its account or has spent its budget (see Status).
const (
	// StatusWaitingForLimit: the account's usage or rate limit is reached. The task's turn waits
	// on a durable timer until the limit's announced reset (plus a jitter of the task's own),
	// then runs again from its committed point; State.Wait says until when.
	StatusWaitingForLimit Status = "waiting_for_limit"
	// StatusWaitingForSpendCap: the account's spend cap is reached. Nothing is retried until an
	// operator raises the cap and says so (drover account resume).
	StatusWaitingForSpendCap Status = "waiting_for_spend_cap"
	// StatusQueuedForAccount: the account runs as many turns as it may at once; this task's turn
	// waits its place in the account's queue (State.Wait.Position).
	StatusQueuedForAccount Status = "queued_for_account"
	// StatusBudgetExhausted: the task has spent its budget (State.BudgetExhausted says which
	// limit and the figures). It runs no turn until its budget is raised (UpdateBudget); prompts
	// sent meanwhile are refused with ErrTypeBudgetExhausted.
	StatusBudgetExhausted Status = "budget_exhausted"
)

// Waiting reports whether s is a status of a task that has work but waits for its account:
// waiting_for_limit, waiting_for_spend_cap or queued_for_account.
func (s Status) Waiting() bool {
	switch s {
	case StatusWaitingForLimit, StatusWaitingForSpendCap, StatusQueuedForAccount:
		return true
	}
	return false
}

// Final reports whether s is the status of a task that has ended.
func (s Status) Final() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// Statuses lists every status a task can show, in the order a person reads them.
func Statuses() []Status {
	return []Status{StatusIdle, StatusRunning, StatusQueuedForAccount, StatusWaitingForLimit,
		StatusWaitingForSpendCap, StatusBudgetExhausted, StatusNeedsAttention, StatusClosing, StatusCompleted, StatusFailed,
		StatusCancelled}
}

// WaitReason says why a turn waits for its account.
type WaitReason string

// The reasons a turn waits for its account.
const (
	// WaitUsageLimit: the account's usage limit (a subscription's five-hour or seven-day window)
	// is reached, as the CLI's rate_limit_event reports it.
	WaitUsageLimit WaitReason = "usage_limit"
	// WaitRateLimit: the API kept answering 429 with a retry-after past the CLI's own retries.
	WaitRateLimit WaitReason = "rate_limit"
	// WaitSpendCap: the account's spend cap is reached; an operator must raise it.
	WaitSpendCap WaitReason = "spend_cap"
	// WaitConcurrency: the account runs its maximum of turns at once.
	WaitConcurrency WaitReason = "concurrency"
)

// WaitReasons are every reason a turn waits for its account.
var WaitReasons = []WaitReason{WaitUsageLimit, WaitRateLimit, WaitSpendCap, WaitConcurrency}

// Wait is why, and until when, a task's turn waits for its account: State.Wait while the task's
// status is one of the Waiting ones, and the details of the errors that make a turn wait.
type Wait struct {
	// Account names the account: a keyed hash of its credential (never the credential), or the
	// name an operator gave it.
	Account string     `json:"account"`
	Reason  WaitReason `json:"reason"`
	// LimitType is the kind of limit as the CLI reports it (five_hour, seven_day, …), when known.
	LimitType string `json:"limit_type,omitempty"`
	// Turn is the turn that waits.
	Turn int `json:"turn"`
	// Since is when the task began to wait.
	Since time.Time `json:"since"`
	// ResetsAt is when the account's limit is announced to lift; zero when nobody announced it
	// (a spend cap, a concurrency queue).
	ResetsAt time.Time `json:"resets_at,omitzero"`
	// RetryAt is when this task tries again by itself: the reset plus the task's own jitter, or
	// the next look at a limit that outlasted its reset. Zero when only an operator or a free
	// slot ends the wait.
	RetryAt time.Time `json:"retry_at,omitzero"`
	// Position is the turn's place in its account's queue (1 is next), for concurrency.
	Position int `json:"position,omitempty"`
}

// Budget bounds what a task may spend. A zero field sets no bound. When a running turn crosses
// a bound it is interrupted cleanly, and the task's status becomes budget_exhausted until the
// budget is raised. A worker may give tasks a default budget: it bounds what the task's own
// budget leaves unset.
type Budget struct {
	// MaxCostUSD bounds the task's cost: every attempt the API billed, failed and retried ones
	// included (Totals.BilledCostUSD).
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// MaxTurns bounds the task's turns (prompts run), whatever their outcome (Totals.Turns).
	MaxTurns int `json:"max_turns,omitempty"`
	// MaxDuration bounds the time the task's turns run, added up (Totals.WorkDuration); time
	// spent idle, or waiting for a person or for the account, does not count.
	MaxDuration time.Duration `json:"max_duration,omitempty"`
}

// IsZero reports whether b bounds nothing.
func (b Budget) IsZero() bool { return b == Budget{} }

// BudgetChange is the argument of UpdateBudget: each field that is set replaces that bound of
// the task's budget; a bound set to zero is removed.
type BudgetChange struct {
	MaxCostUSD  *float64       `json:"max_cost_usd,omitempty"`
	MaxTurns    *int           `json:"max_turns,omitempty"`
	MaxDuration *time.Duration `json:"max_duration,omitempty"`
	// By names who changes the budget, for the record (State.BudgetBy).
	By string `json:"by,omitempty"`
}

// BudgetBound names one bound of a Budget, by its JSON name.
type BudgetBound string

// The bounds of a budget.
const (
	BoundCost     BudgetBound = "max_cost_usd"
	BoundTurns    BudgetBound = "max_turns"
	BoundDuration BudgetBound = "max_duration"
)

// BudgetExhausted says which bound of its budget a task reached, with the figures: State's
// while the status is budget_exhausted, and the details of ErrTypeBudgetExhausted.
type BudgetExhausted struct {
	Bound BudgetBound `json:"bound"`
	// Budget is the budget that applied (the task's, completed by its host's default).
	Budget Budget `json:"budget"`
	// Spent is what the task had spent when it stopped.
	CostUSD      float64       `json:"cost_usd"`
	Turns        int           `json:"turns"`
	WorkDuration time.Duration `json:"work_duration"`
	// Turn is the turn that was cut, or refused, for the budget.
	Turn int       `json:"turn"`
	At   time.Time `json:"at"`
	// Cut says the turn was interrupted for the budget (rather than refused before it ran, or
	// ended at the bound): once the budget is raised, the task continues it.
	Cut bool `json:"cut,omitempty"`
}

// Names of the fleet's messages to TaskWorkflow.
const (
	// UpdateBudget changes the task's budget (a BudgetChange); its result is the Budget as it now
	// stands. A task that had spent its budget goes on if the new one leaves room.
	UpdateBudget = "budget"
	// SignalAccountReady tells a task that waits for its account that it may try again (an
	// AccountReady): the limit lifted, an operator lifted a spend cap, or a slot is free.
	SignalAccountReady = "account_ready"
)

// AccountReady is the argument of SignalAccountReady.
type AccountReady struct {
	Account string `json:"account"`
	// NotBefore spreads the tasks of an account that wake together: the task tries again at
	// this time, not before.
	NotBefore time.Time `json:"not_before,omitzero"`
}

// Error types of a turn's attempt that make the turn wait for its account or stop for its
// budget. None is a failure of the turn, and none counts against Params.MaxAttempts: the
// workflow waits (status waiting_for_limit, waiting_for_spend_cap or queued_for_account, the
// error's details a Wait), or stops (budget_exhausted, details a BudgetExhausted), and runs the
// turn again from its committed point when it may.
const (
	// ErrTypeAccountLimited: the account's usage or rate limit is reached (reported by this
	// attempt's API answers, or known already: the attempt did not start the CLI).
	ErrTypeAccountLimited = "AccountLimited"
	// ErrTypeSpendCapReached: the account's spend cap is reached.
	ErrTypeSpendCapReached = "SpendCapReached"
	// ErrTypeAccountBusy: the account runs its maximum of turns at once; the turn holds its place
	// in the account's queue.
	ErrTypeAccountBusy = "AccountBusy"
	// ErrTypeBudgetExhausted: the task has no budget left for the turn (refused before it ran),
	// and, from the workflow's Updates, a prompt refused while the task's budget is spent.
	ErrTypeBudgetExhausted = "BudgetExhausted"
)

// Waits reports whether an error of type t makes the turn wait for its account rather than
// fail or be retried by Temporal.
func Waits(t string) bool {
	switch t {
	case ErrTypeAccountLimited, ErrTypeSpendCapReached, ErrTypeAccountBusy:
		return true
	}
	return false
}

// Search attributes of the fleet's waits, beside those of State.
const (
	// SearchAccount is the account of the task's host (Keyword).
	SearchAccount = "DroverAccount"
	// SearchLimitResetsAt is, while the task waits for its account's limit, when the limit is
	// announced to lift (Datetime); unset otherwise.
	SearchLimitResetsAt = "DroverLimitResetsAt"
)

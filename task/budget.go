package task

// WithDefault returns b with each bound it leaves unset taken from def: a host's default budget
// completes a task's own.
func (b Budget) WithDefault(def Budget) Budget {
	if b.MaxCostUSD == 0 {
		b.MaxCostUSD = def.MaxCostUSD
	}
	if b.MaxTurns == 0 {
		b.MaxTurns = def.MaxTurns
	}
	if b.MaxDuration == 0 {
		b.MaxDuration = def.MaxDuration
	}
	return b
}

// Reached returns the first bound of b that spent has reached (cost, then turns, then
// duration), or "" when b leaves room.
func (b Budget) Reached(spent Totals) BudgetBound {
	switch {
	case b.MaxCostUSD > 0 && spent.BilledCostUSD() >= b.MaxCostUSD:
		return BoundCost
	case b.MaxTurns > 0 && spent.Turns >= b.MaxTurns:
		return BoundTurns
	case b.MaxDuration > 0 && spent.WorkDuration >= b.MaxDuration:
		return BoundDuration
	}
	return ""
}

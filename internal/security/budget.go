package security

// Budget limits what a group's model requests may cost, in USD; a nil
// limit is none. agent.budget holds it for every non-main group; a group's
// override may hold its own (the one override key the main group obeys:
// it has no budget unless one is set for it).
type Budget struct {
	Daily   *float64 `json:"daily,omitempty"`
	Monthly *float64 `json:"monthly,omitempty"`
}

// EffectiveBudget is the budget of a group: per limit, its override's,
// else (for a non-main group) the global one.
func EffectiveBudget(global Budget, override *Policy, isMain bool) Budget {
	var own Budget
	if override != nil && override.Budget != nil {
		own = *override.Budget
	}
	if isMain {
		return own
	}
	if own.Daily == nil {
		own.Daily = global.Daily
	}
	if own.Monthly == nil {
		own.Monthly = global.Monthly
	}
	return own
}

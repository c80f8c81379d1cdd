package ecsrunner

// OverridesSizeOf is the length of the JSON of t's RunTask overrides.
func (r *Runner) OverridesSizeOf(t Task) int { return overridesSize(r.overrides(t)) }

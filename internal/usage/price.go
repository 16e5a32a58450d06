package usage

import "math"

// CoreHour prices machine time (issue 23: a run's cost in one number): US
// dollars per core-hour, set by the operator (BERTH_CORE_HOUR_USD); 0
// prices none, and machine time is then reported in core-seconds alone.
type CoreHour float64

// Priced reports whether the deployment prices machine time.
func (p CoreHour) Priced() bool { return p > 0 }

// Cost is what coreSeconds of machine time cost, to the hundredth of a
// cent.
func (p CoreHour) Cost(coreSeconds float64) float64 {
	return math.Round(coreSeconds/3600*float64(p)*1e4) / 1e4
}

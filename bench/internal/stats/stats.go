// Package stats holds what the benchmarks compute over their runs.
package stats

import (
	"math"
	"slices"
	"time"
)

// Median is the middle of ds (the mean of the two middle ones for an even
// count); ds is left as it was.
func Median[T time.Duration | float64](ds []T) T {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Percentile is the p-th percentile of ds by nearest rank (p in 0–100):
// the smallest value at least p % of ds are at or below; ds is left as it
// was and must not be empty.
func Percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

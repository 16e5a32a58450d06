// Package stats holds what the benchmarks compute over their runs.
package stats

import (
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

package report

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Load is the machine's load average over the last minute
// (/proc/loadavg), or -1 when it cannot be read.
func Load() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	l, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return l
}

// Loads are the machine's 1-minute load averages taken while a figure
// was measured, to go beside it.
type Loads []float64

// Sample adds the load now.
func (l *Loads) Sample() {
	if v := Load(); v >= 0 {
		*l = append(*l, v)
	}
}

// String is the loads' range, such as "3.41" or "2.10–4.87", or
// "unknown" when none was taken.
func (l Loads) String() string {
	if len(l) == 0 {
		return "unknown"
	}
	lo, hi := slices.Min(l), slices.Max(l)
	if fmt.Sprintf("%.2f", lo) == fmt.Sprintf("%.2f", hi) {
		return fmt.Sprintf("%.2f", lo)
	}
	return fmt.Sprintf("%.2f–%.2f", lo, hi)
}

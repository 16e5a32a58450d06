// Package quantity parses and prints the sizes and lifetimes people type in
// classes, guardrails and the CLI: cores ("4", "4000m", "0.5"), bytes
// ("16Gi", "512Mi", "1G") and durations with days ("8h", "7d", "1d12h");
// and prints the US dollars of budgets ("$0.028").
package quantity

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Millicores is an amount of CPU: 1000 is one core.
type Millicores int64

// ParseCPU reads cores as a number ("4", "0.5") or millicores ("4000m").
func ParseCPU(s string) (Millicores, error) {
	s = strings.TrimSpace(s)
	if m, ok := strings.CutSuffix(s, "m"); ok {
		n, err := strconv.ParseInt(m, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a CPU amount (cores such as 4, or millicores such as 4000m)", s)
		}
		return Millicores(n), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f > 1e9 {
		return 0, fmt.Errorf("%q is not a CPU amount (cores such as 4, or millicores such as 4000m)", s)
	}
	return Millicores(math.Round(f * 1000)), nil
}

// String prints whole cores as a number and anything else in millicores.
func (m Millicores) String() string {
	if m%1000 == 0 {
		return strconv.FormatInt(int64(m)/1000, 10)
	}
	return strconv.FormatInt(int64(m), 10) + "m"
}

// Cores returns m in cores.
func (m Millicores) Cores() float64 { return float64(m) / 1000 }

// Bytes is an amount of memory or disk.
type Bytes int64

// Binary and decimal suffixes, as Kubernetes accepts them.
var byteSuffixes = []struct {
	suffix string
	factor int64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// ParseBytes reads an amount such as "16Gi", "512Mi", "1G" or "1048576".
func ParseBytes(s string) (Bytes, error) {
	s = strings.TrimSpace(s)
	num, factor := s, int64(1)
	for _, bs := range byteSuffixes {
		if n, ok := strings.CutSuffix(s, bs.suffix); ok {
			num, factor = n, bs.factor
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f*float64(factor) > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is not a size (such as 512Mi, 16Gi or 1T)", s)
	}
	return Bytes(math.Round(f * float64(factor))), nil
}

// String prints the largest binary unit that divides b exactly.
func (b Bytes) String() string {
	for _, u := range []struct {
		suffix string
		factor int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if b != 0 && int64(b)%u.factor == 0 {
			return strconv.FormatInt(int64(b)/u.factor, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// MiB returns b in mebibytes, rounded up.
func (b Bytes) MiB() int64 { return (int64(b) + (1<<20 - 1)) >> 20 }

// ParseDuration reads a duration as time.ParseDuration does, and also whole
// days: "7d", "1d12h".
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var days int64
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || n > 100000 {
			return 0, fmt.Errorf("%q is not a duration (such as 30m, 8h or 7d)", s)
		}
		days, s = n, s[i+1:]
	}
	var rest time.Duration
	if s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration (such as 30m, 8h or 7d)", s)
		}
		rest = d
	} else if days == 0 {
		return 0, fmt.Errorf("%q is not a duration (such as 30m, 8h or 7d)", s)
	}
	return time.Duration(days)*24*time.Hour + rest, nil
}

// FormatDuration prints d in the shortest of days, hours, minutes and
// seconds that is exact: "7d", "36h", "90m", "4h".
func FormatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return d.String()
}

// USD prints an amount of US dollars as exactly as it is known, and at
// least to the cent: "$25.00", "$0.028", "$0.0000375". What float
// arithmetic adds past the ninth decimal (a thousandth of a token at $1 a
// million) is left out, so a sum prints as it would on paper ("$0.30",
// not "$0.30000000000000004"), and nothing is rounded to the cent that a
// budget of a few cents would need.
func USD(v float64) string {
	r := math.Round(v*1e9) / 1e9
	switch {
	case r == 0:
		return "$0.00" // and never "$-0.00"
	case math.IsNaN(r) || math.IsInf(r, 0):
		return "$" + strconv.FormatFloat(r, 'f', -1, 64)
	}
	s := strconv.FormatFloat(r, 'f', -1, 64)
	switch dot := strings.IndexByte(s, '.'); {
	case dot < 0:
		s += ".00"
	case len(s)-dot == 2:
		s += "0"
	}
	return "$" + s
}

// ParseMiB reads a memory ceiling in whole mebibytes, rounded up: an
// amount as ParseBytes reads it ("32Gi", "512Mi", "4G"), or a bare number,
// which is MiB (how guardrails were written before they took units).
func ParseMiB(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n > math.MaxInt64>>21 {
			return 0, fmt.Errorf("%q is not a size (such as 512Mi, 16Gi or 1T; a bare number is MiB)", s)
		}
		return n, nil
	}
	b, err := ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (such as 512Mi, 16Gi or 1T; a bare number is MiB)", s)
	}
	if b < 0 {
		return -Bytes(-b).MiB(), nil
	}
	return b.MiB(), nil
}

// FormatMiB prints n MiB as classes write memory: "32Gi", "1536Mi".
func FormatMiB(n int64) string {
	if n == 0 {
		return "0"
	}
	if n < 0 {
		return "-" + Bytes(-n<<20).String()
	}
	return Bytes(n << 20).String()
}

package schedule

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestNextAgainstWalk compares Next, which skips months, days and hours,
// with a plain walk over every minute, in UTC and across daylight-saving
// changes in zones with one-hour and half-hour shifts.
func TestNextAgainstWalk(t *testing.T) {
	pieces := [5][]string{
		{"*", "*/15", "0,30", "5-10", "*/7", "59", "0"},
		{"*", "2", "1-3", "*/5", "0", "23", "2,3"},
		{"*", "25-31", "1,15", "*/2", "29", "31", "8-14"},
		{"*", "3,10,11", "*/2", "feb", "mar-apr", "oct-nov", "*"},
		{"*", "0", "1-5", "sun,sat", "*/3", "3", "*"},
	}
	zones := []string{"", "CRON_TZ=Europe/Berlin ", "TZ=America/New_York ", "CRON_TZ=Australia/Lord_Howe ", "CRON_TZ=Asia/Kolkata "}
	// Starts near the changes of 2026 (Berlin: Mar 29, Oct 25; New York:
	// Mar 8, Nov 1; Lord Howe: Apr 5, Oct 4) and at month ends.
	starts := []time.Time{
		time.Date(2026, 3, 28, 23, 17, 0, 0, time.UTC),
		time.Date(2026, 10, 24, 23, 59, 30, 0, time.UTC),
		time.Date(2026, 10, 25, 0, 45, 0, 0, time.UTC),
		time.Date(2026, 3, 8, 5, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC),
		time.Date(2026, 4, 4, 14, 0, 0, 0, time.UTC),
		time.Date(2026, 10, 3, 15, 10, 0, 0, time.UTC),
		time.Date(2028, 2, 27, 22, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC),
	}
	const horizon = 4 * 24 * time.Hour
	rng := rand.New(rand.NewPCG(1, 2))
	for range 400 {
		var fields []string
		for _, p := range pieces {
			fields = append(fields, p[rng.IntN(len(p))])
		}
		spec := zones[rng.IntN(len(zones))] + strings.Join(fields, " ")
		s, err := Parse(spec)
		if err != nil {
			continue // e.g. "0 0 31 feb *"
		}
		for _, start := range starts {
			got := s.Next(start)
			want, found := walk(s, start, horizon)
			if found && !got.Equal(want) || !found && got.Sub(start) <= horizon {
				t.Errorf("Parse(%q).Next(%s) = %s, want %s (found by walking: %v)", spec, start, got, want, found)
			}
		}
	}
}

// walk looks at every minute after start for up to horizon and returns
// the first at which s fires: its wall clock matches, and has not read
// the same minute in the previous two hours (a repeated hour fires once).
func walk(s Schedule, start time.Time, horizon time.Duration) (time.Time, bool) {
	for x := start.Truncate(time.Minute).Add(time.Minute); x.Sub(start) <= horizon; x = x.Add(time.Minute) {
		w := x.In(s.loc)
		if !s.matches(w) {
			continue
		}
		seen := false
		for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
			p := x.Add(-back).In(s.loc)
			seen = seen || p.Format("2006-01-02 15:04") == w.Format("2006-01-02 15:04")
		}
		if !seen {
			return w, true
		}
	}
	return time.Time{}, false
}

// matches says whether the wall clock of t matches s, applying cron's
// day rule on its own rather than through dayMatches.
func (s Schedule) matches(t time.Time) bool {
	dom, dow := s.dom&(1<<t.Day()) != 0, s.dow&(1<<t.Weekday()) != 0
	day := dom || dow
	if s.domStar || s.dowStar {
		day = dom && dow
	}
	return day && s.minute&(1<<t.Minute()) != 0 && s.hour&(1<<t.Hour()) != 0 && s.month&(1<<int(t.Month())) != 0
}

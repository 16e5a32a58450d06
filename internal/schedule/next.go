package schedule

import (
	"math/bits"
	"time"
)

// calendarCycle is the Gregorian calendar's period in years: dates and
// their days of the week repeat every 400 years (146097 days, a whole
// number of weeks). A schedule that matches a day does so at least once in
// every cycle, so no search needs to look further.
const calendarCycle = 400

// maxSkips bounds how many matching wall times Next passes over because
// they fall in a daylight-saving gap or were already passed in a repeated
// hour. Real zones skip or repeat at most a day's minutes (1440) at once.
const maxSkips = 1 << 16

// Next returns the first time strictly after `after` at which s fires: at
// second 0 of a matching minute, in the schedule's zone. It returns the
// zero Time for the zero Schedule, or when nothing fires within 400 years
// (Parse refuses schedules that never fire); the search is bounded, and
// skips whole months, days and hours that cannot match.
//
// Times are wall-clock times in the schedule's zone, and daylight-saving
// changes are handled as follows:
//   - spring forward: a wall time that does not exist that day is skipped,
//     not moved to the next valid time ("30 2 * * *" in Europe/Berlin does
//     not fire on the last Sunday of March; "0 * * * *" fires at 01:00
//     and then at 03:00, the clock jumping from 02:00 to 03:00);
//   - fall back: a wall time that occurs twice fires once, at its first
//     occurrence ("30 2 * * *" fires at 02:30 summer time only; "0 * * * *"
//     fires at 02:00 summer time and next at 03:00 winter time, two hours
//     later).
//
// Skipping a missing wall time is what robfig/cron, and so Kubernetes
// CronJob, does too (cron(8) instead runs it late). In a repeated hour
// robfig/cron can fire a second time; berth fires once, as cron(8) does
// for jobs at a fixed time, so a daily task never runs twice in a night.
func (s Schedule) Next(after time.Time) time.Time {
	if s.loc == nil {
		return time.Time{}
	}
	a := after.In(s.loc)
	c := civil{year: a.Year(), month: int(a.Month()), day: a.Day(), hour: a.Hour(), minute: a.Minute()}.plusMinute()
	limit := c.year + calendarCycle + 1
	for range maxSkips {
		var ok bool
		if c, ok = s.nextCivil(c, limit); !ok {
			return time.Time{}
		}
		// A repeated wall time's first occurrence may lie before after
		// (after is in the repeated hour): it has fired already.
		if t, ok := s.instant(c); ok && t.After(after) {
			return t
		}
		c = c.plusMinute()
	}
	return time.Time{}
}

// civil is a wall-clock minute, with no zone.
type civil struct {
	year, month, day, hour, minute int
}

// plusMinute returns the wall-clock minute after c.
func (c civil) plusMinute() civil {
	c.minute++
	if c.minute < 60 {
		return c
	}
	c.minute = 0
	c.hour++
	if c.hour < 24 {
		return c
	}
	return c.nextDay()
}

// nextDay returns midnight of the day after c.
func (c civil) nextDay() civil {
	if c.day < daysIn(c.year, c.month) {
		return civil{year: c.year, month: c.month, day: c.day + 1}
	}
	if c.month < 12 {
		return civil{year: c.year, month: c.month + 1, day: 1}
	}
	return civil{year: c.year + 1, month: 1, day: 1}
}

// is says whether t's wall clock reads c (ignoring seconds).
func (c civil) is(t time.Time) bool {
	y, m, d := t.Date()
	h, mi, _ := t.Clock()
	return c == civil{year: y, month: int(m), day: d, hour: h, minute: mi}
}

// nextCivil returns the first wall-clock minute at or after c that s
// matches, looking no further than the end of year limit. It skips whole
// months, days and hours that cannot match, so it takes at most a few
// dozen steps a month.
func (s Schedule) nextCivil(c civil, limit int) (civil, bool) {
	for c.year <= limit {
		if s.month&(1<<c.month) == 0 {
			if m, ok := nextIn(s.month, c.month+1, 12); ok {
				c = civil{year: c.year, month: m, day: 1}
			} else {
				m, _ := nextIn(s.month, 1, 12)
				c = civil{year: c.year + 1, month: m, day: 1}
			}
			continue
		}
		if c.day > daysIn(c.year, c.month) {
			// Only a start past the month's end lands here.
			c = civil{year: c.year, month: c.month, day: daysIn(c.year, c.month)}.nextDay()
			continue
		}
		if !s.dayMatches(c.year, c.month, c.day) {
			c = c.nextDay()
			continue
		}
		if s.hour&(1<<c.hour) == 0 {
			h, ok := nextIn(s.hour, c.hour+1, 23)
			if !ok {
				c = c.nextDay()
				continue
			}
			c.hour, c.minute = h, 0
		}
		if s.minute&(1<<c.minute) == 0 {
			m, ok := nextIn(s.minute, c.minute+1, 59)
			if !ok {
				c = civil{year: c.year, month: c.month, day: c.day, hour: c.hour, minute: 59}.plusMinute()
				continue
			}
			c.minute = m
		}
		return c, true
	}
	return civil{}, false
}

// dayMatches applies cron's day rule: either field when both are
// restricted, both when either starts with *.
func (s Schedule) dayMatches(year, month, day int) bool {
	dom := s.dom&(1<<day) != 0
	both := s.domStar || s.dowStar
	if dom != both {
		// Decided without the day of the week: a miss when both must
		// match, a hit when either may.
		return dom
	}
	wd := time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC).Weekday()
	return s.dow&(1<<wd) != 0
}

// instant returns the first instant at which the wall clock in s's zone
// reads c, and false when it never does (c is in a spring-forward gap).
func (s Schedule) instant(c civil) (time.Time, bool) {
	t := time.Date(c.year, time.Month(c.month), c.day, c.hour, c.minute, 0, 0, s.loc)
	if !c.is(t) {
		// time.Date moved a wall time that does not exist.
		return time.Time{}, false
	}
	// In a repeated hour time.Date may answer either occurrence. An
	// earlier one lies in the zone period before t's, at that period's
	// offset; step back while there is one.
	naive := time.Date(c.year, time.Month(c.month), c.day, c.hour, c.minute, 0, 0, time.UTC)
	for range 4 {
		start, _ := t.ZoneBounds()
		if start.IsZero() {
			break
		}
		_, offset := start.Add(-time.Nanosecond).Zone()
		earlier := naive.Add(-time.Duration(offset) * time.Second).In(s.loc)
		if !earlier.Before(start) || !c.is(earlier) {
			break
		}
		t = earlier
	}
	return t, true
}

// nextIn returns the smallest value v in from..to whose bit is on in set.
func nextIn(set uint64, from, to int) (int, bool) {
	if from > to {
		return 0, false
	}
	m := set >> from << from & (1<<(to+1) - 1)
	if m == 0 {
		return 0, false
	}
	return bits.TrailingZeros64(m), true
}

// daysIn returns the number of days in a month of the Gregorian calendar.
func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

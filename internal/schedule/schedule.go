// Package schedule reads cron schedules (crontab(5)'s five fields) and says
// when one fires next. A trigger starts an agent task on such a schedule.
//
// A schedule is five fields, minute hour day-of-month month day-of-week, as
// crontab(5) and Kubernetes CronJob read them, or one of the macros @hourly,
// @daily (@midnight), @weekly, @monthly and @yearly (@annually). It may
// start with CRON_TZ=<zone> or TZ=<zone>, an IANA zone name: its times are
// then wall-clock times in that zone; without one they are UTC.
//
// Each field is a list of up to 100 items separated by commas; an item is
// *, a number, a range a-b, or one of those followed by a step /n. A step
// after a single number, a/n, runs from a to the field's last value. Months
// may be written jan-dec and days of the week sun-sat, in any case; 0 and 7
// are both Sunday. The day of the week's last value is 6 (Saturday): * and
// a/n stop there, and 7 counts only when written.
//
// Days follow cron's rule: when both day-of-month and day-of-week are
// restricted (neither starts with *), a day matches if either matches;
// otherwise a day must match both, so a plain * leaves the other field alone
// to decide. (As in cron, a field such as */2 starts with * and so takes the
// second rule.)
//
// Across a daylight-saving change a schedule keeps to the wall clock: a
// wall time that does not exist that day (spring forward) is skipped, not
// moved, and a wall time that occurs twice (fall back) fires once, at its
// first occurrence. See [Schedule.Next].
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrSchedule is what every error of Parse wraps: the text is not a
// schedule berth accepts.
var ErrSchedule = errors.New("invalid schedule")

// MaxLen is the longest schedule Parse reads, in bytes.
const MaxLen = 256

// Schedule is a parsed cron schedule. The zero Schedule never fires.
type Schedule struct {
	spec string         // as given, fields joined by one space
	loc  *time.Location // nil only in the zero Schedule

	// Bit v of a set is on when value v matches.
	minute, hour, dom, month, dow uint64
	// domStar and dowStar: the field starts with *, which switches the
	// day rule from either to both (see dayMatches).
	domStar, dowStar bool
}

// String returns the schedule as it was given to Parse, with its fields
// separated by single spaces.
func (s Schedule) String() string { return s.spec }

// macro returns the five fields an @ shorthand (in lower case) stands for.
func macro(name string) (string, bool) {
	switch name {
	case "@hourly":
		return "0 * * * *", true
	case "@daily", "@midnight":
		return "0 0 * * *", true
	case "@weekly":
		return "0 0 * * 0", true
	case "@monthly":
		return "0 0 1 * *", true
	case "@yearly", "@annually":
		return "0 0 1 1 *", true
	}
	return "", false
}

// Parse reads a schedule. Its errors are sentences naming the part at
// fault, and wrap ErrSchedule. A schedule that never fires (such as
// "0 0 30 2 *") is refused.
func Parse(spec string) (Schedule, error) {
	if len(spec) > MaxLen {
		return Schedule{}, failf("the schedule is %d bytes, over the limit of %d", len(spec), MaxLen)
	}
	tokens := strings.Fields(spec)
	if len(tokens) == 0 {
		return Schedule{}, failf("the schedule is empty: want five fields (minute hour day-of-month month day-of-week) or a macro such as @daily")
	}
	s := Schedule{spec: strings.Join(tokens, " "), loc: time.UTC}

	if zone, ok := zonePrefix(tokens[0]); ok {
		loc, err := loadZone(zone)
		if err != nil {
			return Schedule{}, err
		}
		s.loc = loc
		tokens = tokens[1:]
	}

	for _, tok := range tokens {
		if _, ok := zonePrefix(tok); ok {
			return Schedule{}, failf("%q: a time zone comes once, before the fields", tok)
		}
	}

	fields := tokens
	if len(tokens) > 0 && strings.HasPrefix(tokens[0], "@") {
		name := strings.ToLower(tokens[0])
		if name == "@reboot" {
			return Schedule{}, failf("@reboot is not supported: a schedule fires at times of day, and berth has no start-up to fire at")
		}
		expansion, ok := macro(name)
		if !ok {
			return Schedule{}, failf("unknown macro %q: use @hourly, @daily, @midnight, @weekly, @monthly, @yearly or @annually", tokens[0])
		}
		if len(tokens) > 1 {
			return Schedule{}, failf("%s stands alone: write it without fields after it", tokens[0])
		}
		fields = strings.Fields(expansion)
	}
	specs := fieldSpecs()
	if len(fields) != len(specs) {
		extra := ""
		if len(fields) == len(specs)+1 {
			extra = " (there is no seconds field)"
		}
		return Schedule{}, failf("want 5 fields (minute hour day-of-month month day-of-week), got %d%s", len(fields), extra)
	}

	sets := make([]uint64, len(fields))
	for i, f := range fields {
		set, err := specs[i].parse(f)
		if err != nil {
			return Schedule{}, err
		}
		sets[i] = set
	}
	s.minute, s.hour, s.dom, s.month, s.dow = sets[0], sets[1], sets[2], sets[3], sets[4]
	s.domStar = strings.HasPrefix(fields[2], "*")
	s.dowStar = strings.HasPrefix(fields[4], "*")

	// Every field has a value, so a schedule can fail to fire only when
	// its days never meet (Feb 30) or when every time it names falls in
	// a daylight-saving gap. Dates repeat every 400 years and so do a
	// zone's rules once its last listed change is past; Next looks that
	// far ahead, from a fixed start so that Parse needs no clock.
	if _, ok := s.nextCivil(civil{year: 2026, month: 1, day: 1}, 2026+calendarCycle); !ok {
		return Schedule{}, failf("%q never fires: no date matches its day-of-month, month and day-of-week", s.spec)
	}
	if s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return Schedule{}, failf("%q never fires: every time it names is skipped by a daylight-saving change in %s", s.spec, s.loc)
	}
	return s, nil
}

// zonePrefix returns the zone named by a leading CRON_TZ= or TZ= token.
func zonePrefix(token string) (string, bool) {
	if z, ok := strings.CutPrefix(token, "CRON_TZ="); ok {
		return z, true
	}
	return strings.CutPrefix(token, "TZ=")
}

// loadZone loads an IANA zone. "Local" is refused: the server's own zone
// is not something a schedule stored in berth should depend on.
func loadZone(name string) (*time.Location, error) {
	switch name {
	case "":
		return nil, failf("the time zone is empty: write an IANA name such as CRON_TZ=Europe/Berlin")
	case "Local":
		return nil, failf("time zone %q is the server's own zone: write an IANA name such as Europe/Berlin", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, failf("time zone %q is not a known IANA zone name (such as Europe/Berlin or America/New_York)", name)
	}
	return loc, nil
}

// parseError is an error of Parse: its message alone, and ErrSchedule
// underneath for errors.Is.
type parseError struct{ msg string }

func (e *parseError) Error() string { return e.msg }
func (e *parseError) Unwrap() error { return ErrSchedule }

func failf(format string, args ...any) error {
	return &parseError{msg: fmt.Sprintf(format, args...)}
}

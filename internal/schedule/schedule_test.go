package schedule_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/schedule"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, spec, want string
	}{
		{"empty", " \t", "the schedule is empty: want five fields (minute hour day-of-month month day-of-week) or a macro such as @daily"},
		{"too long", "0 0 * * * " + strings.Repeat(" ", 247), "the schedule is 257 bytes, over the limit of 256"},
		{"four fields", "0 0 * *", "want 5 fields (minute hour day-of-month month day-of-week), got 4"},
		{"seconds field", "0 0 0 * * *", "want 5 fields (minute hour day-of-month month day-of-week), got 6 (there is no seconds field)"},
		{"zone alone", "CRON_TZ=UTC", "want 5 fields (minute hour day-of-month month day-of-week), got 0"},
		{"minute range", "60 * * * *", "minute: 60 is out of range 0-59"},
		{"hour range", "0 24 * * *", "hour: 24 is out of range 0-23"},
		{"day-of-month zero", "0 0 0 * *", "day-of-month: 0 is out of range 1-31"},
		{"month range", "0 0 * 13 *", "month: 13 is out of range 1-12"},
		{"day-of-week range", "0 0 * * 8", "day-of-week: 8 is out of range 0-7"},
		{"huge number", "99999999999 * * * *", "minute: 99999999999 is out of range 0-59"},
		{"range end out of range", "0 20-24 * * *", "hour: 24 is out of range 0-23"},
		{"plus sign", "+5 * * * *", `minute: "+5" is not a number (0-59)`},
		{"minus sign", "-5 * * * *", `minute: "-5" is missing a number`},
		{"open range", "5- * * * *", `minute: "5-" is missing a number`},
		{"non-ASCII digit", "0 0 * * ١", `day-of-week: "١" is not a number (0-7) or a day name (sun-sat)`},
		{"name in hour", "0 mon * * *", `hour: "mon" is not a number (0-23)`},
		{"bad month name", "0 0 * foo *", `month: "foo" is not a number (1-12) or a month name (jan-dec)`},
		{"full day name", "0 0 * * monday", `day-of-week: "monday" is not a number (0-7) or a day name (sun-sat)`},
		{"question mark", "0 0 ? * 1", `day-of-month: "?" is not a number (1-31)`},
		{"backwards range", "30-10 * * * *", "minute: range 30-10 runs backwards: write the smaller value first"},
		{"backwards names", "0 0 * * fri-mon", "day-of-week: range fri-mon runs backwards: write the smaller value first"},
		{"step zero", "*/0 * * * *", "minute: step 0 is out of range 1-60"},
		{"step over span", "*/61 * * * *", "minute: step 61 is out of range 1-60"},
		{"hour step", "0 */25 * * *", "hour: step 25 is out of range 1-24"},
		{"day-of-week step", "0 0 * * */8", "day-of-week: step 8 is out of range 1-7"},
		{"month step", "0 0 1 1-12/13 *", "month: step 13 is out of range 1-12"},
		{"empty step", "*/ * * * *", `minute: "*/" is missing a step after /`},
		{"two steps", "*/2/3 * * * *", `minute: "*/2/3" has more than one /`},
		{"step not a number", "*/x * * * *", `minute: step "x" is not a number (1-60)`},
		{"signed step", "*/+2 * * * *", `minute: step "+2" is not a number (1-60)`},
		{"empty item", "1,,2 * * * *", `minute: "1,,2" has an empty list item`},
		{"trailing comma", "0 0 1, * *", `day-of-month: "1," has an empty list item`},
		{"too many items", strings.Repeat("1,", 100) + "1 * * * *", "minute: 101 list items, over the limit of 100"},
		{"reboot", "@reboot", "@reboot is not supported: a schedule fires at times of day, and berth has no start-up to fire at"},
		{"every", "@every", `unknown macro "@every": use @hourly, @daily, @midnight, @weekly, @monthly, @yearly or @annually`},
		{"macro with fields", "@daily 0", "@daily stands alone: write it without fields after it"},
		{"macro in a field", "@daily 0 * * * *", "@daily stands alone: write it without fields after it"},
		{"unknown zone", "CRON_TZ=Mars/Olympus_Mons 0 * * * *", `time zone "Mars/Olympus_Mons" is not a known IANA zone name (such as Europe/Berlin or America/New_York)`},
		{"zone path", "TZ=../../etc/passwd 0 * * * *", `time zone "../../etc/passwd" is not a known IANA zone name (such as Europe/Berlin or America/New_York)`},
		{"empty zone", "TZ= 0 * * * *", "the time zone is empty: write an IANA name such as CRON_TZ=Europe/Berlin"},
		{"local zone", "CRON_TZ=Local 0 * * * *", `time zone "Local" is the server's own zone: write an IANA name such as Europe/Berlin`},
		{"zone twice", "TZ=UTC CRON_TZ=UTC 0 * * * *", `"CRON_TZ=UTC": a time zone comes once, before the fields`},
		{"zone last", "0 * * * * TZ=UTC", `"TZ=UTC": a time zone comes once, before the fields`},
		{"february 30", "0 0 30 2 *", `"0 0 30 2 *" never fires: no date matches its day-of-month, month and day-of-week`},
		{"31st of short months", "0 0 31 apr,jun,sep,nov *", `"0 0 31 apr,jun,sep,nov *" never fires: no date matches its day-of-month, month and day-of-week`},
		// With day-of-week starting with *, a day must match both.
		{"february 31 on sundays", "0 0 31 2 */7", `"0 0 31 2 */7" never fires: no date matches its day-of-month, month and day-of-week`},
		// The last Sunday of March is when Berlin skips 02:00-02:59.
		{"always in the gap", "CRON_TZ=Europe/Berlin 30 2 25-31 3 */7",
			`"CRON_TZ=Europe/Berlin 30 2 25-31 3 */7" never fires: every time it names is skipped by a daylight-saving change in Europe/Berlin`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := schedule.Parse(tt.spec)
			if err == nil {
				t.Fatalf("Parse(%q) = %q, want error %q", tt.spec, s, tt.want)
			}
			if !errors.Is(err, schedule.ErrSchedule) {
				t.Errorf("Parse(%q) error %v does not wrap ErrSchedule", tt.spec, err)
			}
			if err.Error() != tt.want {
				t.Errorf("Parse(%q) error:\n got %s\nwant %s", tt.spec, err, tt.want)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	for _, spec := range []string{
		"0 0 29 2 *",                           // leap years only
		"0 0 31 2 1",                           // either rule: Mondays in February
		"0 0 29 2 */7",                         // Feb 29 on a Sunday: every 28 years or so
		strings.Repeat("1,", 99) + "1 * * * *", // 100 items
		"*/60 */24 */31 */12 */7",              // steps as large as the field
		"007 0 1 1 0",                          // leading zeros
		"0 0 * * 7",                            // 7 is Sunday
		"0 0 * * 5-7",                          // Friday to Sunday
		"0 0 1 JAN-Mar MON-fri",                // names in any case
		"@HOURLY",                              // macros in any case
		"CRON_TZ=Europe/Berlin 30 2 * * *",     // a daily time in the gap, fine on other days
		"TZ=America/New_York @weekly",
		"CRON_TZ=UTC 0 0 * * *",
	} {
		if _, err := schedule.Parse(spec); err != nil {
			t.Errorf("Parse(%q) = %v, want a schedule", spec, err)
		}
	}
}

func TestNext(t *testing.T) {
	tests := []struct {
		name, spec, after, want string
	}{
		{"every 15 minutes", "*/15 * * * *", "2026-07-01T10:07:00Z", "2026-07-01T10:15:00Z"},
		{"every 15 minutes next hour", "*/15 * * * *", "2026-07-01T10:46:00Z", "2026-07-01T11:00:00Z"},
		{"every 15 minutes next day", "*/15 * * * *", "2026-07-01T23:59:30Z", "2026-07-02T00:00:00Z"},
		{"every 15 minutes next year", "*/15 * * * *", "2026-12-31T23:45:00Z", "2027-01-01T00:00:00Z"},
		{"just before a firing", "*/15 * * * *", "2026-07-01T10:14:59.999999999Z", "2026-07-01T10:15:00Z"},
		{"just after a firing", "*/15 * * * *", "2026-07-01T10:15:00.000000001Z", "2026-07-01T10:30:00Z"},
		{"on a firing gives the next", "0 * * * *", "2026-07-01T10:00:00Z", "2026-07-01T11:00:00Z"},
		{"every minute", "* * * * *", "2026-07-01T10:00:00Z", "2026-07-01T10:01:00Z"},

		{"weekdays in the day", "0 9-17 * * 1-5", "2026-07-01T12:30:00Z", "2026-07-01T13:00:00Z"},
		{"weekdays after friday's last", "0 9-17 * * 1-5", "2026-07-03T17:00:00Z", "2026-07-06T09:00:00Z"},
		{"weekdays from saturday", "0 9-17 * * mon-fri", "2026-07-04T08:00:00Z", "2026-07-06T09:00:00Z"},

		// 2026-07-01 is a Wednesday; the Mondays of July are 6, 13, 20, 27.
		{"either rule: a monday", "0 0 1,15 * 1", "2026-07-01T00:00:00Z", "2026-07-06T00:00:00Z"},
		{"either rule: the 15th", "0 0 1,15 * 1", "2026-07-13T00:00:00Z", "2026-07-15T00:00:00Z"},
		{"either rule: the 1st on a saturday", "0 0 1,15 * 1", "2026-07-27T00:00:00Z", "2026-08-01T00:00:00Z"},
		{"day-of-month alone", "0 0 1,15 * *", "2026-07-01T00:00:00Z", "2026-07-15T00:00:00Z"},
		{"day-of-week alone", "0 0 * * 1", "2026-07-01T00:00:00Z", "2026-07-06T00:00:00Z"},
		// */10 starts with *, so a day must match both: 1, 11, 21 or 31
		// and a Monday; the first is August 31.
		{"both rule after a star", "0 0 */10 * 1", "2026-07-01T00:00:00Z", "2026-08-31T00:00:00Z"},

		{"weekly", "@weekly", "2026-07-01T12:00:00Z", "2026-07-05T00:00:00Z"},
		{"weekly on its firing", "@weekly", "2026-07-05T00:00:00Z", "2026-07-12T00:00:00Z"},
		{"hourly", "@hourly", "2026-07-01T12:00:00Z", "2026-07-01T13:00:00Z"},
		{"daily", "@daily", "2026-07-01T12:00:00Z", "2026-07-02T00:00:00Z"},
		{"midnight", "@midnight", "2026-07-01T00:00:00Z", "2026-07-02T00:00:00Z"},
		{"monthly", "@monthly", "2026-07-01T00:00:00Z", "2026-08-01T00:00:00Z"},
		{"yearly", "@yearly", "2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"annually", "@annually", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"},

		{"month names", "0 12 1 jan,JUL *", "2026-07-01T12:00:00Z", "2027-01-01T12:00:00Z"},
		{"month and day names", "30 6 * Mar-May SUN", "2026-07-01T00:00:00Z", "2027-03-07T06:30:00Z"},
		{"sunday as 7", "0 0 * * 7", "2026-07-01T00:00:00Z", "2026-07-05T00:00:00Z"},
		{"a/n runs to the end", "0 0 * * 1/2", "2026-07-04T00:00:00Z", "2026-07-06T00:00:00Z"},
		{"a/n stops at saturday", "0 0 * * 5/2", "2026-07-03T00:00:00Z", "2026-07-10T00:00:00Z"},

		{"*/7 within the hour", "*/7 * * * *", "2026-07-01T10:50:00Z", "2026-07-01T10:56:00Z"},
		{"*/7 wraps to 0", "*/7 * * * *", "2026-07-01T10:56:00Z", "2026-07-01T11:00:00Z"},
		{"range with step", "20-35/15 * * * *", "2026-07-01T10:45:00Z", "2026-07-01T11:20:00Z"},

		{"leap day", "0 0 29 2 *", "2025-03-01T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"leap day after one", "0 0 29 2 *", "2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"},
		{"leap day across 2100", "0 0 29 2 *", "2096-03-01T00:00:00Z", "2104-02-29T00:00:00Z"},
		{"leap day on a sunday", "0 0 29 2 */7", "2005-01-01T00:00:00Z", "2032-02-29T00:00:00Z"},
		{"leap day on a sunday across 2100", "0 0 29 2 */7", "2089-01-01T00:00:00Z", "2128-02-29T00:00:00Z"},
		{"the 31st", "0 0 31 * *", "2026-04-01T00:00:00Z", "2026-05-31T00:00:00Z"},
		{"the 31st skips june", "0 0 31 * *", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z"},
		{"the 30th skips february", "0 0 30 * *", "2026-02-01T00:00:00Z", "2026-03-30T00:00:00Z"},
		{"end of february", "59 23 28-31 2 *", "2027-02-01T00:00:00Z", "2027-02-28T23:59:00Z"},
		{"end of february, leap", "59 23 28-31 2 *", "2028-02-28T23:59:00Z", "2028-02-29T23:59:00Z"},

		{"zone", "CRON_TZ=Europe/Berlin 0 9 * * *", "2026-07-01T06:00:00Z", "2026-07-01T09:00:00+02:00"},
		{"TZ= zone", "TZ=America/New_York 0 9 * * *", "2026-07-01T14:00:00Z", "2026-07-02T09:00:00-04:00"},

		// Berlin springs forward on 2026-03-29: 02:00 CET becomes 03:00 CEST.
		{"berlin gap skipped", "CRON_TZ=Europe/Berlin 30 2 * * *", "2026-03-28T03:00:00+01:00", "2026-03-30T02:30:00+02:00"},
		{"berlin hourly over the gap", "CRON_TZ=Europe/Berlin 0 * * * *", "2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00"},
		{"berlin half-hourly over the gap", "CRON_TZ=Europe/Berlin */30 * * * *", "2026-03-29T01:30:00+01:00", "2026-03-29T03:00:00+02:00"},
		{"berlin after the gap", "CRON_TZ=Europe/Berlin 0 3 * * *", "2026-03-29T00:00:00+01:00", "2026-03-29T03:00:00+02:00"},
		// Berlin falls back on 2026-10-25: 03:00 CEST becomes 02:00 CET.
		{"berlin repeated: first", "CRON_TZ=Europe/Berlin 30 2 * * *", "2026-10-25T00:00:00+02:00", "2026-10-25T02:30:00+02:00"},
		{"berlin repeated: not twice", "CRON_TZ=Europe/Berlin 30 2 * * *", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"},
		{"berlin repeated: from the second pass", "CRON_TZ=Europe/Berlin 30 2 * * *", "2026-10-25T02:10:00+01:00", "2026-10-26T02:30:00+01:00"},
		{"berlin hourly: 02:00 summer", "CRON_TZ=Europe/Berlin 0 * * * *", "2026-10-25T01:30:00+02:00", "2026-10-25T02:00:00+02:00"},
		{"berlin hourly: then 03:00 winter", "CRON_TZ=Europe/Berlin 0 * * * *", "2026-10-25T02:00:00+02:00", "2026-10-25T03:00:00+01:00"},
		{"berlin every minute over the change", "CRON_TZ=Europe/Berlin * * * * *", "2026-10-25T02:59:00+02:00", "2026-10-25T03:00:00+01:00"},
		{"berlin in the second pass", "CRON_TZ=Europe/Berlin */20 * * * *", "2026-10-25T02:45:00+01:00", "2026-10-25T03:00:00+01:00"},
		// New York: 2026-03-08 02:00 EST becomes 03:00 EDT; 2026-11-01
		// 02:00 EDT becomes 01:00 EST.
		{"new york gap skipped", "TZ=America/New_York 30 2 * * *", "2026-03-07T12:00:00-05:00", "2026-03-09T02:30:00-04:00"},
		{"new york repeated: first", "TZ=America/New_York 30 1 * * *", "2026-11-01T00:00:00-04:00", "2026-11-01T01:30:00-04:00"},
		{"new york repeated: not twice", "TZ=America/New_York 30 1 * * *", "2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"},
		{"new york hourly over the change", "CRON_TZ=America/New_York 0 * * * *", "2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00"},
		{"utc after, zoned schedule", "CRON_TZ=America/New_York 0 0 * * *", "2026-07-01T03:00:00Z", "2026-07-01T00:00:00-04:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := schedule.Parse(tt.spec)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.spec, err)
			}
			after := mustTime(t, tt.after)
			got := s.Next(after)
			if got.Format(time.RFC3339Nano) != tt.want {
				t.Errorf("Parse(%q).Next(%s) = %s, want %s", tt.spec, tt.after, got.Format(time.RFC3339Nano), tt.want)
			}
		})
	}
}

// TestSameSchedules checks that different spellings fire at the same times.
func TestSameSchedules(t *testing.T) {
	groups := [][]string{
		{"@daily", "@midnight", "0 0 * * *", "0 0 1-31 1-12 *"},
		{"@yearly", "@annually", "0 0 1 1 *", "0 0 1 jan *"},
		{"@weekly", "0 0 * * 0", "0 0 * * 7", "0 0 * * sun", "0 0 * * SUN,7", "00 00 * * */7"},
		{"0 0 * * 5-7", "0 0 * * fri,sat,sun", "0 0 * * 0,5,6"},
		{"1/2 * * * *", "1-59/2 * * * *"},
		{"*/15 * * * *", "0,15,30,45 * * * *", "0-59/15 * * * *"},
		{"0 0 * * 1/2", "0 0 * * 1,3,5"},
		{"0 0 1,15 * 1", "0 0 1,15 * mon"},
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, group := range groups {
		want := firings(t, group[0], start, 60)
		for _, spec := range group[1:] {
			if got := firings(t, spec, start, 60); !equalTimes(got, want) {
				t.Errorf("%q fires at %v,\nwant %v (as %q)", spec, got, want, group[0])
			}
		}
	}
}

func TestString(t *testing.T) {
	tests := []struct{ spec, want string }{
		{"0 9 * * 1-5", "0 9 * * 1-5"},
		{"  0\t9 *  *\n1-5 ", "0 9 * * 1-5"},
		{"CRON_TZ=Europe/Berlin   @Daily", "CRON_TZ=Europe/Berlin @Daily"},
		{"TZ=America/New_York 0 0 1,15 JAN-jun mon", "TZ=America/New_York 0 0 1,15 JAN-jun mon"},
	}
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		s, err := schedule.Parse(tt.spec)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.spec, err)
		}
		if got := s.String(); got != tt.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.spec, got, tt.want)
		}
		if got, want := firings(t, s.String(), start, 20), firings(t, tt.spec, start, 20); !equalTimes(got, want) {
			t.Errorf("Parse(%q) fires at %v, its String %q at %v", tt.spec, want, s.String(), got)
		}
	}
}

func TestZeroSchedule(t *testing.T) {
	var s schedule.Schedule
	if got := s.Next(time.Now()); !got.IsZero() {
		t.Errorf("Schedule{}.Next = %v, want the zero Time", got)
	}
	if got := s.String(); got != "" {
		t.Errorf("Schedule{}.String() = %q, want \"\"", got)
	}
}

// firings returns the first n times spec fires after start.
func firings(t *testing.T, spec string, start time.Time, n int) []time.Time {
	t.Helper()
	s, err := schedule.Parse(spec)
	if err != nil {
		t.Fatalf("Parse(%q): %v", spec, err)
	}
	var out []time.Time
	for next := start; len(out) < n; {
		next = s.Next(next)
		if next.IsZero() {
			t.Fatalf("Parse(%q).Next stopped after %v", spec, out)
		}
		out = append(out, next)
	}
	return out
}

func equalTimes(a, b []time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func BenchmarkNext(b *testing.B) {
	for _, spec := range []string{"*/15 * * * *", "0 9-17 * * 1-5", "CRON_TZ=Europe/Berlin 30 2 * * *", "0 0 29 2 */7"} {
		b.Run(spec, func(b *testing.B) {
			s, err := schedule.Parse(spec)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
			for b.Loop() {
				s.Next(start)
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	for _, spec := range []string{"*/15 9-17 * * 1-5", "CRON_TZ=Europe/Berlin 30 2 * * *", "0 0 31 apr,jun,sep,nov *"} {
		b.Run(spec, func(b *testing.B) {
			for b.Loop() {
				_, _ = schedule.Parse(spec)
			}
		})
	}
}

package schedule_test

import (
	"errors"
	"testing"
	"time"

	"berth.dev/berth/internal/schedule"
)

// FuzzParse feeds Parse what an administrator might send through the API.
// Parse must not panic and must answer quickly; a schedule it accepts
// must fire after any start, at second 0, and read back from its String
// as the same schedule.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"* * * * *", "*/15 * * * *", "0 9-17 * * 1-5", "0 0 1,15 * 1", "*/7 * * * *",
		"0 0 29 2 *", "0 0 30 2 *", "0 0 31 2 */7", "0 0 29 2 */7", "59 23 28-31 2 *",
		"1/2 0-23/3 1-31/10 jan-dec/5 sun-sat/2", "0 0 * * 7", "0 0 * * 5-7", "00 00 * * */7",
		"@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually", "@reboot", "@every 5m",
		"CRON_TZ=Europe/Berlin 30 2 * * *", "TZ=America/New_York 0 * * * *", "CRON_TZ=Australia/Lord_Howe */30 2 * * *",
		"CRON_TZ=Europe/Berlin 30 2 25-31 3 */7", "CRON_TZ=Local 0 0 * * *", "TZ=../../etc/passwd 0 0 * * *",
		"0 24 * * *", "-1 * * * *", "+1 * * * *", "*/0 * * * *", "30-10 * * * *", "1,,2 * * * *",
		"0 0 0 * * *", "\t0  0\n* * *", "0 0 ? * mon", "0 0 L * *", "0 0 * * 1#2", "99999999999999999999 * * * *",
	} {
		f.Add(seed)
	}
	starts := []time.Time{
		time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC),
		time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC),    // Berlin springs forward at 01:00 UTC
		time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC),   // Berlin falls back at 01:00 UTC
		time.Date(2026, 11, 1, 5, 59, 59, 999, time.UTC), // New York falls back at 06:00 UTC
		time.Date(2027, 12, 31, 23, 59, 30, 0, time.UTC), // a year's end
		time.Date(2099, 2, 28, 23, 59, 0, 0, time.UTC),   // 2100 is no leap year
		time.Date(2026, 10, 4, 15, 30, 0, 0, time.UTC),   // Lord Howe moves by half an hour
		time.Date(2026, 1, 15, 3, 4, 5, 6, time.FixedZone("", -7*3600)),
	}
	f.Fuzz(func(t *testing.T, spec string) {
		begin := time.Now()
		s, err := schedule.Parse(spec)
		if err != nil {
			if !errors.Is(err, schedule.ErrSchedule) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrSchedule", spec, err)
			}
			return
		}
		again, err := schedule.Parse(s.String())
		if err != nil {
			t.Fatalf("Parse(%q) accepted it, but Parse of its String %q = %v", spec, s.String(), err)
		}
		if again.String() != s.String() {
			t.Fatalf("Parse(%q).String() = %q, read back as %q", spec, s.String(), again.String())
		}
		for _, start := range starts {
			next := s.Next(start)
			switch {
			case next.IsZero():
				t.Fatalf("Parse(%q).Next(%s) is the zero Time, but Parse accepted it", spec, start)
			case !next.After(start):
				t.Fatalf("Parse(%q).Next(%s) = %s, not after the start", spec, start, next)
			case next.Second() != 0 || next.Nanosecond() != 0:
				t.Fatalf("Parse(%q).Next(%s) = %s, not at second 0", spec, start, next)
			}
			if got := again.Next(start); !got.Equal(next) {
				t.Fatalf("Parse(%q).Next(%s) = %s, but from its String %s", spec, start, next, got)
			}
			if later := s.Next(next); !later.After(next) {
				t.Fatalf("Parse(%q).Next(%s) = %s, not after it", spec, next, later)
			}
		}
		// Generous against a busy machine; a parse and a few Nexts take
		// microseconds, and never more than tens of milliseconds.
		if took := time.Since(begin); took > 2*time.Second {
			t.Fatalf("Parse(%q) and its Nexts took %s", spec, took)
		}
	})
}

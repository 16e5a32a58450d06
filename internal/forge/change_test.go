package forge_test

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"berth.dev/berth/internal/forge"
)

func TestTrimBody(t *testing.T) {
	const max = forge.MaxReportBody
	tests := []struct {
		name string
		in   string
		cut  bool
	}{
		{"empty", "", false},
		{"short", "all tests pass\n", false},
		{"exactly the limit", strings.Repeat("a", max), false},
		{"the limit in multi-byte characters", strings.Repeat("é", max), false},
		{"one over", strings.Repeat("a", max+1), true},
		{"two-byte characters", strings.Repeat("é", max+1), true},
		{"four-byte characters", strings.Repeat("🚢", max*2), true},
		{"mixed widths", strings.Repeat("a€𝄞", max), true},
		{"lines", strings.Repeat("a line of a log\n", max/8), true},
		{"blanks where it is cut", strings.Repeat(" ", max+10), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := forge.TrimBody(tt.in)
			if !tt.cut {
				if got != tt.in {
					t.Fatalf("TrimBody changed a body of %d characters, want it whole", utf8.RuneCountInString(tt.in))
				}
				return
			}
			if n := utf8.RuneCountInString(got); n > max {
				t.Errorf("TrimBody = %d characters, want at most %d", n, max)
			}
			if !utf8.ValidString(got) {
				t.Errorf("TrimBody cut inside a character")
			}
			body, note, ok := strings.Cut(got, "\n\n[berth cut this text here")
			if !ok {
				t.Fatalf("TrimBody = …%q, want it to end with a line saying it was cut", tail(got))
			}
			if !strings.HasPrefix(tt.in, body) {
				t.Errorf("what TrimBody kept is not the start of the body")
			}
			if strings.Count(note, "\n") != 1 || !strings.HasSuffix(note, "]\n") {
				t.Errorf("TrimBody's note %q is not one line", note)
			}
			if want := utf8.RuneCountInString(tt.in); !strings.Contains(note, "it had "+strconv.Itoa(want)+" characters") {
				t.Errorf("TrimBody's note %q does not say the body had %d characters", note, want)
			}
			if n := utf8.RuneCountInString(body); n < max-200 && strings.TrimSpace(tt.in) != "" {
				t.Errorf("TrimBody kept %d characters, want all but the note's room", n)
			}
		})
	}
}

func tail(s string) string {
	if len(s) > 80 {
		return s[len(s)-80:]
	}
	return s
}

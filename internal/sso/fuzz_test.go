package sso

import (
	"strings"
	"testing"
)

// FuzzNormalUserCode: whatever a person (or anybody) types as a device
// grant's code, what is kept is either nothing or exactly the code's
// shape, which reads back as itself.
func FuzzNormalUserCode(f *testing.F) {
	for _, s := range []string{"BCDF-GHJK", "bcdf ghjk", "", "ABCD-EFGH", "BCDFGHJKL", "ß-ẞ", "B\x00CDFGHJK"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, typed string) {
		got := NormalUserCode(typed)
		if got == "" {
			return
		}
		if len(got) != UserCodeLen || strings.Trim(got, userCodeAlphabet) != "" {
			t.Fatalf("NormalUserCode(%q) = %q: not a user code", typed, got)
		}
		if again := NormalUserCode(ShowUserCode(got)); again != got {
			t.Fatalf("NormalUserCode(ShowUserCode(%q)) = %q", got, again)
		}
	})
}

// FuzzCheckCLI: what berth login --sso sends (its port, challenge and
// state, from the query of a page anybody may open) is refused unless it
// is in bounds; a state taken is printable and short, a challenge is a
// SHA-256's length.
func FuzzCheckCLI(f *testing.F) {
	f.Add(4000, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "state")
	f.Add(80, "", "")
	f.Add(65535, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "a b")
	f.Fuzz(func(t *testing.T, port int, challenge, state string) {
		c := CLI{Port: port, Challenge: challenge, State: state}
		if checkCLI(c) != nil {
			if CLIFailed(c, "x", "y") != "" {
				t.Fatalf("a refused request %+v is sent back to its port", c)
			}
			return
		}
		if port < 1024 || port > 65535 || len(challenge) != 43 || state == "" || len(state) > MaxState || strings.ContainsAny(state, " \t\n\x00") {
			t.Fatalf("checkCLI took %+v", c)
		}
		if !strings.HasPrefix(CLIFailed(c, "x", "y"), "http://127.0.0.1:") {
			t.Fatalf("a good request is sent back to %q", CLIFailed(c, "x", "y"))
		}
	})
}

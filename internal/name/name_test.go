package name_test

import (
	"strings"
	"testing"

	"berth.dev/berth/internal/name"
)

func TestCheck(t *testing.T) {
	for _, ok := range []string{"a", "dev-1", "x9", strings.Repeat("a", 40)} {
		if err := name.Check(ok); err != nil {
			t.Errorf("Check(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "-a", "a-", "Dev", "a_b", "a.b", "é", strings.Repeat("a", 41)} {
		if err := name.Check(bad); err == nil {
			t.Errorf("Check(%q) accepted it", bad)
		}
	}
}

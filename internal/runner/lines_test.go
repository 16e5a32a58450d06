package runner_test

import (
	"bytes"
	"strings"
	"testing"

	"berth.dev/berth/internal/runner"
)

// TestReadLines: lines longer than MaxLine are cut, not fatal (the writer
// must never block on a reader that gave up), and a last line without a
// newline counts only when the log is complete.
func TestReadLines(t *testing.T) {
	long := strings.Repeat("x", runner.MaxLine+100)
	in := "a\n" + long + "\nb\npart"
	for _, complete := range []bool{false, true} {
		var got []string
		err := runner.ReadLines(strings.NewReader(in), complete, func(b []byte) { got = append(got, string(bytes.Clone(b))) })
		if err != nil {
			t.Fatalf("ReadLines: %v", err)
		}
		want := []string{"a", long[:runner.MaxLine], "b"}
		if complete {
			want = append(want, "part")
		}
		if len(got) != len(want) {
			t.Fatalf("complete=%v: %d lines, want %d", complete, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("complete=%v: line %d is %d bytes (%.10q…), want %d (%.10q…)", complete, i, len(got[i]), got[i], len(want[i]), want[i])
			}
		}
	}
}

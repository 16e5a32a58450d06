package review_test

import (
	"path/filepath"
	"strconv"
	"testing"

	"berth.dev/berth/internal/review"
)

// FuzzJudge: whatever an agent leaves as its verdict, the host's judge
// neither panics nor approves anything but a clear verdict, and keeps a
// bounded summary and best attempt.
func FuzzJudge(f *testing.F) {
	for _, s := range []string{
		`{"verdict": "approve", "summary": "ok", "best": "try-2"}`,
		`{"verdict": "request_changes", "comments": [{"path": "a.go", "line": 1, "body": "x"}]}`,
		`{"verdict": "maybe"}`, `{"verdict": "approve"} {}`, `[]`, ``, `{"best": 7}`,
	} {
		f.Add([]byte(s))
	}
	n := 0
	f.Fuzz(func(t *testing.T, b []byte) {
		n++
		r := review.Judge(b, review.FileName, filepath.Join(t.TempDir(), strconv.Itoa(n)))
		switch r.Outcome {
		case review.Approved, review.ChangesRequested:
			if _, err := review.Digest(b); err != nil || len(b) > review.MaxSize {
				t.Fatalf("%s for a verdict the digest refuses (%v): %q", r.Outcome, err, b)
			}
		case review.Held:
			if r.Reason == "" {
				t.Fatalf("held without a reason: %q", b)
			}
		default:
			t.Fatalf("outcome %q", r.Outcome)
		}
		if len(r.Summary) > 4<<10+len("…") || len(r.Best) > 256+len("…") {
			t.Fatalf("unbounded: summary %d bytes, best %d bytes", len(r.Summary), len(r.Best))
		}
	})
}

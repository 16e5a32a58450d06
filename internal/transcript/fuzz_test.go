package transcript_test

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"berth.dev/berth/internal/transcript"
)

// FuzzTranscript reads arbitrary logs as every runner's: it never panics,
// every event is within its bounds and free of control characters, and
// the totals come last, once.
func FuzzTranscript(f *testing.F) {
	for _, path := range streams(f) {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		for line := range bytes.Lines(b) {
			f.Add(line)
		}
	}
	f.Add([]byte("stderr: \x1b[2J\n{\"type\":\"text\",\"part\":{\"text\":\"\\u001b]0;x\\u0007\"}}\n"))
	runners := []string{"claude-code", "codex", "gemini", "opencode", "pi", "cursor", "none"}
	f.Fuzz(func(t *testing.T, log []byte) {
		for _, name := range runners {
			var evs []transcript.Event
			err := transcript.Read(bytes.NewReader(log), name, func(e transcript.Event) error {
				evs = append(evs, e)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) == 0 || evs[len(evs)-1].Kind != transcript.KindTotals {
				t.Fatalf("%s: the totals are not last: %+v", name, evs)
			}
			for i, e := range evs {
				if e.Kind == transcript.KindTotals && i != len(evs)-1 {
					t.Errorf("%s: totals before the end", name)
				}
				for _, s := range []string{e.Text, e.Tool, e.Summary, e.ID} {
					if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 && r != '\n' && r != '\t' || r == 0x7f }) {
						t.Errorf("%s: %q is not clean text", name, s)
					}
				}
				if len(e.Summary) > transcript.SummaryBytes || strings.Contains(e.Summary, "\n") {
					t.Errorf("%s: summary %q over its bound", name, e.Summary)
				}
				if e.Kind == transcript.KindToolResult && (len(e.Text) > transcript.ResultBytes || strings.Count(e.Text, "\n") >= transcript.ResultLines) {
					t.Errorf("%s: a result of %d bytes, %d lines", name, len(e.Text), strings.Count(e.Text, "\n")+1)
				}
				if err := transcript.Write(&bytes.Buffer{}, e); err != nil {
					t.Error(err)
				}
			}
		}
	})
}

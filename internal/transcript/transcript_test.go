package transcript_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/golden"
	"berth.dev/berth/internal/transcript"
)

// streams are the captured streams of real agent CLIs, kept in package
// runner's testdata (their README says how each was recorded).
func streams(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "runner", "testdata", "streams", "*.jsonl"))
	if err != nil || len(paths) < 15 {
		t.Fatalf("the captured streams: %v (%d found)", err, len(paths))
	}
	return paths
}

// runnerOf names the runner that printed a captured stream.
func runnerOf(path string) string {
	name, _, _ := strings.Cut(filepath.Base(path), "-")
	if name == "claude" {
		return "claude-code"
	}
	return name
}

// render is a log's transcript as text, then its events as JSON lines.
func render(t *testing.T, runnerName string, log []byte) (text, events string) {
	t.Helper()
	var tb, jb bytes.Buffer
	enc := json.NewEncoder(&jb)
	err := transcript.Read(bytes.NewReader(log), runnerName, func(e transcript.Event) error {
		if err := enc.Encode(e); err != nil {
			return err
		}
		return transcript.Write(&tb, e)
	})
	if err != nil {
		t.Fatal(err)
	}
	return tb.String(), jb.String()
}

// TestGoldenTranscripts renders every captured stream of the five runners
// (text, tool call, error) as a person reads it and as the parsed events:
// review the goldens like code (go test -update rewrites them).
func TestGoldenTranscripts(t *testing.T) {
	seen := map[string]bool{}
	for _, path := range streams(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		t.Run(name, func(t *testing.T) {
			log, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			seen[runnerOf(path)] = true
			text, events := render(t, runnerOf(path), log)
			golden.Check(t, name, []byte(text+"\n--- events\n"+events))
		})
	}
	for _, r := range []string{"claude-code", "codex", "opencode", "gemini", "pi"} {
		if !seen[r] {
			t.Errorf("no captured stream of %s", r)
		}
	}
}

// TestTranscriptShowsTheRun: each runner's tool stream shows the shell
// call with its command, its result, the final text and the totals the
// README of the streams gives; each error stream shows the failure.
func TestTranscriptShowsTheRun(t *testing.T) {
	for _, path := range streams(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		log, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text, _ := render(t, runnerOf(path), log)
		var want []string
		switch {
		case strings.Contains(name, "-tool"):
			want = []string{"▸ ", ": echo hi > f.txt && git add f.txt", " add f.txt\n", "Done: wrote f.txt and committed it.", "─ 240 in, 34 out, 60 cache read"}
		case strings.Contains(name, "-text"):
			want = []string{"Hello from the mock model.", "─ 120 in, 17 out, 30 cache read"}
		case strings.Contains(name, "-error"):
			want = []string{"✗ error: ", "mock: scripted failure", "─ 0 in, 0 out", "· failed"}
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: the transcript has no %q:\n%s", name, w, text)
			}
		}
		if strings.Count(text, "✗ error:") > 1 {
			t.Errorf("%s: the failure is told more than once:\n%s", name, text)
		}
	}
}

// TestStderrAndNotes: a log's stderr lines, berth's notes and plain text
// are kept, in order, beside the runner's events.
func TestStderrAndNotes(t *testing.T) {
	log := "stderr: warming up\nnot json at all\n{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":\"hi\"}}\nberth: the run log stops here, at 10 bytes\n"
	text, _ := render(t, "codex", []byte(log))
	want := "stderr: warming up\nnot json at all\nhi\n\nberth: the run log stops here, at 10 bytes\n─ 0 in, 0 out, 0 cache read, 0 cache write · cost not in the stream\n"
	if text != want {
		t.Errorf("got\n%s\nwant\n%s", text, want)
	}
}

// TestBounds: the agent's output is untrusted. A long result is trimmed
// and says by how much; a summary stays on one line; terminal escapes
// never reach the terminal; a line over MaxLine is left out and counted;
// a transcript stops at MaxEvents with its totals still counting.
func TestBounds(t *testing.T) {
	var out strings.Builder
	for i := range 50 {
		out.WriteString(strings.Repeat("x", 10) + string(rune('a'+i%26)) + "\n")
	}
	call := map[string]any{"type": "tool_use", "timestamp": 1, "part": map[string]any{"tool": "bash", "callID": "c1",
		"state": map[string]any{"status": "completed", "input": map[string]any{"command": "ls\n-la \x1b[31mred"}, "output": out.String() + "\x1b]0;pwned\x07"}}}
	line, _ := json.Marshal(call)
	long := append([]byte(`{"type":"text","part":{"text":"`), bytes.Repeat([]byte("y"), transcript.MaxLine)...)
	long = append(long, `"}}`...)
	log := string(line) + "\n" + string(long) + "\n"
	text, events := render(t, "opencode", []byte(log))
	if strings.ContainsAny(text, "\x1b\x07") || strings.ContainsAny(events, "\x1b\x07") {
		t.Errorf("a control character reached the transcript:\n%q", text)
	}
	for _, w := range []string{"▸ bash: ls -la \uFFFD[31mred\n", "  │ xxxxxxxxxxh\n", "  │ … 43 more lines (515 B) cut\n", " cut\n", "(a line of 1048610 bytes, over the 1 MiB a transcript reads, is left out)"} {
		if !strings.Contains(text, w) {
			t.Errorf("no %q in\n%s", w, text)
		}
	}
	if strings.Contains(text, "xxxxxxxxxxi\n") {
		t.Errorf("the result is not trimmed at %d lines:\n%s", transcript.ResultLines, text)
	}
	var last transcript.Event
	lines := strings.Split(strings.TrimSpace(events), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Totals == nil || last.Totals.Lines != 2 || last.Totals.Skipped != 1 {
		t.Errorf("the totals: %+v (%v); want 2 lines, 1 skipped", last.Totals, err)
	}

	many := strings.Repeat(`{"type":"text","part":{"text":"again"}}`+"\n", transcript.MaxEvents+10)
	many += `{"type":"step_finish","part":{"tokens":{"input":7,"output":1},"cost":0.5}}` + "\n"
	text, _ = render(t, "opencode", []byte(many))
	if n := strings.Count(text, "again\n"); n != transcript.MaxEvents {
		t.Errorf("%d texts; want the transcript to stop at %d", n, transcript.MaxEvents)
	}
	if !strings.Contains(text, "(the transcript stops here") || !strings.HasSuffix(text, "─ 7 in, 1 out, 0 cache read, 0 cache write · 1 turn · $0.5000 · transcript cut short\n") {
		t.Errorf("the end of a stopped transcript:\n%s", text[max(0, len(text)-400):])
	}
}

// TestUnknownRunner: a runner the transcript does not know shows its
// lines as they are (a JSON line too), with the line count.
func TestUnknownRunner(t *testing.T) {
	text, _ := render(t, "mystery", []byte("{\"a\":1}\nplain\n"))
	if text != "{\"a\":1}\nplain\n─ 0 in, 0 out, 0 cache read, 0 cache write · cost not in the stream\n" {
		t.Errorf("got\n%s", text)
	}
}

package agentrun

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/runner/runnertest"
	"berth.dev/berth/internal/sandbox"
)

// TestRunLogIsCapped: past its limit a run's log keeps one line saying so
// and nothing more, while the telemetry reads every line to the end (the
// totals come last).
func TestRunLogIsCapped(t *testing.T) {
	dir := t.TempDir()
	s := &Service{cfg: Config{LogDir: dir}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now}
	r, err := runner.Get("claude-code")
	if err != nil {
		t.Fatal(err)
	}
	stream := runnertest.Stream(t, "claude-tool")
	rr := s.readRun(t.Context(), sandbox.Sandbox{ID: "sbx_capped"}, Run{Runner: "claude-code"}, r)
	rr.limit = int64(len(stream[0]) + 1) // the first line, and no more
	for _, l := range stream {
		rr.line(t.Context(), true, []byte(l))
	}
	rr.close()
	run := rr.result()
	if run.Lines != len(stream) || run.Telemetry.Usage.Output == 0 {
		t.Errorf("telemetry read %d lines (%+v), want all %d and the totals", run.Lines, run.Telemetry.Usage, len(stream))
	}
	b, err := os.ReadFile(filepath.Join(dir, "sbx_capped.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 || lines[0] != stream[0] || !strings.Contains(lines[1], "the run log stops here") {
		t.Errorf("capped log: %d lines, ending %q", len(lines), lines[len(lines)-1])
	}
}

package runner_test

import (
	"strings"
	"testing"

	"berth.dev/berth/internal/runner"
)

// TestRunFilesWriteTheInstructions: each runnable CLI gets the
// instructions at the file under HOME it reads them from, beside its own
// files; none are written without instructions; more than the limit is
// refused.
func TestRunFilesWriteTheInstructions(t *testing.T) {
	want := map[string]string{
		"claude-code": ".claude/CLAUDE.md", "codex": ".codex/AGENTS.md", "gemini": ".gemini/GEMINI.md",
		"opencode": ".config/opencode/AGENTS.md", "pi": ".pi/agent/AGENTS.md",
	}
	g := runner.Gateway{BaseURL: "http://gateway:8080", Models: []runner.Model{{ID: "m", APIs: []runner.API{runner.APIAnthropic, runner.APIOpenAIChat, runner.APIOpenAIResponses, runner.APIGemini}}}}
	for name, path := range want {
		r, err := runner.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := runner.RunFiles(r, g, runner.Options{Model: "m"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		files, err := runner.RunFiles(r, g, runner.Options{Model: "m", Instructions: "Always run the tests.\n"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(files) != len(plain)+1 || files[len(files)-1].Path != path || string(files[len(files)-1].Content) != "Always run the tests.\n" {
			t.Errorf("%s: files %v, want its own and %s with the instructions", name, files, path)
		}
		if _, err := runner.RunFiles(r, g, runner.Options{Model: "m", Instructions: strings.Repeat("x", runner.MaxInstructions+1)}); err == nil {
			t.Errorf("%s: instructions over the limit were written", name)
		}
	}
}

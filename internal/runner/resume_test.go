package runner_test

import (
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/runner"
)

// TestResumeArgs: with Resume each CLI gets its own flags for continuing
// its last conversation (internal/entrypoint's TestPodmanAgentResume
// proves them against the real CLIs), and without it none of them.
func TestResumeArgs(t *testing.T) {
	var covered []string
	for _, tt := range []struct {
		runner string
		o      runner.Options
		fresh  []string
		resume []string
	}{
		{"claude-code", runner.Options{Model: "m"},
			[]string{"-p", "--dangerously-skip-permissions", "--verbose", "--output-format", "stream-json", "--model", "m"},
			[]string{"-p", "--dangerously-skip-permissions", "--verbose", "--output-format", "stream-json", "--model", "m", "--continue"}},
		{"claude-code", runner.Options{Model: "m", Effort: "high"},
			[]string{"-p", "--dangerously-skip-permissions", "--verbose", "--output-format", "stream-json", "--model", "m", "--effort", "high"},
			[]string{"-p", "--dangerously-skip-permissions", "--verbose", "--output-format", "stream-json", "--model", "m", "--effort", "high", "--continue"}},
		// The prompt stays on stdin: exec resume reads it only when
		// named "-", and with --last that argument is the prompt.
		{"codex", runner.Options{Model: "gpt-5"},
			[]string{"exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "-m", "gpt-5"},
			[]string{"exec", "resume", "--last", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "-m", "gpt-5", "-"}},
		{"codex", runner.Options{Model: "gpt-5", Effort: "high"},
			[]string{"exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "-m", "gpt-5", "-c", `model_reasoning_effort="high"`},
			[]string{"exec", "resume", "--last", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "-m", "gpt-5", "-c", `model_reasoning_effort="high"`, "-"}},
		{"opencode", runner.Options{Model: "m", Effort: "high"},
			[]string{"run", "--format", "json", "--model", "berth/m", "--variant", "high"},
			[]string{"run", "--format", "json", "--model", "berth/m", "--variant", "high", "--continue"}},
		{"gemini", runner.Options{Model: "gemini-2.5-pro"},
			[]string{"-m", "gemini-2.5-pro", "--output-format", "stream-json", "--yolo"},
			[]string{"-m", "gemini-2.5-pro", "--output-format", "stream-json", "--yolo", "--resume", "latest"}},
		{"pi", runner.Options{Model: "m", Effort: "high"},
			[]string{"-p", "--mode", "json", "--provider", "berth", "--model", "m", "--thinking", "high"},
			[]string{"-p", "--mode", "json", "--provider", "berth", "--model", "m", "--thinking", "high", "--continue"}},
		{"cursor", runner.Options{Model: "m"},
			[]string{"-p", "--output-format", "stream-json", "--force", "--trust", "--sandbox", "disabled", "--model", "m"},
			[]string{"-p", "--output-format", "stream-json", "--force", "--trust", "--sandbox", "disabled", "--model", "m", "--continue"}},
	} {
		covered = append(covered, tt.runner)
		r, err := runner.Get(tt.runner)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := r.ContainerArgs(tt.o)
		if err != nil {
			t.Fatalf("%s: %v", tt.runner, err)
		}
		if diff := cmp.Diff(tt.fresh, fresh); diff != "" {
			t.Errorf("%s %+v: args (-want +got):\n%s", tt.runner, tt.o, diff)
		}
		o := tt.o
		o.Resume = true
		resume, err := r.ContainerArgs(o)
		if err != nil {
			t.Fatalf("%s resumed: %v", tt.runner, err)
		}
		if diff := cmp.Diff(tt.resume, resume); diff != "" {
			t.Errorf("%s %+v: args (-want +got):\n%s", tt.runner, o, diff)
		}
		// Resume changes nothing of what is checked: no model is still
		// an error.
		if _, err := r.ContainerArgs(runner.Options{Resume: true}); err == nil {
			t.Errorf("%s: Resume without a model succeeded, want an error", tt.runner)
		}
	}
	for _, name := range runner.Names() {
		if !slices.Contains(covered, name) {
			t.Errorf("runner %s has no resume case here", name)
		}
	}
}

// TestStatePaths: every runner says where its CLI keeps its conversations,
// and the files berth-init writes at every start never replace them. The
// one overlap is known: with MCP servers, Claude Code's go into
// ~/.claude.json, beside keys Claude Code writes back on start (its
// conversations are under ~/.claude).
func TestStatePaths(t *testing.T) {
	g := runner.Gateway{BaseURL: "http://gateway:8080", Models: []runner.Model{{ID: "m", APIs: []runner.API{runner.APIAnthropic, runner.APIOpenAIChat, runner.APIOpenAIResponses, runner.APIGemini}}}}
	skills := []runner.Skill{{Name: "release", Files: []runner.File{{Path: "SKILL.md", Content: []byte("---\nname: release\n---\n")}}}}
	mcp := []runner.MCPServer{{Name: "docs", Command: []string{"docs-server"}}}
	for _, name := range runner.Names() {
		r, _ := runner.Get(name)
		st, ok := r.(runner.Stateful)
		if !ok {
			t.Errorf("%s does not say where its CLI keeps its state (Stateful)", name)
			continue
		}
		paths := st.StatePaths()
		if len(paths) == 0 {
			t.Errorf("%s: no state paths", name)
		}
		for _, p := range paths {
			if p == "" || path.IsAbs(p) || path.Clean(p) != p || strings.HasPrefix(p, "..") {
				t.Errorf("%s: state path %q: want a clean path relative to HOME", name, p)
			}
		}
		o := runner.Options{Model: "m", Instructions: "Be brief.", Skills: skills}
		if _, ok := r.(runner.MCPConfigured); ok {
			o.MCP = mcp
		}
		if _, ok := r.(runner.Instructed); !ok {
			o.Instructions = ""
		}
		if _, ok := r.(runner.Skilled); !ok {
			o.Skills = nil
		}
		files, err := runner.RunFiles(r, g, o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, f := range files {
			for _, p := range paths {
				if f.Path == p || strings.HasPrefix(p, f.Path+"/") {
					if name == "claude-code" && f.Path == ".claude.json" && len(o.MCP) > 0 {
						continue
					}
					t.Errorf("%s: berth-init would replace ~/%s, where the CLI keeps its state (%s)", name, f.Path, p)
				}
			}
		}
	}
}

// TestUsageSince: a continued conversation's totals less its earlier
// runs', never below zero.
func TestUsageSince(t *testing.T) {
	total := runner.Usage{Input: 480, CacheRead: 120, Output: 68, Reasoning: 12}
	earlier := runner.Usage{Input: 240, CacheRead: 60, Output: 34, Reasoning: 6}
	if got, want := total.Since(earlier), (runner.Usage{Input: 240, CacheRead: 60, Output: 34, Reasoning: 6}); got != want {
		t.Errorf("Since = %+v, want %+v", got, want)
	}
	if got := earlier.Since(total); got != (runner.Usage{}) {
		t.Errorf("less than the earlier runs' = %+v, want zero", got)
	}
	if got := earlier.Plus(earlier); got != total.Since(runner.Usage{CacheWrite: 1}) {
		t.Errorf("Plus = %+v", got)
	}
}

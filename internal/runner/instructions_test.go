package runner_test

import (
	"maps"
	"slices"
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

// TestRunFilesSkillsAndMCP: each CLI gets the skills under the directory
// it reads user-level skills from, and the MCP servers in its own config
// file, beside what the file held (the gateway's provider stays); Pi has
// no MCP and says so.
func TestRunFilesSkillsAndMCP(t *testing.T) {
	g := runner.Gateway{BaseURL: "http://gateway:8080", Models: []runner.Model{{ID: "m", APIs: []runner.API{runner.APIAnthropic, runner.APIOpenAIChat, runner.APIOpenAIResponses, runner.APIGemini}}}}
	skills := []runner.Skill{{Name: "release", Files: []runner.File{{Path: "SKILL.md", Content: []byte("---\nname: release\n---\n")}, {Path: "scripts/tag.sh", Content: []byte("git tag\n")}}}}
	mcp := []runner.MCPServer{{Name: "berth_probe", Command: []string{"python3", "/work/probe.py"}, Env: map[string]string{"PROBE_MARKER": "m1"}},
		{Name: "tracker", URL: "https://mcp.example.com/mcp"}}
	for name, want := range map[string]struct{ skills, config string }{
		"claude-code": {".claude/skills", ".claude.json"},
		"codex":       {".codex/skills", ".codex/config.toml"},
		"opencode":    {".config/opencode/skills", ".config/opencode/opencode.json"},
		"gemini":      {".gemini/skills", ".gemini/settings.json"},
	} {
		r, _ := runner.Get(name)
		files, err := runner.RunFiles(r, g, runner.Options{Model: "m", Skills: skills, MCP: mcp})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		byPath := map[string]string{}
		for _, f := range files {
			byPath[f.Path] = string(f.Content)
		}
		if byPath[want.skills+"/release/SKILL.md"] == "" || byPath[want.skills+"/release/scripts/tag.sh"] != "git tag\n" {
			t.Errorf("%s: the skill is not under %s: %v", name, want.skills, slices.Collect(maps.Keys(byPath)))
		}
		cfg := byPath[want.config]
		for _, s := range []string{"berth_probe", "python3", "/work/probe.py", "PROBE_MARKER", "m1", "tracker", "https://mcp.example.com/mcp"} {
			if !strings.Contains(cfg, s) {
				t.Errorf("%s: %s lacks %q:\n%s", name, want.config, s, cfg)
			}
		}
		kept := map[string]string{"codex": "gateway:8080", "opencode": "gateway:8080", "gemini": "gemini-api-key"}[name]
		if kept != "" && !strings.Contains(cfg, kept) {
			t.Errorf("%s: %s lost the gateway's provider:\n%s", name, want.config, cfg)
		}
	}
	pi, _ := runner.Get("pi")
	if _, ok := pi.(runner.MCPConfigured); ok {
		t.Error("pi has no MCP, yet says it takes servers")
	}
	if _, err := runner.RunFiles(pi, g, runner.Options{Model: "m", MCP: mcp}); err == nil || !strings.Contains(err.Error(), "takes no MCP server") {
		t.Errorf("pi with MCP servers: %v", err)
	}
	if files, err := runner.RunFiles(pi, g, runner.Options{Model: "m", Skills: skills}); err != nil || !slices.ContainsFunc(files, func(f runner.File) bool { return f.Path == ".pi/agent/skills/release/SKILL.md" }) {
		t.Errorf("pi's skills: %v", err)
	}
}

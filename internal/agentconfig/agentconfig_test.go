package agentconfig_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/agentconfig"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/runner"
)

type memStore map[[2]string]agentconfig.Config

func (m memStore) AgentConfig(_ context.Context, org, project string) (agentconfig.Config, error) {
	return m[[2]string{org, project}], nil
}

func (m memStore) PutAgentConfig(_ context.Context, org, project string, c agentconfig.Config, _ audit.Event) error {
	m[[2]string{org, project}] = c
	return nil
}

// TestForRun: a run's configuration is the organisation's instructions
// then the project's, the project's effort over the organisation's;
// either alone stands alone; together over the limit is refused.
func TestForRun(t *testing.T) {
	st := memStore{
		{"org", ""}:    {Instructions: "Run the tests.\n", Effort: "medium", Model: "org-model"},
		{"org", "web"}: {Instructions: "\nUse make.\n", Effort: "high", Model: "web-model"},
		{"org", "ml"}:  {},
	}
	s := agentconfig.NewService(st, nil, time.Now)
	for project, want := range map[string]agentconfig.Config{
		"web":  {Instructions: "Run the tests.\n\nUse make.\n", Effort: "high", Model: "web-model"},
		"ml":   {Instructions: "Run the tests.\n", Effort: "medium", Model: "org-model"},
		"none": {Instructions: "Run the tests.\n", Effort: "medium", Model: "org-model"},
	} {
		got, err := s.ForRun(t.Context(), "org", project)
		if err != nil || got.Instructions != want.Instructions || got.Effort != want.Effort || got.Model != want.Model {
			t.Errorf("%s: %+v, %v; want %+v", project, got, err, want)
		}
	}
	if got, err := s.ForRun(t.Context(), "other", "p"); err != nil || got.Instructions != "" || got.Effort != "" {
		t.Errorf("an organisation with none: %+v, %v", got, err)
	}
	st[[2]string{"org", "big"}] = agentconfig.Config{Instructions: strings.Repeat("x", runner.MaxInstructions-5)}
	if _, err := s.ForRun(t.Context(), "org", "big"); err == nil {
		t.Error("instructions over the limit together were handed to a run")
	}
}

// TestValidate names the field and the limit.
func TestValidate(t *testing.T) {
	for _, c := range []struct {
		c     agentconfig.Config
		field string
	}{
		{agentconfig.Config{Instructions: strings.Repeat("x", runner.MaxInstructions+1)}, "instructions"},
		{agentconfig.Config{Instructions: "a\x00b"}, "instructions"},
		{agentconfig.Config{Instructions: "\xff"}, "instructions"},
		{agentconfig.Config{Effort: "max"}, "effort"},
		{agentconfig.Config{Model: "two words"}, "model"},
	} {
		if err := c.c.Validate(); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%q/%q: %v, want an error naming %s", c.c.Instructions[:min(len(c.c.Instructions), 8)], c.c.Effort, err, c.field)
		}
	}
	if err := (agentconfig.Config{Instructions: "ok", Effort: "low"}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestForRunSkillsAndMCP: a run's skills and MCP servers are the
// organisation's and its project's, the project's replacing the
// organisation's of the same name; its skills path the project's over
// the organisation's.
func TestForRunSkillsAndMCP(t *testing.T) {
	sk := func(name, body string) runner.Skill {
		return runner.Skill{Name: name, Files: []runner.File{{Path: "SKILL.md", Content: []byte(body)}}}
	}
	st := memStore{
		{"org", ""}: {Skills: []runner.Skill{sk("release", "org's"), sk("review", "org's")}, SkillsPath: ".org/skills",
			MCP: []runner.MCPServer{{Name: "docs", Command: []string{"docs-org"}}, {Name: "tracker", URL: "https://t/"}}},
		{"org", "web"}: {Skills: []runner.Skill{sk("release", "web's")}, SkillsPath: ".berth/skills",
			MCP: []runner.MCPServer{{Name: "docs", Command: []string{"docs-web"}}}},
	}
	s := agentconfig.NewService(st, nil, time.Now)
	got, err := s.ForRun(t.Context(), "org", "web")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range got.Skills {
		names = append(names, x.Name+"="+string(x.Files[0].Content))
	}
	if strings.Join(names, " ") != "review=org's release=web's" || got.SkillsPath != ".berth/skills" {
		t.Errorf("skills %v, path %q", names, got.SkillsPath)
	}
	if len(got.MCP) != 2 || got.MCP[0].Name != "tracker" || got.MCP[1].Command[0] != "docs-web" {
		t.Errorf("MCP servers %+v", got.MCP)
	}
	if got, _ := s.ForRun(t.Context(), "org", "ml"); got.SkillsPath != ".org/skills" || len(got.Skills) != 2 {
		t.Errorf("a project with none: %+v", got)
	}
}

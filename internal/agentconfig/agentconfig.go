// Package agentconfig is an organisation's and a project's agent
// configuration (issue 23): the user-level instructions (an AGENTS.md
// text) and the reasoning effort its agent runs start with. A run's is
// the organisation's and its project's together: the instructions
// concatenated, the organisation's first; the project's effort over the
// organisation's. berth renders the instructions where each runner's CLI
// reads them, under HOME, never into the checkout (runner.RunFiles), and
// hands a Kelos image KELOS_AGENTS_MD and KELOS_EFFORT.
package agentconfig

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/runner"
)

// Config is one scope's agent configuration, as written.
type Config struct {
	// Instructions are user-level instructions, UTF-8 Markdown, at most
	// runner.MaxInstructions bytes (a run's, the two scopes' together,
	// too).
	Instructions string
	// Effort is the reasoning effort runs start with: low, medium or
	// high; "" leaves it to the CLI.
	Effort string
	// Model is the model a run starts on when its create names none and
	// the project may reach it in an API the runner speaks (else the
	// deployment's default, BERTH_AGENT_MODEL, as before); "" none.
	Model string
	// Skills are skills uploaded with the configuration (the Agent
	// Skills layout), and SkillsPath a directory of the run's repository
	// whose subdirectories are skills, copied from the checkout when the
	// run starts; both go where the runner's CLI reads user-level skills
	// (a kelos image: KELOS_PLUGIN_DIR).
	Skills     []runner.Skill
	SkillsPath string
	// MCP are the Model Context Protocol servers runs are given.
	MCP []runner.MCPServer
	// PullRequests is "off" when no run of the scope opens a pull (merge)
	// request, whatever its trigger or create says: a person opens them
	// from the branch the run pushed. "" or "on": triggers open them
	// unless set not to, hand-made runs when asked (--open-pr).
	PullRequests string
	// UpdatedAt and UpdatedBy say who wrote it last; zero for a scope
	// never written.
	UpdatedAt time.Time
	UpdatedBy string
}

// maxModel bounds a model's id.
const maxModel = 200

// Efforts are the efforts a configuration may name.
var Efforts = []string{"low", "medium", "high"}

// Validate says which field is wrong and why.
func (c Config) Validate() error {
	switch {
	case len(c.Instructions) > runner.MaxInstructions:
		return fault.Field("instructions", "%d bytes: at most %d", len(c.Instructions), runner.MaxInstructions)
	case !utf8.ValidString(c.Instructions) || strings.ContainsRune(c.Instructions, 0):
		return fault.Field("instructions", "not UTF-8 text (or holds NUL)")
	case c.Effort != "" && c.Effort != "low" && c.Effort != "medium" && c.Effort != "high":
		return fault.Field("effort", "%q is not one of %s, or empty", c.Effort, strings.Join(Efforts, ", "))
	case len(c.Model) > maxModel || strings.ContainsFunc(c.Model, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return fault.Field("model", "a model's id, at most %d bytes without spaces or control characters", maxModel)
	}
	if err := runner.CheckSkills(c.Skills); err != nil {
		return fault.Field("skills", "%v", err)
	}
	if c.SkillsPath != "" {
		if err := runner.CheckRepoPath(c.SkillsPath); err != nil {
			return fault.Field("skills_path", "%v", err)
		}
	}
	if err := runner.CheckMCP(c.MCP); err != nil {
		return fault.Field("mcp", "%v", err)
	}
	if c.PullRequests != "" && c.PullRequests != "on" && c.PullRequests != "off" {
		return fault.Field("pull_requests", "%q is not on or off", c.PullRequests)
	}
	return nil
}

// OpensPullRequests reports whether the scope's runs may open pull
// requests.
func (c Config) OpensPullRequests() bool { return c.PullRequests != "off" }

// Store keeps the configurations: project "" is the organisation's own.
type Store interface {
	// AgentConfig reads one scope's; a scope never written is the zero
	// Config.
	AgentConfig(ctx context.Context, org, project string) (Config, error)
	// PutAgentConfig writes one scope's whole, with its audit entry.
	PutAgentConfig(ctx context.Context, org, project string, c Config, e audit.Event) error
}

// Service reads and writes configurations for people, and combines them
// for runs.
type Service struct {
	store    Store
	accounts *account.Service
	now      func() time.Time
}

// NewService returns a Service.
func NewService(store Store, accounts *account.Service, now func() time.Time) *Service {
	return &Service{store: store, accounts: accounts, now: now}
}

// Get reads one scope's configuration as written, for whoever may see the
// organisation.
func (s *Service) Get(ctx context.Context, p account.Principal, orgRef, projectRef string) (Config, error) {
	org, project, err := s.accounts.Scope(ctx, p, orgRef, projectRef)
	if err != nil {
		return Config{}, err
	}
	return s.store.AgentConfig(ctx, org, project)
}

// Set writes one scope's configuration whole: the organisation's
// administrators only. It is audited (agent_config.set) with what changed
// in words, never the instructions themselves.
func (s *Service) Set(ctx context.Context, p account.Principal, orgRef, projectRef string, c Config) (Config, error) {
	org, project, err := s.accounts.Scope(ctx, p, orgRef, projectRef)
	if err != nil {
		return Config{}, err
	}
	if !p.IsAdminOf(org) {
		return Config{}, fault.Errorf(fault.Forbidden, "only an administrator of the organisation sets its agent configuration")
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	c.UpdatedAt, c.UpdatedBy = s.now().UTC(), p.User.ID
	target := "organisation"
	if project != "" {
		target = "project " + projectRef
	}
	e := audit.Event{At: c.UpdatedAt, Org: org, Actor: p.User.ID, Action: audit.AgentConfigSet, Target: target, Outcome: audit.OK,
		Detail: fmt.Sprintf("instructions %d bytes, effort %s, model %s, %d skills%s, MCP servers %s, pull requests %s", len(c.Instructions), orNone(c.Effort), orNone(c.Model),
			len(c.Skills), skillsFrom(c.SkillsPath), mcpNames(c.MCP), orNone(c.PullRequests))}
	if err := s.store.PutAgentConfig(ctx, org, project, c, e); err != nil {
		return Config{}, err
	}
	return c, nil
}

func skillsFrom(path string) string {
	if path == "" {
		return ""
	}
	return " and those in the repository's " + path
}

func mcpNames(ms []runner.MCPServer) string {
	if len(ms) == 0 {
		return "none"
	}
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name
	}
	return strings.Join(names, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "unset"
	}
	return s
}

// ForRun is a run's configuration: the organisation's instructions, then
// its project's, and the project's effort and model over the
// organisation's.
// Together they are held to runner.MaxInstructions.
func (s *Service) ForRun(ctx context.Context, org, project string) (Config, error) {
	o, err := s.store.AgentConfig(ctx, org, "")
	if err != nil {
		return Config{}, fmt.Errorf("agent configuration of %s: %w", org, err)
	}
	p, err := s.store.AgentConfig(ctx, org, project)
	if err != nil {
		return Config{}, fmt.Errorf("agent configuration of %s: %w", project, err)
	}
	var parts []string
	for _, in := range []string{o.Instructions, p.Instructions} {
		if in = strings.TrimSpace(in); in != "" {
			parts = append(parts, in)
		}
	}
	out := Config{Instructions: strings.Join(parts, "\n\n"), Effort: o.Effort, Model: o.Model}
	if out.Instructions != "" {
		out.Instructions += "\n"
	}
	if p.Effort != "" {
		out.Effort = p.Effort
	}
	if p.Model != "" {
		out.Model = p.Model
	}
	// Skills and MCP servers: both scopes', the project's over the
	// organisation's of the same name; the project's skills path over the
	// organisation's.
	out.Skills = mergeByName(o.Skills, p.Skills, func(s runner.Skill) string { return s.Name })
	out.MCP = mergeByName(o.MCP, p.MCP, func(m runner.MCPServer) string { return m.Name })
	out.SkillsPath = o.SkillsPath
	if p.SkillsPath != "" {
		out.SkillsPath = p.SkillsPath
	}
	out.PullRequests = o.PullRequests
	if p.PullRequests != "" {
		out.PullRequests = p.PullRequests
	}
	if err := runner.CheckSkills(out.Skills); err != nil {
		return Config{}, fault.Field("skills", "the organisation's and project %s's together: %v", project, err)
	}
	if err := runner.CheckMCP(out.MCP); err != nil {
		return Config{}, fault.Field("mcp", "the organisation's and project %s's together: %v", project, err)
	}
	if len(out.Instructions) > runner.MaxInstructions {
		return Config{}, fault.Field("instructions", "the organisation's and project %s's instructions together are %d bytes: at most %d", project, len(out.Instructions), runner.MaxInstructions)
	}
	return out, nil
}

// mergeByName is org's and prj's, prj's replacing org's of the same name,
// in org's order then prj's.
func mergeByName[T any](org, prj []T, name func(T) string) []T {
	var out []T
	over := map[string]bool{}
	for _, x := range prj {
		over[name(x)] = true
	}
	for _, x := range org {
		if !over[name(x)] {
			out = append(out, x)
		}
	}
	return append(out, prj...)
}

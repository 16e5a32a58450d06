package inference

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/runner"
)

// Status is an organisation's or a project's settings as written, with
// this month's spend and what the settings let its keys reach.
type Status struct {
	Org         string
	Project     string // "" for the organisation
	ProjectName string
	Settings    Settings
	// Month is the first instant of the month SpentUSD counts (UTC).
	Month    time.Time
	SpentUSD float64
	// ReservedUSD is held by requests in flight; with replicas, what
	// their leases hold (their requests in flight and room for the next).
	ReservedUSD float64
	// Reachable are the models a key of this scope may reach: the
	// organisation's list narrowed by the project's.
	Reachable []string
}

// Settings returns an organisation's (projectRef "") or a project's
// inference settings. Administrators of the organisation only.
func (s *Service) Settings(ctx context.Context, p account.Principal, orgRef, projectRef string) (Status, error) {
	org, prj, err := s.adminScope(ctx, p, orgRef, projectRef, "read")
	if err != nil {
		return Status{}, err
	}
	return s.status(ctx, org, prj)
}

// SetSettings writes an organisation's (projectRef "") or a project's
// inference settings whole. Administrators of the organisation only; the
// models must be ones the gateway serves.
func (s *Service) SetSettings(ctx context.Context, p account.Principal, orgRef, projectRef string, set Settings) (Status, error) {
	org, prj, err := s.adminScope(ctx, p, orgRef, projectRef, "set")
	if err != nil {
		return Status{}, err
	}
	if err := set.Validate(s.catalog); err != nil {
		return Status{}, fmt.Errorf("set inference settings: %w", err)
	}
	if err := s.store.PutInferenceSettings(ctx, org, prj.ID, set); err != nil {
		return Status{}, fmt.Errorf("set inference settings: %w", err)
	}
	s.forget()
	target := "organisation"
	if prj.ID != "" {
		target = "project " + prj.Name
	}
	e := audit.Event{At: s.now(), Org: org, Actor: p.User.ID, Action: AuditSet, Target: target, Outcome: audit.OK, Detail: describe(set)}
	if err := s.audit.Record(ctx, e); err != nil {
		s.log.ErrorContext(ctx, "audit event not recorded", "action", e.Action, "org", org, "err", err)
	}
	return s.status(ctx, org, prj)
}

// adminScope resolves an organisation and, when projectRef is set, one of
// its projects that p administers.
func (s *Service) adminScope(ctx context.Context, p account.Principal, orgRef, projectRef, verb string) (string, account.Project, error) {
	if p.Sandbox != "" {
		return "", account.Project{}, fault.Errorf(fault.Forbidden, "a sandbox's key cannot %s inference settings", verb)
	}
	o, err := s.accounts.Organisation(ctx, p, orgRef)
	if err != nil {
		return "", account.Project{}, err
	}
	if !p.IsAdminOf(o.ID) {
		return "", account.Project{}, fault.Errorf(fault.Forbidden, "%s inference settings: only an administrator of %s may", verb, o.Name)
	}
	if projectRef == "" {
		return o.ID, account.Project{}, nil
	}
	prj, err := s.accounts.Project(ctx, o.ID, projectRef)
	if err != nil {
		return "", account.Project{}, err
	}
	return o.ID, prj, nil
}

func (s *Service) status(ctx context.Context, org string, prj account.Project) (Status, error) {
	set, err := s.store.GetInferenceSettings(ctx, org, prj.ID)
	if err != nil {
		return Status{}, err
	}
	now := s.now()
	spent, reserved, err := s.ledger.status(ctx, org, prj.ID, now)
	if err != nil {
		return Status{}, err
	}
	var pol Policy
	if prj.ID == "" {
		pol = newPolicy(s.catalog, org, "", "", set, Settings{})
	} else if pol, err = s.policy(ctx, org, prj); err != nil {
		return Status{}, err
	}
	return Status{Org: org, Project: prj.ID, ProjectName: prj.Name, Settings: set, Month: monthOf(now),
		SpentUSD: spent, ReservedUSD: reserved, Reachable: pol.reachableIDs()}, nil
}

// describe words settings for the audit log: never the prompt itself.
func describe(s Settings) string {
	models := "models not set"
	if s.Models != nil {
		models = "models " + names(s.Models)
	}
	budget := "no budget"
	if s.BudgetUSD != nil {
		budget = "budget " + quantity.USD(*s.BudgetUSD) + " a month"
	}
	rate := "no rate limit"
	if s.Rate != nil {
		rate = "rate " + s.Rate.String()
	}
	prompt := "no system prompt"
	if s.SystemPrompt != "" {
		prompt = fmt.Sprintf("a system prompt of %d bytes", len(s.SystemPrompt))
	}
	return strings.Join([]string{models, budget, rate, prompt}, ", ")
}

// Reachable lists the models a key of a project may reach, as a sandbox's
// runner sees them: chat models first and routers after them (SPEC S14),
// each with its price and the APIs its provider speaks (a router's: those
// of the target it routes to), so an agent run can be given a model its
// CLI can call (runner.Speaks). None when the gateway serves no model or
// the project may reach none. Budgets are not looked at: a request over
// one is refused when it is made.
func (s *Service) Reachable(ctx context.Context, org, project string) ([]runner.Model, error) {
	if s.catalog.Empty() {
		return nil, nil
	}
	prj, err := s.accounts.Project(ctx, org, project)
	if err != nil {
		return nil, fmt.Errorf("models of project %s: %w", project, err)
	}
	pol, err := s.policy(ctx, org, prj)
	if err != nil {
		return nil, err
	}
	var out []runner.Model
	for _, m := range pol.Reachable() {
		out = append(out, s.runnerModel(m, pol.Allows))
	}
	return out, nil
}

// runnerModel is m as a runner's config lists it.
func (s *Service) runnerModel(m Model, allowed func(string) bool) runner.Model {
	rm := runner.Model{ID: m.ID, Name: m.Name, Router: m.Router(), Reasoning: m.Reasoning,
		ContextWindow: m.ContextWindow, MaxTokens: m.MaxTokens}
	if !m.Router() {
		pr := m.Price
		rm.Price = &pr
	}
	if target, ok := s.catalog.route(m, allowed); ok {
		prov, _ := s.catalog.Provider(target.Provider)
		for _, d := range prov.Kind.Dialects() {
			rm.APIs = append(rm.APIs, runner.API(d))
		}
	}
	return rm
}

// SandboxEnv is what a sandbox of a project is told about models (SPEC
// S15): BERTH_MODEL and ANTHROPIC_MODEL, model (an agent run's, chosen for
// its runner from Reachable) or else the first chat model its key may
// reach (else its first router); and Pi's models.json and settings.json
// (BERTH_PI_CONFIG, BERTH_PI_SETTINGS) listing every model it may reach,
// routers last, each in the API its provider speaks, the key named by its
// variable (BERTH_API_KEY, which Pi reads) and never written, the default
// provider pinned to berth and the default model BERTH_MODEL's. A sandbox
// whose key reaches no model gets none of them; a model it may not reach
// is refused.
func (s *Service) SandboxEnv(ctx context.Context, org, project, model string) (map[string]string, error) {
	reach, err := s.Reachable(ctx, org, project)
	if err != nil || len(reach) == 0 {
		return nil, err
	}
	first := reach[0]
	if model != "" {
		i := slices.IndexFunc(reach, func(m runner.Model) bool { return m.ID == model })
		if i < 0 {
			return nil, fault.Errorf(fault.Forbidden, "model %q: project %s may not reach it", model, project)
		}
		first = reach[i]
	}
	env := map[string]string{"BERTH_MODEL": first.ID, "ANTHROPIC_MODEL": first.ID}
	if s.publicURL == "" {
		return env, nil
	}
	files, err := s.piFiles(reach, first.ID)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		switch f.Path {
		case ".pi/agent/models.json":
			env["BERTH_PI_CONFIG"] = string(f.Content)
		case ".pi/agent/settings.json":
			env["BERTH_PI_SETTINGS"] = string(f.Content)
		}
	}
	return env, nil
}

// piFiles renders Pi's models.json and settings.json for the models a key
// may reach (as Reachable lists them), pointed at the gateway, with model
// as Pi's default.
func (s *Service) piFiles(reach []runner.Model, model string) ([]runner.File, error) {
	pi, err := runner.Get("pi")
	if err != nil {
		return nil, err
	}
	return pi.Files(runner.Gateway{BaseURL: s.publicURL, Models: reach}, runner.Options{Model: model})
}

// Withheld names the variables that must never reach a sandbox: the
// gateway's vendor credentials (SPEC S14).
func (s *Service) Withheld() []string { return s.catalog.CredentialEnvs() }

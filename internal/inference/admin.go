package inference

import (
	"context"
	"fmt"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
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
	Month       time.Time
	SpentUSD    float64
	ReservedUSD float64 // held by requests in flight
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
		return "", account.Project{}, fmt.Errorf("a sandbox's key cannot %s inference settings: %w", verb, ErrForbidden)
	}
	o, err := s.accounts.Organisation(ctx, p, orgRef)
	if err != nil {
		return "", account.Project{}, err
	}
	if !p.IsAdminOf(o.ID) {
		return "", account.Project{}, fmt.Errorf("%s inference settings: only an administrator of %s may: %w", verb, o.Name, ErrForbidden)
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
	spent, reserved, err := s.ledger.spentNow(ctx, org, prj.ID, now)
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
		budget = fmt.Sprintf("budget $%.2f a month", *s.BudgetUSD)
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

// SandboxEnv is what a sandbox of a project is told about models (SPEC
// S15): BERTH_MODEL and ANTHROPIC_MODEL, the first chat model its key may
// reach (else its first router), and Pi's models.json and settings.json
// (BERTH_PI_CONFIG, BERTH_PI_SETTINGS) listing every model it may reach,
// routers last, the key named by its variable (BERTH_API_KEY, which Pi
// reads) and never written, and the default provider pinned to berth. A
// sandbox whose key reaches no model gets none of them.
func (s *Service) SandboxEnv(ctx context.Context, org, project string) (map[string]string, error) {
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
	reach := pol.Reachable()
	if len(reach) == 0 {
		return nil, nil
	}
	first := reach[0].ID
	env := map[string]string{"BERTH_MODEL": first, "ANTHROPIC_MODEL": first}
	if s.publicURL == "" {
		return env, nil
	}
	files, err := s.PiFiles(reach)
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

// PiFiles renders Pi's models.json and settings.json for the models a key
// may reach (as Reachable orders them), pointed at the gateway, with the
// first of them as Pi's default model.
func (s *Service) PiFiles(reach []Model) ([]runner.File, error) {
	if len(reach) == 0 {
		return nil, fmt.Errorf("pi's files: no model to list: %w", ErrNotAllowed)
	}
	pi, err := runner.Get("pi")
	if err != nil {
		return nil, err
	}
	g := runner.Gateway{BaseURL: s.publicURL}
	for _, m := range reach {
		rm := runner.Model{ID: m.ID, Name: m.Name, Router: m.Router(), Reasoning: m.Reasoning,
			ContextWindow: m.ContextWindow, MaxTokens: m.MaxTokens}
		if !m.Router() {
			pr := m.Price
			rm.Price = &pr
		}
		g.Models = append(g.Models, rm)
	}
	return pi.Files(g, runner.Options{Model: reach[0].ID})
}

// Withheld names the variables that must never reach a sandbox: the
// gateway's vendor credentials (SPEC S14).
func (s *Service) Withheld() []string { return s.catalog.CredentialEnvs() }

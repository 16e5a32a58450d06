package account

import (
	"context"
	"fmt"
	"slices"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/guardrail"
)

// GuardrailStore keeps the guardrail of an organisation (project "") or of a
// project. One never written reads as the zero Guardrail: no limit, and no
// repository list.
type GuardrailStore interface {
	GetGuardrail(ctx context.Context, org, project string) (guardrail.Guardrail, error)
	PutGuardrail(ctx context.Context, org, project string, g guardrail.Guardrail, events ...audit.Event) error
}

// Guardrail returns the guardrail set on an organisation, or on one of its
// projects when projectRef is not empty, as written (not combined).
func (s *Service) Guardrail(ctx context.Context, p Principal, orgRef, projectRef string) (guardrail.Guardrail, error) {
	org, prj, err := s.Scope(ctx, p, orgRef, projectRef)
	if err != nil {
		return guardrail.Guardrail{}, err
	}
	return s.guardrails.GetGuardrail(ctx, org, prj)
}

// SetGuardrail writes a guardrail whole (SPEC S7): fields left nil clear
// their limit, so an editor that does not show a field must send it back as
// it read it. An organisation's administrators set its guardrail and its
// projects'; only an operator may change an organisation's allowed_repos.
func (s *Service) SetGuardrail(ctx context.Context, p Principal, orgRef, projectRef string, g guardrail.Guardrail) error {
	org, prj, err := s.Scope(ctx, p, orgRef, projectRef)
	if err != nil {
		return err
	}
	if !p.IsAdminOf(org) {
		return fault.Errorf(fault.Forbidden, "set guardrail: only an administrator may")
	}
	if err := g.Validate(); err != nil {
		return fault.Field("guardrail", "%v", err)
	}
	if prj == "" && !p.IsOperator() {
		old, err := s.guardrails.GetGuardrail(ctx, org, "")
		if err != nil {
			return fmt.Errorf("set guardrail: %w", err)
		}
		if !sameList(old.AllowedRepos, g.AllowedRepos) {
			return fault.Errorf(fault.Forbidden, "set guardrail: an organisation's allowed_repos is set by an operator")
		}
	}
	target := "organisation"
	if prj != "" {
		target = "project " + projectRef
	}
	e := audit.Event{At: s.now(), Org: org, Actor: p.User.ID, Action: audit.GuardrailSet, Target: target, Detail: g.String()}
	if err := s.guardrails.PutGuardrail(ctx, org, prj, g, e); err != nil {
		return fmt.Errorf("set guardrail: %w", err)
	}
	return nil
}

// EffectiveGuardrail combines an organisation's guardrail with one of its
// projects' (restrict-only).
func (s *Service) EffectiveGuardrail(ctx context.Context, org, project string) (guardrail.Guardrail, error) {
	og, err := s.guardrails.GetGuardrail(ctx, org, "")
	if err != nil {
		return guardrail.Guardrail{}, fmt.Errorf("guardrail of %s: %w", org, err)
	}
	pg, err := s.guardrails.GetGuardrail(ctx, org, project)
	if err != nil {
		return guardrail.Guardrail{}, fmt.Errorf("guardrail of %s: %w", project, err)
	}
	return guardrail.Combine(og, pg), nil
}

// Scope resolves an organisation p may see (not found otherwise) and,
// when projectRef is not empty, one of its projects: what a guardrail, an
// agent configuration or a project's secrets belong to.
func (s *Service) Scope(ctx context.Context, p Principal, orgRef, projectRef string) (org, project string, err error) {
	o, err := s.Organisation(ctx, p, orgRef)
	if err != nil {
		return "", "", err
	}
	if projectRef == "" {
		return o.ID, "", nil
	}
	prj, err := s.Project(ctx, o.ID, projectRef)
	if err != nil {
		return "", "", err
	}
	return o.ID, prj.ID, nil
}

// sameList compares two repository lists, telling nil (unset) from empty.
func sameList(a, b []string) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

package repository

import (
	"context"
	"errors"
	"strings"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/review"
	"berth.dev/berth/internal/sandbox"
)

// Access authorises a git request through the gateway (SPEC S17): only a
// sandbox's own key, only for its own repository, only while it is
// starting or running, and only while allowed_repos still allows it.
// Anything else is not found. It returns the repository and what a push
// may do; the caller fills in the default branch.
func (s *Service) Access(ctx context.Context, p account.Principal, path string) (sandbox.Sandbox, forge.Repo, forge.PushRules, error) {
	notFound := fault.Errorf(fault.NotFound, "repository %s", path)
	if p.Sandbox == "" || s.forge == nil {
		return sandbox.Sandbox{}, forge.Repo{}, forge.PushRules{}, notFound
	}
	sb, err := s.store.GetSandbox(ctx, sandbox.ID(p.Sandbox))
	if err != nil {
		return sandbox.Sandbox{}, forge.Repo{}, forge.PushRules{}, notFound
	}
	r := s.repoOf(sb)
	if sb.Repo == "" || !strings.EqualFold(r.Path, path) || (sb.State != sandbox.StateRunning && sb.State != sandbox.StateStarting) {
		return sandbox.Sandbox{}, forge.Repo{}, forge.PushRules{}, notFound
	}
	if err := s.checkAllowed(ctx, sb.Org, sb.Project, r); err != nil {
		if errors.Is(err, fault.Forbidden) {
			s.record(ctx, audit.Event{Org: sb.Org, Sandbox: string(sb.ID), Action: audit.GitFetch, Target: sb.Repo, Outcome: audit.Refused, Detail: err.Error()})
		}
		return sandbox.Sandbox{}, forge.Repo{}, forge.PushRules{}, err
	}
	created, err := s.store.CreatedRefs(ctx, sb.ID)
	if err != nil {
		return sandbox.Sandbox{}, forge.Repo{}, forge.PushRules{}, err
	}
	rules := forge.PushRules{Created: created}
	if sb.Purpose == sandbox.PurposeAgent {
		rules.Only = forge.AgentBranch(sb.Name)
	}
	switch {
	case sb.Role == sandbox.RoleReviewer:
		rules.ReadOnly = "a reviewer pushes nothing: its work is its verdict (" + review.FileName + ")"
	case sb.Purpose == sandbox.PurposeAgent && sb.Runner != "":
		// An agent run (a runner is set only where the deployment runs
		// agents): whatever it pushed mid-run would outlive a failed or
		// terminated run, so its work reaches the branch only through the
		// host.
		rules.ReadOnly = sandbox.AgentPushRefused
	}
	return sb, r, rules, nil
}

// Pushed records what a sandbox's push did: the refs it created (the only
// ones it may delete later) and an audit entry.
func (s *Service) Pushed(ctx context.Context, sb sandbox.Sandbox, done []forge.RefUpdate) {
	var refs []string
	for _, u := range done {
		refs = append(refs, u.Ref)
		var err error
		switch {
		case u.IsCreate():
			err = s.store.AddCreatedRef(ctx, sb.ID, u.Ref)
		case u.IsDelete():
			err = s.store.DeleteCreatedRef(ctx, sb.ID, u.Ref)
		}
		if err != nil {
			s.log.WarnContext(ctx, "could not record a pushed ref", "sandbox", sb.ID, "err", err)
		}
	}
	s.record(ctx, audit.Event{Org: sb.Org, Actor: sb.Owner, Sandbox: string(sb.ID), Action: audit.GitPush, Target: sb.Repo,
		Detail: strings.Join(refs, " ")})
}

// Refused records a push the rules refused, with why.
func (s *Service) Refused(ctx context.Context, sb sandbox.Sandbox, why map[string]string) {
	var parts []string
	for ref, reason := range why {
		parts = append(parts, ref+": "+reason)
	}
	s.record(ctx, audit.Event{Org: sb.Org, Actor: sb.Owner, Sandbox: string(sb.ID), Action: audit.GitPush, Target: sb.Repo,
		Outcome: audit.Refused, Detail: strings.Join(parts, "; ")})
}

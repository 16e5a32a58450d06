package repository

import (
	"context"
	"fmt"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/sandbox"
)

// Mint gets a token for a token-mode sandbox's repository, lasting no
// longer than the sandbox, and records it. The caller hands it over.
func (s *Service) Mint(ctx context.Context, sb sandbox.Sandbox, actor string) (forge.Token, error) {
	t, err := s.forge.Token(ctx, s.repoOf(sb), sb.ExpiresAt)
	if err != nil {
		return forge.Token{}, err
	}
	now := s.now()
	e := audit.Event{At: now, Org: sb.Org, Actor: actor, Sandbox: string(sb.ID), Action: audit.CredentialIssue,
		Target: sb.Repo, Detail: fmt.Sprintf("%s token %s until %s", s.forge.Kind(), orDash(t.ID), t.ExpiresAt.UTC().Format(time.RFC3339))}
	if err := s.store.AddCredential(ctx, Credential{Sandbox: sb.ID, TokenID: t.ID, CreatedAt: now, ExpiresAt: t.ExpiresAt}, e); err != nil {
		_ = s.forge.Revoke(ctx, t)
		return forge.Token{}, err
	}
	return t, nil
}

// Revoke takes back every credential a sandbox still holds but the one
// whose token id is keep, where the forge allows (SPEC S9: when the
// sandbox ends, so does access). What it cannot revoke or record is
// logged.
func (s *Service) Revoke(ctx context.Context, sb sandbox.Sandbox, keep string) {
	if s.forge == nil {
		return
	}
	creds, err := s.store.LiveCredentials(ctx, sb.ID)
	if err != nil {
		s.log.WarnContext(ctx, "could not read a sandbox's credentials", "sandbox", sb.ID, "err", err)
		return
	}
	for _, c := range creds {
		if c.TokenID == keep && keep != "" {
			continue
		}
		if err := s.forge.Revoke(ctx, forge.Token{ID: c.TokenID}); err != nil {
			s.log.WarnContext(ctx, "could not revoke a repository credential", "sandbox", sb.ID, "err", err)
			continue
		}
		now := s.now()
		e := audit.Event{At: now, Org: sb.Org, Sandbox: string(sb.ID), Action: audit.CredentialRevoke, Target: sb.Repo,
			Detail: fmt.Sprintf("%s token %s", s.forge.Kind(), orDash(c.TokenID))}
		if err := s.store.RevokeCredential(ctx, sb.ID, c.TokenID, now, e); err != nil {
			s.log.WarnContext(ctx, "could not record a revoked credential", "sandbox", sb.ID, "err", err)
			continue
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Credential gives a token-mode sandbox a fresh token for its repository
// (POST /sandbox/v1/git-credential with the sandbox's own key) and revokes
// the ones it replaces. allowed_repos is checked again: a repository taken
// off the list gets no new token. forge.ErrNoCredential when there is none
// to give.
func (s *Service) Credential(ctx context.Context, p account.Principal) (forge.Token, error) {
	if p.Sandbox == "" {
		return forge.Token{}, fault.Errorf(fault.Forbidden, "git credential: only a sandbox's own key may ask")
	}
	sb, err := s.store.GetSandbox(ctx, sandbox.ID(p.Sandbox))
	if err != nil {
		return forge.Token{}, err
	}
	if sb.State != sandbox.StateRunning && sb.State != sandbox.StateStarting {
		return forge.Token{}, fault.Errorf(fault.Conflict, "git credential: sandbox %s is %s", sb.Name, sb.State)
	}
	if sb.Repo == "" || sb.GitMode != sandbox.GitToken || s.forge == nil {
		return forge.Token{}, fmt.Errorf("git credential: sandbox %s reaches its repository through the gateway, with its own key: %w", sb.Name, forge.ErrNoCredential)
	}
	if err := s.checkAllowed(ctx, sb.Org, sb.Project, s.repoOf(sb)); err != nil {
		s.record(ctx, audit.Event{Org: sb.Org, Sandbox: string(sb.ID), Action: audit.CredentialIssue, Target: sb.Repo, Outcome: audit.Refused, Detail: err.Error()})
		return forge.Token{}, err
	}
	t, err := s.Mint(ctx, sb, p.User.ID)
	if err != nil {
		return forge.Token{}, fmt.Errorf("git credential: %w", err)
	}
	s.Revoke(ctx, sb, t.ID)
	return t, nil
}

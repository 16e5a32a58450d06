package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/review"
)

// Credential is a repository credential handed to a sandbox, kept so it can
// be revoked when it is replaced or the sandbox ends.
type Credential struct {
	Sandbox   ID
	TokenID   string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// resolveRepo turns a repository address into a repository on the
// deployment's forge that the sandbox's guardrails allow (SPEC S9).
func (s *Service) resolveRepo(ctx context.Context, org, project, addr string) (forge.Repo, error) {
	if s.cfg.Forge == nil {
		return forge.Repo{}, fmt.Errorf("repository %s asked for, but this deployment has no git forge (BERTH_SANDBOX_GIT_FORGE is unset): %w", addr, ErrUnavailable)
	}
	r, err := forge.Parse(addr, s.cfg.Forge.Host())
	if err != nil {
		return forge.Repo{}, invalid("repo", "%v", err)
	}
	if err := s.checkAllowed(ctx, org, project, r); err != nil {
		return forge.Repo{}, err
	}
	// A forge that can tell at once whether it has the repository (the
	// local one) refuses a missing one here rather than in the sandbox.
	if l, ok := s.cfg.Forge.(interface {
		Path(forge.Repo) (string, error)
	}); ok {
		if _, err := l.Path(r); err != nil {
			return forge.Repo{}, invalid("repo", "%v (berth repo list shows the local forge's repositories)", err)
		}
	}
	return r, nil
}

// checkAllowed refuses a repository the guardrails do not allow (SPEC S9:
// checked at creation, at every token refresh and every git request).
func (s *Service) checkAllowed(ctx context.Context, org, project string, r forge.Repo) error {
	g, err := s.accounts.EffectiveGuardrail(ctx, org, project)
	if err != nil {
		return err
	}
	if !g.AllowsRepo(r.Path) {
		return fmt.Errorf("repository %s is not in the allowed_repos of this project and organisation (an operator sets the organisation's list): %w", r, ErrForbidden)
	}
	return nil
}

// repoOf names a sandbox's repository on the forge.
func (s *Service) repoOf(sb Sandbox) forge.Repo {
	host := ""
	if s.cfg.Forge != nil {
		host = s.cfg.Forge.Host()
	}
	return forge.Repo{Host: host, Path: strings.TrimPrefix(sb.Repo, host+"/")}
}

// cloneURL is the address the sandbox clones from: the gateway's git
// endpoint, or in token mode the forge.
func (s *Service) cloneURL(sb Sandbox) string {
	r := s.repoOf(sb)
	if sb.GitMode == GitToken {
		return s.cfg.Forge.CloneURL(r)
	}
	return strings.TrimSuffix(s.cfg.PublicURL, "/") + "/git/" + r.Path + ".git"
}

// mintCredential gets a token for a token-mode sandbox's repository, lasting
// no longer than the sandbox, and records it. The caller hands it over.
func (s *Service) mintCredential(ctx context.Context, sb Sandbox, actor string) (forge.Token, error) {
	t, err := s.cfg.Forge.Token(ctx, s.repoOf(sb), sb.ExpiresAt)
	if err != nil {
		return forge.Token{}, err
	}
	now := s.now()
	e := audit.Event{At: now, Org: sb.Org, Actor: actor, Sandbox: string(sb.ID), Action: audit.CredentialIssue,
		Target: sb.Repo, Detail: fmt.Sprintf("%s token %s until %s", s.cfg.Forge.Kind(), orDash(t.ID), t.ExpiresAt.UTC().Format(time.RFC3339))}
	if err := s.store.AddCredential(ctx, Credential{Sandbox: sb.ID, TokenID: t.ID, CreatedAt: now, ExpiresAt: t.ExpiresAt}, e); err != nil {
		_ = s.cfg.Forge.Revoke(ctx, t)
		return forge.Token{}, err
	}
	return t, nil
}

// revokeCredentials takes back every credential a sandbox still holds,
// where the forge allows (SPEC S9: when the sandbox ends, so does access).
func (s *Service) revokeCredentials(ctx context.Context, sb Sandbox, keep string) {
	if s.cfg.Forge == nil {
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
		if err := s.cfg.Forge.Revoke(ctx, forge.Token{ID: c.TokenID}); err != nil {
			s.log.WarnContext(ctx, "could not revoke a repository credential", "sandbox", sb.ID, "err", err)
			continue
		}
		now := s.now()
		e := audit.Event{At: now, Org: sb.Org, Sandbox: string(sb.ID), Action: audit.CredentialRevoke, Target: sb.Repo,
			Detail: fmt.Sprintf("%s token %s", s.cfg.Forge.Kind(), orDash(c.TokenID))}
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

// gitEnv is the repository part of a sandbox's environment (SPEC S15).
func (s *Service) gitEnv(sb Sandbox, t forge.Token) map[string]string {
	if sb.Repo == "" {
		return nil
	}
	env := map[string]string{
		"BERTH_REPO":               s.cloneURL(sb),
		"BERTH_GIT_MODE":           string(sb.GitMode),
		"BERTH_GIT_CREDENTIAL_URL": strings.TrimSuffix(s.cfg.PublicURL, "/") + "/sandbox/v1/git-credential",
	}
	if sb.Branch != "" {
		env["BERTH_BRANCH"] = sb.Branch
	}
	if !t.Secret.IsZero() {
		env["BERTH_GIT_USERNAME"] = t.Username
		env["BERTH_GIT_TOKEN"] = t.Secret.Reveal()
		env["BERTH_GIT_TOKEN_EXPIRES"] = strconv.FormatInt(t.ExpiresAt.Unix(), 10)
	}
	return env
}

// GitCredential gives a token-mode sandbox a fresh token for its repository
// (POST /sandbox/v1/git-credential with the sandbox's own key) and revokes
// the ones it replaces. allowed_repos is checked again: a repository taken
// off the list gets no new token. ErrNoCredential when there is none to give.
func (s *Service) GitCredential(ctx context.Context, p account.Principal) (forge.Token, error) {
	if p.Sandbox == "" {
		return forge.Token{}, fmt.Errorf("git credential: only a sandbox's own key may ask: %w", ErrForbidden)
	}
	sb, err := s.store.GetSandbox(ctx, ID(p.Sandbox))
	if err != nil {
		return forge.Token{}, err
	}
	if sb.State != StateRunning && sb.State != StateStarting {
		return forge.Token{}, fmt.Errorf("git credential: sandbox %s is %s: %w", sb.Name, sb.State, ErrConflict)
	}
	if sb.Repo == "" || sb.GitMode != GitToken || s.cfg.Forge == nil {
		return forge.Token{}, fmt.Errorf("git credential: sandbox %s reaches its repository through the gateway, with its own key: %w", sb.Name, forge.ErrNoCredential)
	}
	if err := s.checkAllowed(ctx, sb.Org, sb.Project, s.repoOf(sb)); err != nil {
		s.record(ctx, audit.Event{Org: sb.Org, Sandbox: string(sb.ID), Action: audit.CredentialIssue, Target: sb.Repo, Outcome: audit.Refused, Detail: err.Error()})
		return forge.Token{}, err
	}
	t, err := s.mintCredential(ctx, sb, p.User.ID)
	if err != nil {
		return forge.Token{}, fmt.Errorf("git credential: %w", err)
	}
	s.revokeCredentials(ctx, sb, t.ID)
	return t, nil
}

// GitAccess authorises a git request through the gateway (SPEC S17): only a
// sandbox's own key, only for its own repository, only while it is starting
// or running, and only while allowed_repos still allows it. Anything else is
// not found. It returns the repository and what a push may do; the caller
// fills in the default branch.
func (s *Service) GitAccess(ctx context.Context, p account.Principal, path string) (Sandbox, forge.Repo, forge.PushRules, error) {
	notFound := fmt.Errorf("repository %s: %w", path, ErrNotFound)
	if p.Sandbox == "" || s.cfg.Forge == nil {
		return Sandbox{}, forge.Repo{}, forge.PushRules{}, notFound
	}
	sb, err := s.store.GetSandbox(ctx, ID(p.Sandbox))
	if err != nil {
		return Sandbox{}, forge.Repo{}, forge.PushRules{}, notFound
	}
	r := s.repoOf(sb)
	if sb.Repo == "" || !strings.EqualFold(r.Path, path) || (sb.State != StateRunning && sb.State != StateStarting) {
		return Sandbox{}, forge.Repo{}, forge.PushRules{}, notFound
	}
	if err := s.checkAllowed(ctx, sb.Org, sb.Project, r); err != nil {
		if errors.Is(err, ErrForbidden) {
			s.record(ctx, audit.Event{Org: sb.Org, Sandbox: string(sb.ID), Action: audit.GitFetch, Target: sb.Repo, Outcome: audit.Refused, Detail: err.Error()})
		}
		return Sandbox{}, forge.Repo{}, forge.PushRules{}, err
	}
	created, err := s.store.CreatedRefs(ctx, sb.ID)
	if err != nil {
		return Sandbox{}, forge.Repo{}, forge.PushRules{}, err
	}
	rules := forge.PushRules{Created: created}
	if sb.Purpose == PurposeAgent {
		rules.Only = forge.AgentBranch(sb.Name)
	}
	switch {
	case sb.Role == RoleReviewer:
		rules.ReadOnly = "a reviewer pushes nothing: its work is its verdict (" + review.FileName + ")"
	case s.agentRun(sb):
		// Whatever it pushed mid-run would outlive a failed or terminated
		// run: its work reaches the branch only through the host.
		rules.ReadOnly = AgentPushRefused
	}
	return sb, r, rules, nil
}

// GitPushed records what a sandbox's push did: the refs it created (the
// only ones it may delete later) and an audit entry.
func (s *Service) GitPushed(ctx context.Context, sb Sandbox, done []forge.RefUpdate) {
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

// GitRefused records a push the rules refused, with why.
func (s *Service) GitRefused(ctx context.Context, sb Sandbox, why map[string]string) {
	var parts []string
	for ref, reason := range why {
		parts = append(parts, ref+": "+reason)
	}
	s.record(ctx, audit.Event{Org: sb.Org, Actor: sb.Owner, Sandbox: string(sb.ID), Action: audit.GitPush, Target: sb.Repo,
		Outcome: audit.Refused, Detail: strings.Join(parts, "; ")})
}

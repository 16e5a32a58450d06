// Package repository is how a sandbox reaches its repository (SPEC S9,
// S17): the address a create names, resolved on the deployment's forge and
// checked against allowed_repos (at creation, at every resume, token
// refresh and git request); the credentials a token-mode sandbox holds,
// minted, recorded, and revoked when replaced or when the sandbox ends; the
// repository part of a sandbox's environment; and the gateway's git
// routes: who may fetch and push through /git/ and what a push may do, a
// fresh token at /sandbox/v1/git-credential, and the audit of every push.
//
// It sits one floor above sandbox: the sandbox service calls it through
// its Repositories port during creates, starts and ends, and the gateway
// calls it for the git routes.
package repository

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/sandbox"
)

// Store is what the repository service needs from the database: the
// sandbox a key belongs to, the credentials handed to sandboxes, and the
// refs they created. AddCredential and RevokeCredential record events
// with their write (RevokeCredential only when it revokes); every write
// waits for the database as long as its context allows.
type Store interface {
	GetSandbox(ctx context.Context, id sandbox.ID) (sandbox.Sandbox, error)
	AddCredential(ctx context.Context, c Credential, events ...audit.Event) error
	LiveCredentials(ctx context.Context, id sandbox.ID) ([]Credential, error)
	RevokeCredential(ctx context.Context, id sandbox.ID, tokenID string, at time.Time, events ...audit.Event) error
	AddCreatedRef(ctx context.Context, id sandbox.ID, ref string) error
	DeleteCreatedRef(ctx context.Context, id sandbox.ID, ref string) error
	CreatedRefs(ctx context.Context, id sandbox.ID) (map[string]bool, error)
}

// Guardrails is what the service needs to know of an organisation's and a
// project's guardrails: their allowed_repos.
type Guardrails interface {
	EffectiveGuardrail(ctx context.Context, org, project string) (guardrail.Guardrail, error)
}

// Credential is a repository credential handed to a sandbox, kept so it can
// be revoked when it is replaced or the sandbox ends.
type Credential struct {
	Sandbox   sandbox.ID
	TokenID   string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Config is the deployment's repository settings, read once by the
// composition root.
type Config struct {
	// Forge is where repositories live; nil means sandboxes cannot have
	// one.
	Forge forge.Forge
	// PublicURL is the gateway as a sandbox reaches it (BERTH_BASE_URL).
	PublicURL string
	// Audit records repository credentials issued and revoked, and every
	// push (SPEC S17); nil records nothing.
	Audit audit.Recorder
}

// Service resolves, authorises and records how sandboxes reach their
// repositories.
type Service struct {
	store      Store
	guardrails Guardrails
	forge      forge.Forge // nil without one
	publicURL  string
	audit      audit.Recorder
	log        *slog.Logger
	now        func() time.Time
}

var _ sandbox.Repositories = (*Service)(nil)

// New returns a Service.
func New(store Store, guardrails Guardrails, cfg Config, log *slog.Logger, now func() time.Time) *Service {
	rec := cfg.Audit
	if rec == nil {
		rec = audit.Discard{}
	}
	return &Service{store: store, guardrails: guardrails, forge: cfg.Forge, publicURL: strings.TrimSuffix(cfg.PublicURL, "/"),
		audit: rec, log: log, now: now}
}

// Resolve turns a repository address into a repository on the
// deployment's forge that the guardrails of org and project allow (SPEC
// S9).
func (s *Service) Resolve(ctx context.Context, org, project, addr string) (forge.Repo, error) {
	if s.forge == nil {
		return forge.Repo{}, fault.Errorf(fault.Unavailable, "repository %s asked for, but this deployment has no git forge (BERTH_SANDBOX_GIT_FORGE is unset)", addr)
	}
	r, err := forge.Parse(addr, s.forge.Host())
	if err != nil {
		return forge.Repo{}, invalid("%v", err)
	}
	if err := s.checkAllowed(ctx, org, project, r); err != nil {
		return forge.Repo{}, err
	}
	// A forge that can tell at once whether it has the repository (the
	// local one) refuses a missing one here rather than in the sandbox.
	if l, ok := s.forge.(interface {
		Path(forge.Repo) (string, error)
	}); ok {
		if _, err := l.Path(r); err != nil {
			return forge.Repo{}, invalid("%v (berth repo list shows the local forge's repositories)", err)
		}
	}
	return r, nil
}

// invalid is a refusal of the create request's repo field.
func invalid(format string, args ...any) error {
	return fault.Field("repo", format, args...)
}

// Allowed refuses sb's repository when the guardrails no longer allow it
// (a resume is checked as a create is).
func (s *Service) Allowed(ctx context.Context, sb sandbox.Sandbox) error {
	return s.checkAllowed(ctx, sb.Org, sb.Project, s.repoOf(sb))
}

// checkAllowed refuses a repository the guardrails do not allow (SPEC S9:
// checked at creation, at every token refresh and every git request).
func (s *Service) checkAllowed(ctx context.Context, org, project string, r forge.Repo) error {
	g, err := s.guardrails.EffectiveGuardrail(ctx, org, project)
	if err != nil {
		return err
	}
	if !g.AllowsRepo(r.Path) {
		return fault.Errorf(fault.Forbidden, "repository %s is not in the allowed_repos of this project and organisation (an operator sets the organisation's list)", r)
	}
	return nil
}

// repoOf names a sandbox's repository on the forge.
func (s *Service) repoOf(sb sandbox.Sandbox) forge.Repo {
	host := ""
	if s.forge != nil {
		host = s.forge.Host()
	}
	return forge.Repo{Host: host, Path: strings.TrimPrefix(sb.Repo, host+"/")}
}

// cloneURL is the address the sandbox clones from: the gateway's git
// endpoint, or in token mode the forge.
func (s *Service) cloneURL(sb sandbox.Sandbox) string {
	r := s.repoOf(sb)
	if sb.GitMode == sandbox.GitToken {
		return s.forge.CloneURL(r)
	}
	return s.publicURL + "/git/" + r.Path + ".git"
}

// Env is the repository part of a sandbox's environment (SPEC S15), with
// t when the sandbox holds a token.
func (s *Service) Env(sb sandbox.Sandbox, t forge.Token) map[string]string {
	if sb.Repo == "" {
		return nil
	}
	env := map[string]string{
		"BERTH_REPO":               s.cloneURL(sb),
		"BERTH_GIT_MODE":           string(sb.GitMode),
		"BERTH_GIT_CREDENTIAL_URL": s.publicURL + "/sandbox/v1/git-credential",
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

// record writes one audit event; a failure is logged, never the caller's.
func (s *Service) record(ctx context.Context, e audit.Event) {
	audit.Record(ctx, s.audit, s.log, s.now, e)
}

package sandbox

import (
	"context"
	"errors"
	"fmt"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/secret"
)

// Warm is the port warm pools (SPEC S12) are played through, one floor up
// (package warm): whether a new sandbox is a pool's, the one-time token its
// machine trades for its environment (Claimed), and the pools kept in
// step with the classes by the sweep's leader.
type Warm interface {
	Pooled(c class.Class, p Purpose) bool
	Issue(ctx context.Context, sb Sandbox) (secret.Secret, error)
	Tick(ctx context.Context)
}

// SetWarm takes engineer sandboxes of warm classes from w's pools; without
// it none is a pool's. Call it before Run.
func (s *Service) SetWarm(w Warm) { s.warm = w }

func (s *Service) pooled(c class.Class, p Purpose) bool { return s.warm != nil && s.warm.Pooled(c, p) }

func (s *Service) issueBootstrap(ctx context.Context, sb Sandbox) (secret.Secret, error) {
	if s.warm == nil {
		return secret.Secret{}, fault.Errorf(fault.Unavailable, "sandbox %s is a warm pool's and this gateway keeps no pools", sb.Name)
	}
	return s.warm.Issue(ctx, sb)
}

// Claimed is the environment of sandbox id, whose pool machine traded
// its one-time token (package warm), once: the sandbox's key is replaced
// by a fresh one whose secret only this answer carries, and a token-mode
// sandbox gets its repository token now. Only while starting or running.
func (s *Service) Claimed(ctx context.Context, id ID) (map[string]string, error) {
	now := s.now()
	var env map[string]string
	_, err := retryMoved(func() (Sandbox, error) {
		sb, err := s.store.GetSandbox(ctx, id)
		if err != nil {
			return Sandbox{}, err
		}
		if sb.State != StateStarting && sb.State != StateRunning {
			s.record(ctx, audit.Event{At: now, Org: sb.Org, Sandbox: string(sb.ID), Action: audit.CredentialIssue, Target: "environment",
				Outcome: audit.Refused, Detail: "bootstrap token used while the sandbox is " + string(sb.State)})
			return Sandbox{}, fault.Errorf(fault.Unauthenticated, "sandbox %s is %s", sb.Name, sb.State)
		}
		key, secret := account.NewSandboxKey(sb.Owner, string(sb.ID), sb.Project, sb.ExpiresAt, now)
		next := sb
		next.KeyID = key.ID
		var tok forge.Token
		if next.GitMode == GitToken {
			if tok, err = s.cfg.Repositories.Mint(ctx, next, ""); err != nil {
				return Sandbox{}, fmt.Errorf("repository %s: %w", next.Repo, err)
			}
		}
		if env, err = s.environment(ctx, next, secret, tok); err != nil {
			return Sandbox{}, err
		}
		// Not s.write: the state stays, only the key changes; its events
		// are committed with it.
		u := Update{Sandbox: next, From: sb.State, At: now, NewKey: &key}
		for _, e := range []audit.Event{
			{Action: audit.KeyRevoke, Target: sb.KeyID, Detail: "the key of sandbox " + sb.Name + ", replaced at bootstrap"},
			{Action: audit.KeyCreate, Target: key.ID, Detail: "the key of sandbox " + sb.Name},
			{Action: audit.CredentialIssue, Target: "environment", Detail: "fetched with its bootstrap token"},
		} {
			e.At, e.Org, e.Sandbox = now, sb.Org, string(sb.ID)
			u.Audit = append(u.Audit, e)
		}
		if err := s.store.UpdateSandbox(ctx, u); err != nil {
			if errors.Is(err, fault.Conflict) {
				return Sandbox{}, fmt.Errorf("%w: %w", errMoved, err)
			}
			return Sandbox{}, err
		}
		return next, nil
	})
	if err != nil {
		return nil, err
	}
	return env, nil
}

package sandbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/secret"
)

// Warm pools (SPEC S12): engineer sandboxes of a class with warm > 0 come
// from the class's pool when the operator turned pools on
// (BERTH_SANDBOX_WARM) and the driver keeps them (Pools). A pool's
// machines are made before anybody asks, so nothing of a sandbox's own can
// be in them: each gets a one-time bootstrap token instead, and trades it
// at the gateway for its environment once claimed (Bootstrap).

// BootstrapTTL is how long a bootstrap token may wait to be used: a cold
// start from the pool's template (an image pull) fits in it.
const BootstrapTTL = 15 * time.Minute

// WarmClass is a class with a warm pool, and its organisation.
type WarmClass struct {
	Org   string
	Class class.Class
}

// BootstrapToken is a one-time token as the store keeps it: the SHA-256
// of its secret, never the secret.
type BootstrapToken struct {
	Hash      string
	Sandbox   ID
	CreatedAt time.Time
	ExpiresAt time.Time
}

// pooled reports whether a new sandbox of class for purpose comes from
// the class's warm pool.
func (s *Service) pooled(c class.Class, p Purpose) bool {
	_, ok := s.driver.(Pools)
	return ok && s.cfg.Warm && p == PurposeEngineer && c.Warm > 0
}

// issueBootstrap mints a one-time token for sb's machine to fetch its
// environment with, and records it as a credential issued.
func (s *Service) issueBootstrap(ctx context.Context, sb Sandbox) (secret.Secret, error) {
	value := "bst_" + rand.Text()
	now := s.now()
	t := BootstrapToken{Hash: hashToken(value), Sandbox: sb.ID, CreatedAt: now, ExpiresAt: now.Add(BootstrapTTL)}
	e := audit.Event{At: now, Org: sb.Org, Sandbox: string(sb.ID), Action: audit.CredentialIssue, Target: "bootstrap token",
		Detail: "one-time, for the warm pool machine to fetch its environment, until " + stamp(t.ExpiresAt)}
	if err := s.store.AddBootstrap(ctx, t, e); err != nil {
		return secret.Secret{}, fmt.Errorf("bootstrap token: %w", err)
	}
	return secret.New(value), nil
}

func hashToken(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// Bootstrap trades a one-time token for the environment of the sandbox it
// was issued to (SPEC S12, S15), once. The sandbox's key is replaced by a
// fresh one whose secret only this answer carries, so no secret waits in
// the database or in the pool's machine; a token-mode sandbox gets its
// repository token now too. An unknown, used or expired token is
// unauthenticated.
func (s *Service) Bootstrap(ctx context.Context, token string) (map[string]string, error) {
	env, err := s.bootstrap(ctx, strings.TrimSpace(token))
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	return env, nil
}

func (s *Service) bootstrap(ctx context.Context, token string) (map[string]string, error) {
	if !strings.HasPrefix(token, "bst_") {
		return nil, fault.Errorf(fault.Unauthenticated, "not a bootstrap token")
	}
	now := s.now()
	id, err := s.store.UseBootstrap(ctx, hashToken(token), now)
	if errors.Is(err, fault.NotFound) {
		return nil, fault.Errorf(fault.Unauthenticated, "the token is unknown, used or expired")
	}
	if err != nil {
		return nil, err
	}
	var env map[string]string
	_, err = retryMoved(func() (Sandbox, error) {
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

// SyncPools makes the driver's warm pools those of every class with warm >
// 0 that engineers may use, in every organisation, when pools are on; with
// pools off it deletes them all (SPEC S12). A class whose tier has no
// runtime gets no pool: its sandboxes cannot start.
func (s *Service) SyncPools(ctx context.Context) error {
	d, ok := s.driver.(Pools)
	if !ok {
		return nil
	}
	// One sync at a time: one that read the classes before a change must
	// not undo the sync of the change.
	s.poolsMu.Lock()
	defer s.poolsMu.Unlock()
	var pools []Pool
	if s.cfg.Warm {
		classes, err := s.store.ListWarmClasses(ctx)
		if err != nil {
			return fmt.Errorf("sync warm pools: %w", err)
		}
		for _, wc := range classes {
			rt, err := s.runtime(wc.Class)
			if err != nil || wc.Class.Warm == 0 || !wc.Class.Allows(PurposeEngineer) {
				continue
			}
			pools = append(pools, Pool{Org: wc.Org, Class: wc.Class, Runtime: rt})
		}
	}
	if err := d.SyncPools(ctx, pools); err != nil {
		return fmt.Errorf("sync warm pools: driver: %w", err)
	}
	return nil
}

// syncPoolsAndLog syncs the pools, logging a failure: the next sweep tries
// again.
func (s *Service) syncPoolsAndLog(ctx context.Context) {
	if err := s.SyncPools(ctx); err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "warm pools not in step with the classes", "err", err)
	}
}

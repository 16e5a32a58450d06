// Package warm is warm pools (SPEC S12), one floor above sandbox (whose
// Warm port it is): engineer sandboxes of a class with warm > 0 come from
// the class's pool when the operator turned pools on (BERTH_SANDBOX_WARM)
// and the driver keeps them (Pools). A pool's machines are made before
// anybody asks, so nothing of a sandbox's own can be in them: each gets a
// one-time bootstrap token instead, and trades it at the gateway for its
// environment once claimed (Bootstrap). The claimed sandbox's new key is
// written by the sandbox service (Claimed), like every change of a row.
package warm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/secret"
)

// BootstrapTTL is how long a bootstrap token may wait to be used: a cold
// start from the pool's template (an image pull) fits in it.
const BootstrapTTL = 15 * time.Minute

// Class is a class with a warm pool, and its organisation.
type Class struct {
	Org   string
	Class class.Class
}

// Token is a one-time bootstrap token as the store keeps it: the SHA-256
// of its secret, never the secret.
type Token struct {
	Hash      string
	Sandbox   sandbox.ID
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Pool is one class's warm pool (SPEC S12): Size ready machines of the
// class, made before anybody asks, for an organisation's engineers.
type Pool struct {
	Org   string
	Class class.Class
	// Runtime is the runtime the class's tier maps to ("" the driver's
	// default), as a sandbox of the class would get.
	Runtime string
}

// Pools is the capability of a driver that keeps warm pools (podman, its
// own; Kubernetes, with agent-sandbox's extensions). A sandbox whose Spec carries a
// Bootstrap token is taken from its class's pool.
type Pools interface {
	// SyncPools makes the driver's pools exactly pools, one per
	// organisation and class, deleting every other pool of the deployment:
	// an empty list deletes them all.
	SyncPools(ctx context.Context, pools []Pool) error
}

// Store is where the warm classes are read and the bootstrap tokens kept.
type Store interface {
	// ListWarmClasses returns every organisation's classes with warm > 0.
	ListWarmClasses(ctx context.Context) ([]Class, error)
	// AddBootstrap keeps a one-time bootstrap token's hash, and records
	// events with its write; UseBootstrap marks the token of hash used at
	// at and returns its sandbox, once: fault.NotFound for a token
	// unknown, used or expired.
	AddBootstrap(ctx context.Context, t Token, events ...audit.Event) error
	UseBootstrap(ctx context.Context, hash string, at time.Time) (sandbox.ID, error)
}

// Sandboxes is what warm pools need of the sandbox service: a claimed
// sandbox's environment, with the key replaced through its write path.
type Sandboxes interface {
	Claimed(ctx context.Context, id sandbox.ID) (map[string]string, error)
}

// Config is the warm pools' part of the deployment.
type Config struct {
	// On turns warm pools on (BERTH_SANDBOX_WARM): engineer sandboxes of a
	// class with warm > 0 come from its pool when the driver keeps pools.
	// Off, every pool is deleted.
	On bool
	// Runtimes maps each tier the deployment offers to a runtime (the
	// sandbox service's): a class of another tier gets no pool.
	Runtimes map[sandbox.Tier]string
}

// Service is warm pools: sandbox's Warm, class's Pools, and the gateway's
// bootstrap route.
type Service struct {
	store     Store
	sandboxes Sandboxes
	pools     Pools // nil: the driver keeps none
	cfg       Config
	log       *slog.Logger
	now       func() time.Time
	mu        sync.Mutex // serialises SyncPools
}

// NewService returns the warm pools of a deployment whose driver keeps
// pools (nil: it keeps none, and no sandbox is a pool's).
func NewService(store Store, sandboxes Sandboxes, pools Pools, cfg Config, log *slog.Logger, now func() time.Time) *Service {
	return &Service{store: store, sandboxes: sandboxes, pools: pools, cfg: cfg, log: log, now: now}
}

// Pooled is sandbox.Warm's: whether a new sandbox of class for purpose
// comes from the class's warm pool.
func (s *Service) Pooled(c class.Class, p sandbox.Purpose) bool {
	return s.pools != nil && s.cfg.On && p == sandbox.PurposeEngineer && c.Warm > 0
}

// Issue is sandbox.Warm's: it mints a one-time token for sb's machine to
// fetch its environment with, and records it as a credential issued.
func (s *Service) Issue(ctx context.Context, sb sandbox.Sandbox) (secret.Secret, error) {
	value := "bst_" + rand.Text()
	now := s.now()
	t := Token{Hash: hashToken(value), Sandbox: sb.ID, CreatedAt: now, ExpiresAt: now.Add(BootstrapTTL)}
	e := audit.Event{At: now, Org: sb.Org, Sandbox: string(sb.ID), Action: audit.CredentialIssue, Target: "bootstrap token",
		Detail: "one-time, for the warm pool machine to fetch its environment, until " + t.ExpiresAt.UTC().Format(time.RFC3339)}
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
	id, err := s.store.UseBootstrap(ctx, hashToken(token), s.now())
	if errors.Is(err, fault.NotFound) {
		return nil, fault.Errorf(fault.Unauthenticated, "the token is unknown, used or expired")
	}
	if err != nil {
		return nil, err
	}
	return s.sandboxes.Claimed(ctx, id)
}

// SyncPools makes the driver's warm pools those of every class with warm >
// 0 that engineers may use, in every organisation, when pools are on; with
// pools off it deletes them all (SPEC S12). A class whose tier has no
// runtime gets no pool: its sandboxes cannot start.
func (s *Service) SyncPools(ctx context.Context) error {
	if s.pools == nil {
		return nil
	}
	// One sync at a time: one that read the classes before a change must
	// not undo the sync of the change.
	s.mu.Lock()
	defer s.mu.Unlock()
	var pools []Pool
	if s.cfg.On {
		classes, err := s.store.ListWarmClasses(ctx)
		if err != nil {
			return fmt.Errorf("sync warm pools: %w", err)
		}
		for _, wc := range classes {
			rt, ok := s.cfg.Runtimes[wc.Class.Isolation]
			if !ok || wc.Class.Warm == 0 || !wc.Class.Allows(sandbox.PurposeEngineer) {
				continue
			}
			pools = append(pools, Pool{Org: wc.Org, Class: wc.Class, Runtime: rt})
		}
	}
	if err := s.pools.SyncPools(ctx, pools); err != nil {
		return fmt.Errorf("sync warm pools: driver: %w", err)
	}
	return nil
}

// Tick is sandbox.Warm's, called by the sweep's leader each tick: the
// pools synced, a failure logged (the next tick tries again). With pools
// off, the first deletes every pool; later ones catch classes another
// replica changed.
func (s *Service) Tick(ctx context.Context) {
	if err := s.SyncPools(ctx); err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "warm pools not in step with the classes", "err", err)
	}
}

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/quantity"
)

// Suspend stops an engineer sandbox's machine and keeps its volume.
func (s *Service) Suspend(ctx context.Context, p account.Principal, ref string) (Sandbox, error) {
	sb, err := retryMoved(func() (Sandbox, error) { return s.suspend(ctx, p, ref) })
	if err != nil {
		return Sandbox{}, fmt.Errorf("suspend sandbox %s: %w", ref, err)
	}
	return sb, nil
}

func (s *Service) suspend(ctx context.Context, p account.Principal, ref string) (Sandbox, error) {
	sb, err := s.manageable(ctx, p, ref)
	if err != nil {
		return Sandbox{}, err
	}
	if sb.Purpose == PurposeAgent {
		return Sandbox{}, fault.Errorf(fault.Conflict, "an agent sandbox runs its task to the end; it cannot be suspended")
	}
	if sb.State != StateRunning {
		return Sandbox{}, fault.Errorf(fault.Conflict, "sandbox %s is %s; only a running sandbox can be suspended", sb.Name, sb.State)
	}
	next, err := sb.Transition(StateSuspended)
	if err != nil {
		return Sandbox{}, err
	}
	// The row first, then the machine, as end does: stopping the machine
	// first let the sweep see it exit 0 mid-stop, suspend it as "exited by
	// itself", and answer the caller's own suspend with a conflict. The
	// clock stops when the caller asks; a machine still running under a
	// suspended row is stopped by the sweep.
	out, err := s.write(ctx, p.User.ID, sb, Update{Sandbox: next, From: sb.State, At: s.clamp(sb)})
	if err != nil {
		return Sandbox{}, err
	}
	return s.stopSuspended(ctx, p.User.ID, out), nil
}

// Resume starts a suspended or expired engineer sandbox again. After expiry
// it gets a new key, the class's default lifetime under the guardrails as
// they are now, and loses the environment its caller added (SPEC S3).
func (s *Service) Resume(ctx context.Context, p account.Principal, ref string) (Sandbox, error) {
	sb, err := retryMoved(func() (Sandbox, error) { return s.resume(ctx, p, ref) })
	if err != nil {
		return Sandbox{}, fmt.Errorf("resume sandbox %s: %w", ref, err)
	}
	return sb, nil
}

func (s *Service) resume(ctx context.Context, p account.Principal, ref string) (Sandbox, error) {
	sb, err := s.manageable(ctx, p, ref)
	if err != nil {
		return Sandbox{}, err
	}
	if sb.Purpose == PurposeAgent && sb.Session {
		return Sandbox{}, fault.Errorf(fault.Conflict, "sandbox %s is a session: it resumes with its next task (berth sandbox task %s)", sb.Name, sb.Name)
	}
	if sb.Purpose == PurposeAgent {
		return Sandbox{}, fault.Errorf(fault.Conflict, "an agent sandbox cannot be resumed")
	}
	if sb.State != StateSuspended && sb.State != StateExpired {
		return Sandbox{}, fault.Errorf(fault.Conflict, "sandbox %s is %s; only a suspended or expired sandbox can be resumed", sb.Name, sb.State)
	}
	next, err := sb.Transition(StateStarting)
	if err != nil {
		return Sandbox{}, err
	}
	next.Reason = ""
	u := Update{Sandbox: next, From: sb.State, At: s.now()}
	spec := Spec{Sandbox: next}
	// A suspended sandbox whose lifetime ran out before the sweep noticed
	// has expired all the same: its key has, and a start on the old
	// lifetime would run (and be charged) past its expiry (SPEC S8).
	if sb.State == StateExpired || s.pastExpiry(sb) {
		def, max := s.classLifetimes(ctx, sb)
		g, err := s.accounts.EffectiveGuardrail(ctx, sb.Org, sb.Project)
		if err != nil {
			return Sandbox{}, err
		}
		if err := g.CheckSize(sb.CPU, sb.Memory); err != nil {
			return Sandbox{}, err
		}
		ttl, _, _ := s.lifetime("", def, max, g)
		now := s.now()
		next.ExpiresAt = now.Add(ttl)
		next.Env = nil
		next.Checkpoint = 0 // its memory holds the old key: it starts afresh
		key, secret := account.NewSandboxKey(sb.Owner, string(sb.ID), sb.Project, next.ExpiresAt, now)
		next.KeyID = key.ID
		u.Sandbox, u.NewKey = next, &key
		// A new repository credential too, under allowed_repos as it is now.
		var token forge.Token
		if next.Repo != "" {
			if err := s.cfg.Repositories.Allowed(ctx, next); err != nil {
				return Sandbox{}, err
			}
			if next.GitMode == GitToken && !next.FromPool {
				if token, err = s.cfg.Repositories.Mint(ctx, next, p.User.ID); err != nil {
					return Sandbox{}, fmt.Errorf("repository %s: %w", next.Repo, err)
				}
			}
		}
		spec = Spec{Sandbox: next, Replace: true}
		if !next.FromPool { // a pool's machine fetches it (Bootstrap)
			if spec.Env, err = s.environment(ctx, next, secret, token); err != nil {
				return Sandbox{}, err
			}
		}
	}
	s.claim(ctx, sb.ID) // as at create: no sweep may start it a second time
	out, err := s.write(ctx, p.User.ID, sb, u)
	if err != nil {
		s.done(sb.ID)
		return Sandbox{}, err
	}
	if sb.FromPool {
		// A new pod of a pool's sandbox fetches its environment again.
		if spec.Bootstrap, err = s.issueBootstrap(ctx, out); err != nil {
			s.done(sb.ID)
			s.fail(ctx, sb.ID, err.Error())
			return Sandbox{}, err
		}
	}
	s.enqueue(ctx, spec)
	return out, nil
}

// Extend sets a new lifetime counted from now, under the same ceilings as at
// creation (SPEC S3). It is refused while the sandbox is expired. The new
// expiry may be sooner than the old one; ExtendWith can refuse that.
func (s *Service) Extend(ctx context.Context, p account.Principal, ref, ttl string) (Sandbox, error) {
	return s.ExtendWith(ctx, p, ref, ExtendOptions{TTL: ttl})
}

// ExtendOptions are an extend's: the new lifetime from now ("" for the
// class's default) and whether a lifetime that ends sooner than the
// sandbox's current one is refused rather than applied.
type ExtendOptions struct {
	TTL       string
	NoShorten bool
}

// ExtendWith is Extend with its options. The sandbox it returns says in
// LifetimeCut when the lifetime asked for was cut, and to what.
func (s *Service) ExtendWith(ctx context.Context, p account.Principal, ref string, opt ExtendOptions) (Sandbox, error) {
	sb, err := retryMoved(func() (Sandbox, error) { return s.extend(ctx, p, ref, opt) })
	if err != nil {
		return Sandbox{}, fmt.Errorf("extend sandbox %s: %w", ref, err)
	}
	return sb, nil
}

// PlanExtend says when Extend with ttl would make the sandbox expire if
// called now, and how its lifetime would be cut ("" for not), changing
// nothing, so a caller can warn before it shortens a sandbox. It refuses
// what Extend would.
func (s *Service) PlanExtend(ctx context.Context, p account.Principal, ref, ttl string) (Sandbox, time.Time, string, error) {
	sb, d, cut, err := s.extension(ctx, p, ref, ttl)
	if err != nil {
		return Sandbox{}, time.Time{}, "", fmt.Errorf("extend sandbox %s: %w", ref, err)
	}
	return sb, s.now().Add(d), cut, nil
}

func (s *Service) extend(ctx context.Context, p account.Principal, ref string, opt ExtendOptions) (Sandbox, error) {
	sb, d, cut, err := s.extension(ctx, p, ref, opt.TTL)
	if err != nil {
		return Sandbox{}, err
	}
	next := sb
	next.ExpiresAt = s.now().Add(d)
	if opt.NoShorten && next.ExpiresAt.Before(sb.ExpiresAt) {
		left := sb.ExpiresAt.Sub(s.now()).Round(time.Minute)
		msg := fmt.Sprintf("sandbox %s expires in %s; a lifetime of %s from now would shorten it", sb.Name, quantity.FormatDuration(left), quantity.FormatDuration(d))
		if cut != "" {
			msg += " (" + cut + ")"
		}
		return Sandbox{}, fault.Errorf(fault.Conflict, "%s: nothing changed (berth sandbox extend --shorten shortens it)", msg)
	}
	out, err := s.write(ctx, p.User.ID, sb, Update{Sandbox: next, From: sb.State, At: s.now()})
	if err != nil {
		return Sandbox{}, err
	}
	out.LifetimeCut = cut
	if e, ok := s.driver.(Expirer); ok {
		// The cluster enforces the expiry itself (SPEC S11): move it too.
		if err := e.SetExpiry(ctx, sb.ID, next.ExpiresAt); err != nil && !errors.Is(err, fault.NotFound) {
			return Sandbox{}, fmt.Errorf("driver: %w", err)
		}
	}
	return out, nil
}

// extension checks that p may extend the sandbox ref now and returns it
// with the lifetime ttl gives it from now, cut to its ceilings, and how it
// was cut ("" for not).
func (s *Service) extension(ctx context.Context, p account.Principal, ref, ttl string) (Sandbox, time.Duration, string, error) {
	sb, err := s.manageable(ctx, p, ref)
	if err != nil {
		return Sandbox{}, 0, "", err
	}
	switch sb.State {
	case StateStarting, StateRunning, StateSuspended:
		// Past its expiry a sandbox has expired even before the sweep
		// says so: extending it then would charge the time in between,
		// which S8 never charges.
		if s.pastExpiry(sb) {
			return Sandbox{}, 0, "", expiredError(sb)
		}
	case StateExpired:
		return Sandbox{}, 0, "", expiredError(sb)
	default:
		return Sandbox{}, 0, "", fault.Errorf(fault.Conflict, "sandbox %s is %s", sb.Name, sb.State)
	}
	def, max := s.classLifetimes(ctx, sb)
	g, err := s.accounts.EffectiveGuardrail(ctx, sb.Org, sb.Project)
	if err != nil {
		return Sandbox{}, 0, "", err
	}
	d, cut, err := s.lifetime(ttl, def, max, g)
	if err != nil {
		return Sandbox{}, 0, "", err
	}
	return sb, d, cut, nil
}

// Terminate ends a sandbox for good: its key is revoked at once, then its
// machine and volume are removed. Should the driver fail, the row still says
// terminated and the sweep's reconciler removes the stray machine.
// Terminating a sandbox that is already terminated succeeds and changes
// nothing (no write, no audit event): it comes back as it is, as deleting
// what is gone does with kubectl's --ignore-not-found, so a script may end
// a sandbox without looking first.
func (s *Service) Terminate(ctx context.Context, p account.Principal, ref string) (Sandbox, error) {
	out, err := retryMoved(func() (Sandbox, error) {
		sb, err := s.manageable(ctx, p, ref)
		if err != nil {
			return Sandbox{}, err
		}
		if sb.State == StateTerminated {
			return sb, nil
		}
		return s.end(ctx, p.User.ID, sb, StateTerminated, "terminated by "+p.User.Name)
	})
	if err != nil {
		return Sandbox{}, fmt.Errorf("terminate sandbox %s: %w", ref, err)
	}
	return out, nil
}

// end moves sb to a final or expired state, revoking its key first. actor
// is the user who asked, "" when berth itself ends it (the sweep).
// terminated and a failed agent remove the machine and volume; expired and
// a failed engineer sandbox keep the volume, unless it failed before it
// ever ran.
func (s *Service) end(ctx context.Context, actor string, sb Sandbox, to State, reason string) (Sandbox, error) {
	return s.endAt(ctx, actor, sb, to, reason, time.Time{})
}

// endAt is end for a sandbox whose machine stopped by itself at exited,
// as its runtime says (zero: not known): its running time ends there
// (stoppedAt).
func (s *Service) endAt(ctx context.Context, actor string, sb Sandbox, to State, reason string, exited time.Time) (Sandbox, error) {
	next, err := sb.Transition(to)
	if err != nil {
		return Sandbox{}, err
	}
	next.Reason = reason
	next.Checkpoint = 0 // the driver's stop or removal drops it
	if !next.Live() {
		next.EndedAt = s.now()
	}
	out, err := s.write(ctx, actor, sb, Update{Sandbox: next, From: sb.State, At: s.stoppedAt(sb, exited), RevokeKey: true})
	if err != nil {
		return Sandbox{}, err
	}
	if s.cfg.Repositories != nil {
		s.cfg.Repositories.Revoke(ctx, sb, "")
	}
	if s.agentRun(sb) && !next.Live() {
		// The run's record first: removing the machine ends its follower,
		// which must find the run closed, and by whom.
		s.runs.Ended(ctx, sb, to, actor, reason)
	}
	if s.driver == nil {
		return out, nil
	}
	if !next.Live() {
		// Gone for good, or failed before it ever ran: its volume holds
		// nothing worth keeping (Sandbox.HoldsVolume).
		err = s.driver.Remove(ctx, sb.ID)
	} else if err = s.driver.Stop(ctx, sb.ID); errors.Is(err, fault.NotFound) {
		err = nil
	}
	if err != nil {
		// The row is right; the reconciler will finish the job.
		s.log.WarnContext(ctx, "driver could not release a sandbox's machine", "sandbox", sb.ID, "state", to, "err", err)
	}
	if !next.Live() && s.activity != nil {
		s.activity.Forget(sb.ID)
	}
	if s.agentRun(sb) && !next.Live() {
		// The task never outlives its sandbox, nor does its checkout.
		s.runs.Removed(ctx, sb)
	}
	return out, nil
}

// manageable resolves ref and checks the caller may act on it (SPEC S6).
// A sandbox the caller may see may also be managed, so only "not found"
// comes back for others.
func (s *Service) manageable(ctx context.Context, p account.Principal, ref string) (Sandbox, error) {
	sb, err := s.resolve(ctx, p, ref)
	if err != nil {
		return Sandbox{}, err
	}
	if !p.CanManage(sb.Org, sb.Owner) {
		return Sandbox{}, fault.NotFound
	}
	if s.driver == nil {
		return Sandbox{}, fault.Errorf(fault.Unavailable, "this deployment runs no sandboxes (BERTH_SANDBOX_DRIVER is unset)")
	}
	return sb, nil
}

// classLifetimes returns the lifetimes of sb's class, or 4h/24h when the
// class is gone (SPEC S4).
func (s *Service) classLifetimes(ctx context.Context, sb Sandbox) (def, max time.Duration) {
	c, err := s.store.GetClass(ctx, sb.Org, sb.Class)
	if err != nil {
		return class.DefaultTTL, class.DefaultMaxTTL
	}
	return c.DefaultTTL, c.MaxTTL
}

// clamp is when a running segment of sb closes if it stops now: now, but
// never past its expiry (SPEC S8).
func (s *Service) clamp(sb Sandbox) time.Time {
	now := s.now()
	if !sb.ExpiresAt.IsZero() && sb.ExpiresAt.Before(now) {
		return sb.ExpiresAt
	}
	return now
}

// stoppedAt is sb.StoppedAt now: when its running segment closes for a
// machine that stopped by itself at exited.
func (s *Service) stoppedAt(sb Sandbox, exited time.Time) time.Time {
	return sb.StoppedAt(exited, s.now())
}

func expiredError(sb Sandbox) error {
	return fault.Errorf(fault.Conflict, "sandbox %s has expired; resume it first, then extend it", sb.Name)
}

// pastExpiry reports whether sb's lifetime has run out, whether or not the
// sweep has noticed yet.
func (s *Service) pastExpiry(sb Sandbox) bool {
	return !sb.ExpiresAt.IsZero() && !s.now().Before(sb.ExpiresAt)
}

// errMoved says the row changed state between reading and writing it, as
// when a start finishes while its owner suspends it. The operation is
// worth trying again on the row as it is now.
var errMoved = errors.New("the sandbox changed state meanwhile")

// retryMoved runs op again, a few times, while it fails with errMoved.
func retryMoved(op func() (Sandbox, error)) (Sandbox, error) {
	for range 4 {
		sb, err := op()
		if !errors.Is(err, errMoved) {
			return sb, err
		}
	}
	return op()
}

// write stores an update of prev and returns the row as read back. It is
// the one path every state change takes, so it is where each is logged and
// recorded in the audit log, as done by actor ("" for berth itself).
func (s *Service) write(ctx context.Context, actor string, prev Sandbox, u Update) (Sandbox, error) {
	u.Audit = append(s.writeEvents(actor, prev, u), u.Audit...) // and what the caller adds
	if err := s.store.UpdateSandbox(ctx, u); err != nil {
		if errors.Is(err, fault.Conflict) {
			return Sandbox{}, fmt.Errorf("%w: %w", errMoved, err)
		}
		return Sandbox{}, err
	}
	if u.From != u.Sandbox.State {
		s.log.InfoContext(ctx, "sandbox state changed", "sandbox", u.Sandbox.ID, "from", u.From, "to", u.Sandbox.State,
			"reason", u.Sandbox.Reason, "user", actor)
	} else {
		s.log.InfoContext(ctx, "sandbox changed", "sandbox", u.Sandbox.ID, "state", u.From, "new_key", u.NewKey != nil, "user", actor)
	}
	return s.store.GetSandbox(ctx, u.Sandbox.ID)
}

// EndOwner ends what a disabled user's sandboxes may do (SPEC S9): agent
// sandboxes are terminated; engineer sandboxes expire (stopped, key and
// repository credentials revoked, volume kept), so their work survives
// until somebody terminates them. The caller has authorised p to disable
// the user.
func (s *Service) EndOwner(ctx context.Context, p account.Principal, owner string) (int, error) {
	return s.EndOwnerBecause(ctx, p.User.ID, "its owner was disabled by "+p.User.Name, owner)
}

// EndOwnerBecause is EndOwner for whoever actor is ("" for berth itself,
// as when the identity provider ends a person's access), giving why as
// each sandbox's reason.
func (s *Service) EndOwnerBecause(ctx context.Context, actor, why, owner string) (int, error) {
	sbs, err := s.store.ListSandboxes(ctx, Filter{Owner: owner})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, sb := range sbs {
		to := StateExpired
		if sb.Purpose == PurposeAgent {
			to = StateTerminated
		}
		if !CanMove(sb.State, to) {
			if s.cfg.Repositories != nil {
				s.cfg.Repositories.Revoke(ctx, sb, "") // an expired or failed one: make sure
			}
			continue
		}
		if _, err := retryMoved(func() (Sandbox, error) {
			cur, err := s.store.GetSandbox(ctx, sb.ID)
			if err != nil {
				return Sandbox{}, err
			}
			return s.end(ctx, actor, cur, to, why)
		}); err != nil {
			return n, fmt.Errorf("end sandbox %s of a disabled owner: %w", sb.ID, err)
		}
		n++
	}
	return n, nil
}

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/quantity"
)

// Sessions (SPEC S13): an agent sandbox created with Session stays after
// each task. Its run over, it is suspended (EndTask): its machine stopped,
// its running time closed, its key and repository token revoked, its
// checkout, branch and agent state kept. NextTask gives it the next task:
// a fresh key and token, the task on its row, and a start that makes its
// machine anew on what it kept; the runs service records the start as
// the session's next run and has the CLI continue its conversation. A
// session ends as any sandbox does, terminated or at its expiry, or when
// it has waited for its next task longer than its class's session_idle
// (the sweep: idleSession).

// NextTask gives the session ref its next task, as p, and queues its
// start. Only the owner (or an operator) may: a task acts inside the
// sandbox, where an administrator never goes (SPEC S6). The session must
// be suspended between tasks: one whose task still runs is a conflict.
func (s *Service) NextTask(ctx context.Context, p account.Principal, ref, task string) (Sandbox, error) {
	sb, err := retryMoved(func() (Sandbox, error) { return s.nextTask(ctx, p, ref, task) })
	if err != nil {
		return Sandbox{}, fmt.Errorf("give sandbox %s a task: %w", ref, err)
	}
	return sb, nil
}

func (s *Service) nextTask(ctx context.Context, p account.Principal, ref, task string) (Sandbox, error) {
	if p.Sandbox != "" {
		return Sandbox{}, fault.Errorf(fault.Forbidden, "a sandbox's key cannot give tasks")
	}
	sb, err := s.manageable(ctx, p, ref)
	if err != nil {
		return Sandbox{}, err
	}
	if !p.CanShell(sb.Owner) {
		return Sandbox{}, fault.Errorf(fault.Forbidden, "only the owner of sandbox %s gives it tasks: a task runs inside it, where an administrator does not go", sb.Name)
	}
	if sb.Purpose != PurposeAgent || !sb.Session || !s.agentRun(sb) {
		return Sandbox{}, fault.Errorf(fault.Conflict, "sandbox %s is not a session: only an agent sandbox created with --session takes further tasks", sb.Name)
	}
	switch {
	case sb.State == StateStarting || sb.State == StateRunning:
		return Sandbox{}, fault.Errorf(fault.Conflict, "sandbox %s is still running its task; give the next one when it is over (berth sandbox show says so)", sb.Name)
	case sb.State != StateSuspended:
		return Sandbox{}, fault.Errorf(fault.Conflict, "sandbox %s is %s; a session takes tasks only while it lives", sb.Name, sb.State)
	case s.pastExpiry(sb):
		return Sandbox{}, expiredError(sb)
	}
	if err := checkTask(sb.Contract, task); err != nil {
		return Sandbox{}, err
	}
	next, err := sb.Transition(StateStarting)
	if err != nil {
		return Sandbox{}, err
	}
	next.Task, next.Reason = task, ""
	now := s.now()
	key, secret := account.NewSandboxKey(sb.Owner, string(sb.ID), sb.Project, sb.ExpiresAt, now)
	next.KeyID = key.ID
	// The repository under allowed_repos as it is now, and a fresh token.
	var token forge.Token
	if next.Repo != "" {
		if err := s.cfg.Repositories.Allowed(ctx, next); err != nil {
			return Sandbox{}, err
		}
		if next.GitMode == GitToken {
			if token, err = s.cfg.Repositories.Mint(ctx, next, p.User.ID); err != nil {
				return Sandbox{}, fmt.Errorf("repository %s: %w", next.Repo, err)
			}
		}
	}
	env, err := s.environment(ctx, next, secret, token)
	if err != nil {
		return Sandbox{}, err
	}
	given := audit.Event{At: now, Org: sb.Org, Actor: p.User.ID, Sandbox: string(sb.ID), Action: audit.SandboxTask, Target: sb.Name,
		Detail: fmt.Sprintf("the session's next task, %d bytes", len(task))}
	s.claim(ctx, sb.ID) // as at create: no sweep may start it a second time
	out, err := s.write(ctx, p.User.ID, sb, Update{Sandbox: next, From: StateSuspended, At: now, NewKey: &key, Audit: []audit.Event{given}})
	if err != nil {
		s.done(sb.ID)
		return Sandbox{}, err
	}
	// Made anew on what the session kept: the runs service prepares it as
	// the session's next run.
	s.enqueue(ctx, Spec{Sandbox: out, Env: env, Replace: true})
	return out, nil
}

// EndTask suspends a session whose task's run is over (the runs service
// decided how it went): its running time closed at exited (zero: now),
// its key and repository token revoked (the next task gets fresh ones),
// its machine stopped. A session that moved on meanwhile (terminated,
// expired) is left as it is.
func (s *Service) EndTask(ctx context.Context, id ID, reason string, exited time.Time) error {
	_, err := retryMoved(func() (Sandbox, error) {
		sb, err := s.store.GetSandbox(ctx, id)
		if err != nil {
			return Sandbox{}, err
		}
		if sb.State != StateRunning && sb.State != StateStarting {
			return sb, nil
		}
		next, err := sb.Transition(StateSuspended)
		if err != nil {
			return Sandbox{}, err
		}
		// No key while suspended: the revoked one is not named again when
		// the next task replaces it.
		next.Reason, next.KeyID = reason, ""
		out, err := s.write(ctx, "", sb, Update{Sandbox: next, From: sb.State, At: s.stoppedAt(sb, exited), RevokeKey: true})
		if err != nil {
			return Sandbox{}, err
		}
		if s.cfg.Repositories != nil {
			s.cfg.Repositories.Revoke(ctx, sb, "")
		}
		if err := s.driver.Stop(ctx, sb.ID); err != nil && !errors.Is(err, fault.NotFound) {
			s.log.WarnContext(ctx, "driver could not stop a session's machine", "sandbox", sb.ID, "err", err)
		}
		return out, nil
	})
	return err
}

// idleSession says why the sweep ends sb, a session waiting suspended
// for its next task longer than its class's session_idle, as of now; ""
// to keep it. It waits since its latest task's running time closed (its
// creation, if none ever ran). A class without session_idle, or deleted,
// ends nothing; one the store could not read ends nothing this sweep.
func (s sweeper) idleSession(ctx context.Context, sb Sandbox, now time.Time) string {
	if sb.Purpose != PurposeAgent || !sb.Session || sb.State != StateSuspended {
		return ""
	}
	c, err := s.store.GetClass(ctx, sb.Org, sb.Class)
	switch {
	case errors.Is(err, fault.NotFound):
		return ""
	case err != nil:
		s.log.WarnContext(ctx, "sweep could not read a session's class for its session_idle", "sandbox", sb.ID, "class", sb.Class, "err", err)
		return ""
	case c.SessionIdle <= 0:
		return ""
	}
	since := sb.CreatedAt
	if sb.LastRanUntil.After(since) {
		since = sb.LastRanUntil
	}
	idle := now.Sub(since)
	if idle < c.SessionIdle {
		return ""
	}
	return fmt.Sprintf("idle for %s, past its class's session_idle (%s)",
		quantity.FormatDuration(idle.Truncate(time.Minute)), quantity.FormatDuration(c.SessionIdle))
}

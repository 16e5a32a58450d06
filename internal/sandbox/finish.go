package sandbox

import (
	"context"
	"errors"
	"fmt"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
)

// A create that answered 201 is a promise: the sandbox starts (issue 15),
// whatever stops the gateway in between. Run's starts outlive a graceful
// stop (Shutdown waits for them), and a start that a crash, the end of
// that wait or a dead replica interrupted is finished by the next sweep
// (finishStart), as a controller reconciles an object it accepted.

// finishStart finishes a start the gateway that made it did not: its row
// says starting, nobody holds it, and its machine is not running. The row
// has all a start needs but its secrets, which are never stored: the key
// minted at create went with that gateway's memory (and whatever machine
// it half made), so the sandbox gets a fresh one, the old one revoked, in
// one write with their audit entries; in token mode a fresh repository
// token too, the old one revoked. Its machine is then made anew from that
// environment on its volume (Spec.Replace): whatever a killed podman half
// made, or a killed gateway's orphaned `podman run` makes meanwhile, is
// replaced. An error leaves the row as it was for the caller to fail.
func (s sweeper) finishStart(ctx context.Context, sb Sandbox) error {
	s.claim(ctx, sb.ID) // as at create: no sweep may take it meanwhile
	spec, err := s.finishSpec(ctx, sb)
	if err != nil {
		s.done(sb.ID)
		return err
	}
	s.log.InfoContext(ctx, "finishing a start the gateway's stop interrupted", "sandbox", sb.ID, "name", sb.Name)
	s.enqueue(ctx, spec)
	return nil
}

// finishSpec is the start of sb made again, with fresh credentials.
func (s sweeper) finishSpec(ctx context.Context, sb Sandbox) (Spec, error) {
	if sb.FromPool {
		// Its machine fetches its environment (and a fresh key) with a
		// one-time token; the old token may have gone unused.
		bt, err := s.issueBootstrap(ctx, sb)
		if err != nil {
			return Spec{}, err
		}
		return Spec{Sandbox: sb, Bootstrap: bt}, nil
	}
	now := s.now()
	key, secret := account.NewSandboxKey(sb.Owner, string(sb.ID), sb.Project, sb.ExpiresAt, now)
	next := sb
	next.KeyID = key.ID
	var token forge.Token
	if next.GitMode == GitToken {
		t, err := s.cfg.Repositories.Mint(ctx, next, "")
		if err != nil {
			return Spec{}, fmt.Errorf("no repository credential: %w", err)
		}
		token = t
	}
	env, err := s.environment(ctx, next, secret, token)
	if err != nil {
		return Spec{}, err
	}
	out, err := s.write(ctx, "", sb, Update{Sandbox: next, From: StateStarting, At: now, NewKey: &key})
	if err != nil {
		return Spec{}, err
	}
	if token.ID != "" {
		s.cfg.Repositories.Revoke(ctx, out, token.ID) // the old one went with the old start
	}
	return Spec{Sandbox: out, Env: env, Replace: true}, nil
}

// failUnfinished fails a start that could not be finished, saying why.
func (s sweeper) failUnfinished(ctx context.Context, sb Sandbox, cause error, res *SweepResult) error {
	if errors.Is(cause, fault.Conflict) {
		return cause // the row moved on meanwhile: nothing to finish
	}
	_, err := s.end(ctx, "", sb, StateFailed, "its start was interrupted and could not be finished: "+cause.Error())
	if err == nil {
		res.Failed = append(res.Failed, sb.ID)
	}
	return err
}

// Shutdown stops Run from taking new work, no sweep and no run followed
// again, and waits until every start queued or under way has ended, so a
// create accepted before a graceful stop is running (or failed for its
// own reason) when the gateway exits. Starts are not cancelled: should ctx
// end first, Shutdown returns its error, and the starts left are what a
// crash leaves, for the next start-up sweep to finish. Call it once the
// API takes no more creates; then cancel Run's context.
func (s *Service) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	for {
		s.mu.Lock()
		n, changed := len(s.inflight), s.settled
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%d starts still in flight: %w", n, ctx.Err())
		}
	}
}

// InFlight is how many starts are queued or under way.
func (s *Service) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight)
}

// startEnded tells Shutdown a start has ended. The caller holds mu.
func (s *Service) startEnded() {
	close(s.settled)
	s.settled = make(chan struct{})
}

// startReason is why a start failed, in berth's words first and the
// driver's (the runtime's) after them.
func startReason(err error) string {
	return "its machine did not start: " + err.Error()
}

package sandbox

import (
	"context"
	"errors"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
)

// A create (or a resume, or a start a restart interrupted) claims its
// sandbox and queues its start; Run takes each start off the queue and
// runs it to its end: running when the driver reports the machine ready,
// failed when it cannot start it.

// claim marks a sandbox's start as in flight, before its row says
// starting, so a sweep running meanwhile leaves it alone: this replica's
// sweep by its map, another replica's by its hold. enqueue (or done, if
// the start is abandoned) follows. Claiming a claimed sandbox changes
// nothing.
func (s *Service) claim(ctx context.Context, id ID) {
	s.mu.Lock()
	_, claimed := s.inflight[id]
	s.mu.Unlock()
	if claimed {
		return
	}
	release := s.hold(ctx, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, claimed := s.inflight[id]; claimed {
		release()
		return
	}
	s.inflight[id] = release
}

// enqueue hands a start to Run. Should the queue be full, the sandbox is
// marked failed at once rather than left starting for ever.
func (s *Service) enqueue(ctx context.Context, spec Spec) {
	s.claim(ctx, spec.Sandbox.ID)
	s.stages.set(spec.Sandbox.ID, StageQueued, s.now())
	select {
	case s.starts <- startJob{spec: spec}:
	default:
		s.done(spec.Sandbox.ID)
		s.startFailed(ctx, spec, "too many sandboxes starting at once; try again")
	}
}

func (s *Service) done(id ID) {
	s.mu.Lock()
	release, ok := s.inflight[id]
	delete(s.inflight, id)
	s.stages.clear(id)
	if ok {
		s.startEnded()
	}
	s.mu.Unlock()
	if ok {
		release()
	}
}

func (s *Service) busy(id ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.inflight[id]
	return ok
}

// start runs one queued start to its end: running when the driver reports
// the machine ready, failed when it cannot start it.
func (s *Service) start(ctx context.Context, spec Spec) {
	defer s.done(spec.Sandbox.ID)
	id := spec.Sandbox.ID
	began := s.now()
	if s.agentRun(spec.Sandbox) && spec.Env != nil {
		s.stages.set(id, StageCheckout, s.now())
		if err := s.runs.Prepare(ctx, &spec); err != nil {
			s.log.WarnContext(ctx, "agent run not prepared", "sandbox", id, "err", err)
			s.startFailed(ctx, spec, "its run could not be prepared: "+err.Error())
			return
		}
	}
	s.stages.set(id, StageMachine, s.now())
	restored, err := s.startMachine(ctx, spec)
	if ctx.Err() != nil {
		// The gateway stopped without waiting; the start-up sweep
		// finishes this one.
		return
	}
	if err != nil {
		s.log.WarnContext(ctx, "sandbox did not start", "sandbox", id, "err", err)
		reason := startReason(err)
		if spec.Run != nil {
			s.runs.Unstarted(ctx, spec, reason)
		}
		s.startFailed(ctx, spec, reason)
		return
	}
	sb, err := s.store.GetSandbox(ctx, id)
	if err != nil {
		if ctx.Err() == nil {
			s.log.ErrorContext(ctx, "sandbox started but cannot be read", "sandbox", id, "err", err)
		}
		return
	}
	if sb.State != StateStarting {
		// Terminated (or expired) while it started: release the machine.
		s.release(ctx, sb)
		return
	}
	next, _ := sb.Transition(StateRunning)
	next.Checkpoint = 0 // restored, or dropped by the start
	var events []audit.Event
	if restored != "" {
		events = append(events, audit.Event{At: s.now(), Org: sb.Org, Sandbox: string(sb.ID), Action: audit.SandboxRestore, Target: sb.Name, Detail: restored})
	}
	// Clamped: a start that ends past the expiry opens no charged time; the
	// next sweep expires it.
	if _, err := s.write(ctx, "", sb, Update{Sandbox: next, From: StateStarting, At: s.clamp(sb), Audit: events}); err != nil {
		if errors.Is(err, fault.Conflict) {
			if sb, err := s.store.GetSandbox(ctx, id); err == nil {
				s.release(ctx, sb)
			}
			return
		}
		if ctx.Err() == nil {
			s.log.ErrorContext(ctx, "sandbox started but its state cannot be written", "sandbox", id, "err", err)
		}
		return
	}
	s.log.InfoContext(ctx, "sandbox ready", "sandbox", id, "took", s.now().Sub(began))
	if sb.neverRan() {
		s.metrics.Ready(sb.Purpose, s.now().Sub(sb.CreatedAt))
	}
	if spec.Run != nil && !spec.Run.InMachine {
		// The start is over; the run goes on. The sweep may look at the
		// sandbox again (its expiry still applies) while the run is read.
		// The run's hold is taken before the start's ends, so no other
		// replica's sweep finds the run unfollowed in between.
		release := s.hold(ctx, id)
		s.done(id)
		s.runs.Follow(ctx, next, spec.Run.Work)
		release()
	}
}

// startFailed fails a sandbox whose start did not happen, counting it as a
// failed create when it was its first start.
func (s *Service) startFailed(ctx context.Context, spec Spec, reason string) {
	if spec.Sandbox.neverRan() {
		s.metrics.CreateFailed(StageStart)
	}
	s.fail(ctx, spec.Sandbox.ID, reason)
}

// release puts a machine in line with a row that moved on while it started.
func (s *Service) release(ctx context.Context, sb Sandbox) {
	var err error
	switch {
	case !sb.Live():
		err = s.driver.Remove(ctx, sb.ID)
	case sb.State != StateRunning && sb.State != StateStarting:
		if err = s.driver.Stop(ctx, sb.ID); errors.Is(err, fault.NotFound) {
			err = nil
		}
	}
	if err != nil {
		s.log.WarnContext(ctx, "could not release a sandbox's machine", "sandbox", sb.ID, "err", err)
	}
}

// fail marks a sandbox failed with reason, revoking its key at once. An
// agent's machine is removed; an engineer's volume is kept (SPEC S3).
func (s *Service) fail(ctx context.Context, id ID, reason string) {
	for range 3 { // the row may move under us; read it again and retry
		sb, err := s.store.GetSandbox(ctx, id)
		if err != nil || !CanMove(sb.State, StateFailed) {
			return
		}
		if _, err = s.end(ctx, "", sb, StateFailed, reason); !errors.Is(err, errMoved) {
			if err != nil {
				s.log.ErrorContext(ctx, "could not mark a sandbox failed", "sandbox", id, "err", err)
			}
			return
		}
	}
}

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/quantity"
)

// Suspend with memory (SPEC S3): on a driver that is a Checkpointer, a
// suspend saves the machine's memory and processes beside its volume, and
// the resume restores them. The row is written suspended first, as ever;
// the checkpoint follows, and its size is written on the row once it is
// made. Whatever goes wrong (the runtime refuses, the disk is full, the
// gateway dies half-way) leaves a suspended sandbox with its volume whose
// resume starts it cold: a row with no checkpoint recorded is started
// from its volume, and a start from the volume drops any checkpoint.

// SuspendKind says how sb's machine is suspended on this deployment: with
// its memory (its processes go on at resume) or by stopping it (its
// volume is kept, its processes end), and why not with its memory.
func (s *Service) SuspendKind(sb Sandbox) (memory bool, why string) {
	c, ok := s.driver.(Checkpointer)
	if !ok {
		return false, "this deployment's machines cannot save their memory"
	}
	why = c.Checkpoints(sb)
	return why == "", why
}

// stopSuspended stops the machine of sb, whose row the caller has just
// written suspended: with its memory when the driver can (the checkpoint's
// size then written on the row), else by a stop. It returns the row as it
// is after.
func (s *Service) stopSuspended(ctx context.Context, actor string, sb Sandbox) Sandbox {
	if memory, _ := s.SuspendKind(sb); memory {
		if !s.busy(sb.ID) {
			// No sweep may stop the machine while its memory is saved.
			s.claim(ctx, sb.ID)
			defer s.done(sb.ID)
		}
		began := s.now()
		size, err := s.driver.(Checkpointer).Checkpoint(ctx, sb.ID)
		e := audit.Event{At: s.now(), Org: sb.Org, Actor: actor, Sandbox: string(sb.ID), Action: audit.SandboxCheckpoint, Target: sb.Name}
		if err == nil {
			next := sb
			next.Checkpoint = size
			e.Detail = fmt.Sprintf("its memory saved: %s in %s", quantity.FormatMiB(size.MiB()), s.now().Sub(began).Round(time.Millisecond))
			out, err := s.write(ctx, actor, sb, Update{Sandbox: next, From: StateSuspended, At: s.now(), Audit: []audit.Event{e}})
			if err == nil {
				return out
			}
			// The row moved on meanwhile (a resume, a terminate): what
			// moved it starts or removes the machine, which drops the
			// checkpoint.
			s.log.WarnContext(ctx, "a checkpoint was made but not recorded", "sandbox", sb.ID, "err", err)
			return sb
		}
		s.log.WarnContext(ctx, "checkpoint failed: the machine is stopped instead", "sandbox", sb.ID, "err", err)
		e.Detail = "failed, so the machine was stopped instead (its resume starts it from its volume): " + err.Error()
		s.record(ctx, e)
	}
	if err := s.driver.Stop(ctx, sb.ID); err != nil && !errors.Is(err, fault.NotFound) {
		// The row is right; the sweep stops what must not run.
		s.log.WarnContext(ctx, "driver could not stop a suspended sandbox's machine", "sandbox", sb.ID, "err", err)
	}
	return sb
}

// startMachine runs the driver's start of spec: a restore from its
// checkpoint when its row records one. restored says how it went, for
// the row's audit ("" when it was an ordinary start).
func (s *Service) startMachine(ctx context.Context, spec Spec) (restored string, err error) {
	c, ok := s.driver.(Checkpointer)
	if !ok || spec.Sandbox.Checkpoint == 0 || spec.Replace || spec.Env != nil {
		return "", s.driver.Start(ctx, spec)
	}
	cold, err := c.Restore(ctx, spec)
	if cold != "" {
		s.log.WarnContext(ctx, "sandbox resumed cold: its checkpoint could not be restored", "sandbox", spec.Sandbox.ID, "why", cold)
		return "its checkpoint could not be restored, so it started from its volume: " + cold, err
	}
	return fmt.Sprintf("restored from its checkpoint (%s): its processes go on", quantity.FormatMiB(spec.Sandbox.Checkpoint.MiB())), err
}

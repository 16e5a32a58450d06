package sandbox

import (
	"context"
	"fmt"
	"time"

	"berth.dev/berth/internal/audit"
)

// record appends an audit event stamped now. The action it records has
// already happened, so a failure to record is logged, not returned.
func (s *Service) record(ctx context.Context, e audit.Event) {
	if e.At.IsZero() {
		e.At = s.now()
	}
	if err := s.audit.Record(ctx, e); err != nil {
		s.log.ErrorContext(ctx, "audit event not recorded", "action", e.Action, "sandbox", e.Sandbox, "err", err)
	}
}

// recordCreate records a sandbox admitted by actor and the key minted for it.
func (s *Service) recordCreate(ctx context.Context, actor string, sb Sandbox, project string) {
	base := audit.Event{Org: sb.Org, Actor: actor, Sandbox: string(sb.ID)}
	e := base
	e.Action, e.Target = audit.SandboxCreate, sb.Name
	e.Detail = fmt.Sprintf("%s sandbox of class %s in project %s, expires %s", sb.Purpose, sb.Class, project, stamp(sb.ExpiresAt))
	s.record(ctx, e)
	e = base
	e.Action, e.Target, e.Detail = audit.KeyCreate, sb.KeyID, "the key of sandbox "+sb.Name
	s.record(ctx, e)
}

// writeEvents is what one write records: the state change (or, when the
// state stays, the new expiry of an extend), the key it revokes and the
// key it mints. Keys are named by id, never by secret.
func (s *Service) writeEvents(actor string, prev Sandbox, u Update) []audit.Event {
	next := u.Sandbox
	base := audit.Event{At: s.now(), Org: next.Org, Actor: actor, Sandbox: string(next.ID)}
	e := base
	e.Target = next.Name
	if prev.State != next.State {
		e.Action, e.Detail = audit.SandboxState, fmt.Sprintf("%s → %s", prev.State, next.State)
		if next.Reason != "" {
			e.Detail += ": " + next.Reason
		}
	} else {
		e.Action = audit.SandboxExtend
		e.Detail = fmt.Sprintf("expires %s (was %s)", stamp(next.ExpiresAt), stamp(prev.ExpiresAt))
	}
	events := []audit.Event{e}
	// A key is revoked once: expiry, failure and terminate revoke it as
	// they end a sandbox, so a later terminate or a resume after expiry
	// revokes nothing more.
	keyLive := prev.State == StateStarting || prev.State == StateRunning || prev.State == StateSuspended
	if (u.RevokeKey || u.NewKey != nil) && prev.KeyID != "" && keyLive {
		e = base
		e.Action, e.Target, e.Detail = audit.KeyRevoke, prev.KeyID, "the key of sandbox "+next.Name
		events = append(events, e)
	}
	if u.NewKey != nil {
		e = base
		e.Action, e.Target, e.Detail = audit.KeyCreate, u.NewKey.ID, "the key of sandbox "+next.Name
		events = append(events, e)
	}
	return events
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

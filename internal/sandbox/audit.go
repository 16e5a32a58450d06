package sandbox

import (
	"context"
	"fmt"
	"time"

	"berth.dev/berth/internal/audit"
)

// record appends an audit event stamped now, on its own: for what
// cannot share a transaction with its event (a forge's token minted or
// revoked, a push, a shell's connection, a refusal that changes nothing).
// The action has already happened, so a failure to record is logged, not
// returned. Changes to the database record theirs in the transaction that
// makes them (Update.Audit, createEvents).
func (s *Service) record(ctx context.Context, e audit.Event) {
	audit.Record(ctx, s.audit, s.log, s.now, e)
}

// createEvents is what a create records, committed with the sandbox's row:
// the sandbox admitted by actor and the key minted for it.
func (s *Service) createEvents(actor string, sb Sandbox, project string) []audit.Event {
	base := audit.Event{At: s.now(), Org: sb.Org, Actor: actor, Sandbox: string(sb.ID)}
	e := base
	e.Action, e.Target = audit.SandboxCreate, sb.Name
	e.Detail = fmt.Sprintf("%s sandbox of class %s in project %s, expires %s", sb.Purpose, sb.Class, project, stamp(sb.ExpiresAt))
	k := base
	k.Action, k.Target, k.Detail = audit.KeyCreate, sb.KeyID, "the key of sandbox "+sb.Name
	return []audit.Event{e, k}
}

// writeEvents is what one write records: the state change (or, when the
// state stays, the new expiry of an extend), the key it revokes and the
// key it mints. Keys are named by id, never by secret.
func (s *Service) writeEvents(actor string, prev Sandbox, u Update) []audit.Event {
	next := u.Sandbox
	base := audit.Event{At: s.now(), Org: next.Org, Actor: actor, Sandbox: string(next.ID)}
	e := base
	e.Target = next.Name
	var events []audit.Event
	switch {
	case prev.State != next.State:
		e.Action, e.Detail = audit.SandboxState, fmt.Sprintf("%s → %s", prev.State, next.State)
		if next.Reason != "" {
			e.Detail += ": " + next.Reason
		}
		events = append(events, e)
	case prev.Checkpoint != next.Checkpoint && u.NewKey == nil && next.ExpiresAt.Equal(prev.ExpiresAt):
		// A checkpoint's size recorded: its caller says what it did.
	case u.NewKey == nil || !next.ExpiresAt.Equal(prev.ExpiresAt):
		e.Action = audit.SandboxExtend
		e.Detail = fmt.Sprintf("expires %s (was %s)", stamp(next.ExpiresAt), stamp(prev.ExpiresAt))
		events = append(events, e)
	}
	// Otherwise only the key changes (a start finished after a restart).
	//
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

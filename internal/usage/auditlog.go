package usage

import (
	"context"
	"fmt"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/paging"
)

// AuditQuery is what a read of the audit log asks for, as typed.
type AuditQuery struct {
	Sandbox string // a sandbox's id, or a name resolved as for the sandbox commands
	Since   string // a duration back from now such as "24h"; "" is DefaultAuditWindow
	Org     string // an organisation id or name; "" is the caller's, or every one for an operator
	// Page is the page to read, oldest first (newest first with Newest):
	// at most Page.Limit events (0: every one) after Page.After.
	Page   paging.Request
	Newest bool
}

// DefaultAuditWindow is how far back the audit log is read unless asked
// otherwise.
const DefaultAuditWindow = 24 * time.Hour

// Entry is an audit event with its actor's name.
type Entry struct {
	audit.Event
	ActorName string // "" when the actor is berth itself
}

// Audit reads a page of the audit log's window, oldest first, and returns
// the key of its last event when more follow. Administrators read their
// organisation's, operators every one's.
func (s *Service) Audit(ctx context.Context, p account.Principal, q AuditQuery) ([]Entry, *paging.Key, error) {
	out, next, err := s.auditLog(ctx, p, q)
	if err != nil {
		return nil, nil, fmt.Errorf("audit log: %w", err)
	}
	return out, next, nil
}

func (s *Service) auditLog(ctx context.Context, p account.Principal, q AuditQuery) ([]Entry, *paging.Key, error) {
	sc, err := s.scopeOf(ctx, p, q.Org, "the audit log")
	if err != nil {
		return nil, nil, err
	}
	d, err := window("since", q.Since, DefaultAuditWindow, 0)
	if err != nil {
		return nil, nil, err
	}
	f := audit.Filter{Org: sc.org, Since: s.now().Add(-d), Newest: q.Newest}
	switch ref := q.Sandbox; {
	case strings.HasPrefix(ref, "sbx_"):
		// An id is taken as it is: the organisation filter keeps what the
		// caller may not see out, and a sandbox the retention deleted is
		// still in the log.
		f.Sandbox = ref
	case ref != "":
		sb, err := s.sandboxes.Get(ctx, p, ref)
		if err != nil {
			return nil, nil, err
		}
		f.Sandbox = string(sb.ID)
	}
	events, next, err := s.store.ListAudit(ctx, f, q.Page)
	if err != nil {
		return nil, nil, err
	}
	n := s.names(ctx, p)
	out := make([]Entry, len(events))
	for i, e := range events {
		out[i] = Entry{Event: e}
		if e.Actor != "" {
			out[i].ActorName = n.user(e.Actor)
		}
	}
	return out, next, nil
}

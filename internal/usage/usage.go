// Package usage answers "what did this cost, and who did it?" for
// administrators (SPEC S8, S17): usage reports summed from the running
// segments of sandboxes, by project, user or class, and reads of the
// audit log. An organisation's administrators read their organisation's;
// operators every organisation's, or one's. A member is refused as
// forbidden, not as not found: the reports exist, they are not theirs to
// read. What the caller may not see is never read, so it cannot leak.
package usage

import (
	"cmp"
	"context"
	"slices"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/sandbox"
)

// Store is what the usage service reads.
type Store interface {
	ListSandboxes(ctx context.Context, f sandbox.Filter) ([]sandbox.Sandbox, error)
	// ListAudit returns a page of the events f selects, oldest first, and
	// the key of its last one when more follow.
	ListAudit(ctx context.Context, f audit.Filter, pg paging.Request) ([]audit.Event, *paging.Key, error)
	MeteredBySandbox(ctx context.Context, org string, since time.Time) (map[sandbox.ID]agentrun.Metered, error)
}

// Accounts is what the usage service needs to know of organisations,
// projects and users: who may read what, and the names to show.
type Accounts interface {
	Organisation(ctx context.Context, p account.Principal, ref string) (account.Organisation, error)
	Projects(ctx context.Context, p account.Principal, orgRef string, pg paging.Request) ([]account.Project, *paging.Key, error)
	Users(ctx context.Context, p account.Principal, orgRef string, pg paging.Request) ([]account.User, *paging.Key, error)
	User(ctx context.Context, id string) (account.User, error)
}

// Sandboxes resolves a sandbox's name as its owner or an administrator
// would (SPEC S6), for the audit log's --sandbox.
type Sandboxes interface {
	Get(ctx context.Context, p account.Principal, ref string) (sandbox.Sandbox, error)
}

// Service reads usage and the audit log.
type Service struct {
	store     Store
	accounts  Accounts
	sandboxes Sandboxes
	retention time.Duration
	now       func() time.Time
}

// NewService returns a Service. retention is BERTH_USAGE_RETENTION: ended
// sandboxes are deleted after it, so a report reaches no further back.
func NewService(store Store, accounts Accounts, sandboxes Sandboxes, retention time.Duration, now func() time.Time) *Service {
	return &Service{store: store, accounts: accounts, sandboxes: sandboxes, retention: retention, now: now}
}

// DefaultWindow is how far back a usage report reaches unless asked
// otherwise (and the retention is longer).
const DefaultWindow = 30 * 24 * time.Hour

// scope is the organisations a caller reads: one, or every one (org "")
// for an operator who names none.
type scope struct {
	org  string
	name string
}

// scopeOf checks that p may read usage and audit, of the organisation
// named by orgRef ("" for their own, or for an operator every one).
func (s *Service) scopeOf(ctx context.Context, p account.Principal, orgRef, what string) (scope, error) {
	if orgRef == "" && p.IsOperator() {
		return scope{}, nil
	}
	org, err := s.accounts.Organisation(ctx, p, orgRef)
	if err != nil {
		return scope{}, err // not found for an organisation p is not in
	}
	if !p.IsAdminOf(org.ID) {
		return scope{}, fault.Errorf(fault.Forbidden, "%s of %s is for its administrators", what, org.Name)
	}
	return scope{org: org.ID, name: org.Name}, nil
}

// window parses a --since duration: "" is def, and it may not reach past
// limit (0: no limit).
func window(field, since string, def, limit time.Duration) (time.Duration, error) {
	if since == "" {
		if limit > 0 && def > limit {
			return limit, nil
		}
		return def, nil
	}
	d, err := quantity.ParseDuration(since)
	if err != nil {
		return 0, fault.Field(field, "%v", err)
	}
	if d <= 0 {
		return 0, fault.Field(field, "%s must be more than 0", since)
	}
	if limit > 0 && d > limit {
		return 0, fault.Field(field, "%s reaches past the usage retention of %s (BERTH_USAGE_RETENTION): ended sandboxes older than that are deleted; ask for %s or less",
			since, quantity.FormatDuration(limit), quantity.FormatDuration(limit))
	}
	return d, nil
}

// names looks up and remembers the names of organisations, projects and
// users for one read, asking for each organisation's at most once.
type names struct {
	ctx      context.Context
	p        account.Principal
	accounts Accounts
	orgs     map[string]string
	loaded   map[string]bool // organisations whose projects and users are in byID
	byID     map[string]string
}

func (s *Service) names(ctx context.Context, p account.Principal) *names {
	return &names{ctx: ctx, p: p, accounts: s.accounts, orgs: map[string]string{}, loaded: map[string]bool{}, byID: map[string]string{}}
}

// org returns an organisation's name, or its id when it cannot be read.
func (n *names) org(id string) string {
	if name, ok := n.orgs[id]; ok {
		return name
	}
	name := id
	if o, err := n.accounts.Organisation(n.ctx, n.p, id); err == nil {
		name = o.Name
	}
	n.orgs[id] = name
	return name
}

// in returns the name of a project or user of org, or id.
func (n *names) in(org, id string) string {
	if !n.loaded[org] {
		n.loaded[org] = true
		if prjs, _, err := n.accounts.Projects(n.ctx, n.p, org, paging.Request{}); err == nil {
			for _, p := range prjs {
				n.byID[p.ID] = p.Name
			}
		}
		if users, _, err := n.accounts.Users(n.ctx, n.p, org, paging.Request{}); err == nil {
			for _, u := range users {
				n.byID[u.ID] = u.Name
			}
		}
	}
	return cmp.Or(n.byID[id], id)
}

// user returns any user's name by id (an operator acts across
// organisations), or id.
func (n *names) user(id string) string {
	if name, ok := n.byID[id]; ok {
		return name
	}
	name := id
	if u, err := n.accounts.User(n.ctx, id); err == nil {
		name = u.Name
	}
	n.byID[id] = name
	return name
}

// sortRows orders rows by organisation name, then name, then id.
func sortRows(rows []Row) {
	slices.SortFunc(rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.OrgName, b.OrgName), cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
}

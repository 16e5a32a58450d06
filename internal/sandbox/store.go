package sandbox

import (
	"context"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/paging"
)

// Store is what the sandbox service needs from the database. Its write
// that starts something new (CreateSandbox) may be refused with
// fault.Busy when the database cannot take it in time, having
// written nothing, its audit events included; every other
// write (state changes, a start finished with a fresh key, activity,
// deletes after the retention) waits for the database as
// long as its context allows, so load delays it and never drops it, nor
// the events it records.
type Store interface {
	// ListClasses returns a page of an organisation's classes by name, and
	// the key of its last one when more follow.
	ListClasses(ctx context.Context, org string, pg paging.Request) ([]class.Class, *paging.Key, error)
	// GetClass is fault.NotFound for a class the organisation does not
	// have.
	GetClass(ctx context.Context, org, name string) (class.Class, error)

	// CreateSandbox inserts sb and its key in one transaction that first
	// counts the live sandboxes of sb's organisation and project and hands
	// the counts to admit; an error from admit aborts the insert. Admission
	// is race-free: concurrent creates are serialised (SPEC S7). A live
	// sandbox of the same owner and name is fault.Conflict. events are what
	// the create records (SPEC S17), committed with it.
	CreateSandbox(ctx context.Context, sb Sandbox, key account.Key, admit func(Live) error, events ...audit.Event) error
	GetSandbox(ctx context.Context, id ID) (Sandbox, error)
	ListSandboxes(ctx context.Context, f Filter) ([]Sandbox, error)
	// PageSandboxes is a page of ListSandboxes, and the key of its last
	// sandbox when more follow.
	PageSandboxes(ctx context.Context, f Filter, pg paging.Request) ([]Sandbox, *paging.Key, error)
	// UpdateSandbox writes u.Sandbox if the row is still in state u.From,
	// else fault.Conflict; in the same transaction it opens or closes the
	// running segment, revokes or replaces the sandbox's key, and records
	// u.Audit.
	UpdateSandbox(ctx context.Context, u Update) error

	// DeleteEnded deletes, in one transaction, the sandboxes that ended
	// (are no longer live) before before, with their running segments and
	// keys, and returns the ids of the sandboxes it deleted.
	DeleteEnded(ctx context.Context, before time.Time) ([]ID, error)
}

// Live counts live sandboxes (SPEC S7: starting, running, suspended,
// expired, and an engineer's that failed).
type Live struct {
	Org     int
	Project int
}

// Filter narrows ListSandboxes. Zero fields do not narrow.
type Filter struct {
	Org     string
	Owner   string
	Name    string
	Class   string
	Purpose Purpose
	State   State // "" is any
	// Search keeps the sandboxes whose name or repository contains it
	// (case-insensitive); "" keeps every one.
	Search string
	// Ended includes sandboxes that no longer count (terminated, and
	// failed agents' ones).
	Ended bool
	// CreatedSince keeps the sandboxes created at or after it.
	CreatedSince time.Time
}

// Update is one state change of a sandbox.
type Update struct {
	Sandbox Sandbox // the row as it should be written
	From    State   // the state the row must still be in
	// At is when the change happened. A running segment opens at At when
	// the sandbox becomes running and closes at At when it stops running;
	// the service clamps At to the expiry so no segment runs past it.
	At        time.Time
	RevokeKey bool         // revoke the key the row names now
	NewKey    *account.Key // store and use this key instead (resume after expiry)
	// Audit is what the change records (SPEC S17), committed with it: the
	// log never shows a change that did not happen, nor misses or reorders
	// one that did.
	Audit []audit.Event
}

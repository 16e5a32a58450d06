package reach

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"berth.dev/berth/internal/sandbox"
)

// activity is what the gateway's tunnel tells of a sandbox: how many
// connections are open through it and when one last opened, closed or
// carried bytes.
type activity struct {
	open  int
	last  time.Time
	saved time.Time // the latest last written to the store
}

// activities is this replica's activity of every sandbox (SPEC S3's idle
// clock), saved to the store so that another replica's sweep reads it.
type activities struct {
	mu    sync.Mutex
	of    map[sandbox.ID]*activity
	now   func() time.Time
	store Store
	log   *slog.Logger
}

// ConnectionOpened records a connection opened to a sandbox through the
// gateway (SPEC S3: an open connection is activity, even with nobody typing).
func (s *Service) ConnectionOpened(id sandbox.ID) { s.active.opened(id, 1) }

// ConnectionClosed records the end of such a connection.
func (s *Service) ConnectionClosed(id sandbox.ID) { s.active.opened(id, -1) }

// Seen is sandbox.Activity's: the connections this replica has open to sb
// and when a connection last opened, closed or carried bytes, here or as
// another replica saved it.
func (s *Service) Seen(sb sandbox.Sandbox) (open int, last time.Time) { return s.active.seen(sb) }

// Save is sandbox.Activity's: every sandbox's activity not yet saved goes
// to the store, so bytes through a connection that stays open reach it
// once a tick.
func (s *Service) Save(ctx context.Context) { s.active.saveAll(ctx) }

// Forget is sandbox.Activity's: what was seen of a sandbox that is gone
// for good is dropped, unless a connection to it is still closing (its
// close records it again).
func (s *Service) Forget(id sandbox.ID) { s.active.forget(id) }

// opened counts n more connections open to id (-1: one closed), now.
func (a *activities) opened(id sandbox.ID, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := a.get(id)
	v.open = max(v.open+n, 0)
	v.last = a.now()
}

// touch records bytes moving through a connection to a sandbox.
func (a *activities) touch(id sandbox.ID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.get(id).last = a.now()
}

// seen is Seen.
func (a *activities) seen(sb sandbox.Sandbox) (open int, last time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	last = sb.ActiveAt
	if v, ok := a.of[sb.ID]; ok {
		open = v.open
		if v.last.After(last) {
			last = v.last
		}
	}
	return open, last
}

// save writes to the store what this replica saw of id's activity since
// it last did, so another replica's sweep reads it (SPEC S3: the idle
// clock counts connections through any replica). A failure is logged: the
// next tick tries again.
func (a *activities) save(ctx context.Context, id sandbox.ID) {
	a.mu.Lock()
	v, ok := a.of[id]
	if !ok || !v.last.After(v.saved) {
		a.mu.Unlock()
		return
	}
	at := v.last
	a.mu.Unlock()
	if err := a.store.SaveActivity(ctx, id, at); err != nil {
		a.log.WarnContext(ctx, "sandbox activity not saved", "sandbox", id, "err", err)
		return
	}
	a.mu.Lock()
	if at.After(v.saved) {
		v.saved = at
	}
	a.mu.Unlock()
}

// saveAll saves every sandbox's activity not yet saved: bytes through a
// connection that stays open reach the store once a tick.
func (a *activities) saveAll(ctx context.Context) {
	a.mu.Lock()
	var ids []sandbox.ID
	for id, v := range a.of {
		if v.last.After(v.saved) {
			ids = append(ids, id)
		}
	}
	a.mu.Unlock()
	for _, id := range ids {
		a.save(ctx, id)
	}
}

// forget drops what was seen of a sandbox that is gone for good, unless a
// connection to it is still closing (its close records it again).
func (a *activities) forget(id sandbox.ID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if v, ok := a.of[id]; ok && v.open == 0 {
		delete(a.of, id)
	}
}

// get is id's activity, made if it has none. The caller holds mu.
func (a *activities) get(id sandbox.ID) *activity {
	v, ok := a.of[id]
	if !ok {
		v = &activity{}
		a.of[id] = v
	}
	return v
}

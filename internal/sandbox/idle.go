package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/quantity"
)

// activity is what the gateway's tunnel tells the service about a sandbox:
// how many connections are open through it and when one last opened,
// closed or carried bytes.
type activity struct {
	open  int
	last  time.Time
	saved time.Time // the latest last written to the store
}

// activities is this replica's activity of every sandbox (SPEC S3's idle
// clock), saved to the store so that another replica's sweep reads it.
type activities struct {
	mu    sync.Mutex
	of    map[ID]*activity
	now   func() time.Time
	store Store
	log   *slog.Logger
}

// ConnectionOpened records a connection opened to a sandbox through the
// gateway (SPEC S3: an open connection is activity, even with nobody typing).
func (s *Service) ConnectionOpened(id ID) { s.active.opened(id, 1) }

// ConnectionClosed records the end of such a connection.
func (s *Service) ConnectionClosed(id ID) { s.active.opened(id, -1) }

// Activity returns the connections this replica has open to sb and when
// a connection last opened, closed or carried bytes, here or as another
// replica saved it; zero when none has since the sandbox was made.
func (s *Service) Activity(sb Sandbox) (open int, last time.Time) { return s.active.seen(sb) }

// opened counts n more connections open to id (-1: one closed), now.
func (a *activities) opened(id ID, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := a.get(id)
	v.open = max(v.open+n, 0)
	v.last = a.now()
}

// touch records bytes moving through a connection to a sandbox.
func (a *activities) touch(id ID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.get(id).last = a.now()
}

// seen is Activity.
func (a *activities) seen(sb Sandbox) (open int, last time.Time) {
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
func (a *activities) save(ctx context.Context, id ID) {
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
	var ids []ID
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
func (a *activities) forget(id ID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if v, ok := a.of[id]; ok && v.open == 0 {
		delete(a.of, id)
	}
}

// get is id's activity, made if it has none. The caller holds mu.
func (a *activities) get(id ID) *activity {
	v, ok := a.of[id]
	if !ok {
		v = &activity{}
		a.of[id] = v
	}
	return v
}

// idle reports whether an engineer sandbox has had no connection for the
// deployment's idle limit. The clock counts from the last connection, or
// from when it last started running (it restarts on resume).
func (s sweeper) idle(sb Sandbox, now time.Time) bool {
	if s.cfg.IdleSuspend <= 0 || sb.Purpose != PurposeEngineer || sb.State != StateRunning || sb.RunningSince.IsZero() {
		return false
	}
	open, last := s.Activity(sb)
	if open > 0 {
		return false
	}
	if last.Before(sb.RunningSince) {
		last = sb.RunningSince
	}
	return now.Sub(last) >= s.cfg.IdleSuspend
}

// suspendIdle suspends a sandbox the sweep found idle.
func (s sweeper) suspendIdle(ctx context.Context, sb Sandbox) error {
	next, err := sb.Transition(StateSuspended)
	if err != nil {
		return err
	}
	next.Reason = "idle for " + quantity.FormatDuration(s.cfg.IdleSuspend)
	// The row first, as Suspend does: a machine stopped under a row still
	// running is one that stopped by itself to whoever looks meanwhile
	// (the driver's watch, another sweep), and fails.
	if _, err = s.write(ctx, "", sb, Update{Sandbox: next, From: StateRunning, At: s.clamp(sb)}); err != nil {
		return err
	}
	if err := s.driver.Stop(ctx, sb.ID); err != nil && !errors.Is(err, fault.NotFound) {
		// The row is right; the sweep stops what must not run.
		s.log.WarnContext(ctx, "driver could not stop an idle sandbox's machine", "sandbox", sb.ID, "err", err)
	}
	return nil
}

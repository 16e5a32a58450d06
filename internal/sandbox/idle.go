package sandbox

import (
	"context"
	"errors"
	"time"

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

// ConnectionOpened records a connection opened to a sandbox through the
// gateway (SPEC S3: an open connection is activity, even with nobody typing).
func (s *Service) ConnectionOpened(id ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.activityOf(id)
	a.open++
	a.last = s.now()
}

// ConnectionClosed records the end of such a connection.
func (s *Service) ConnectionClosed(id ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.activityOf(id)
	if a.open > 0 {
		a.open--
	}
	a.last = s.now()
}

// touch records bytes moving through a connection to a sandbox.
func (s *Service) touch(id ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.activityOf(id).last = s.now()
}

// Activity returns the connections this replica has open to sb and when
// a connection last opened, closed or carried bytes, here or as another
// replica saved it; zero when none has since the sandbox was made.
func (s *Service) Activity(sb Sandbox) (open int, last time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last = sb.ActiveAt
	if a, ok := s.active[sb.ID]; ok {
		open = a.open
		if a.last.After(last) {
			last = a.last
		}
	}
	return open, last
}

// saveActivity writes to the store what this replica saw of id's activity
// since it last did, so another replica's sweep reads it (SPEC S3: the
// idle clock counts connections through any replica). A failure is logged:
// the next tick tries again.
func (s *Service) saveActivity(ctx context.Context, id ID) {
	s.mu.Lock()
	a, ok := s.active[id]
	if !ok || !a.last.After(a.saved) {
		s.mu.Unlock()
		return
	}
	at := a.last
	s.mu.Unlock()
	if err := s.store.SaveActivity(ctx, id, at); err != nil {
		s.log.WarnContext(ctx, "sandbox activity not saved", "sandbox", id, "err", err)
		return
	}
	s.mu.Lock()
	if at.After(a.saved) {
		a.saved = at
	}
	s.mu.Unlock()
}

// saveAllActivity saves every sandbox's activity not yet saved: bytes
// through a connection that stays open reach the store once a tick.
func (s *Service) saveAllActivity(ctx context.Context) {
	s.mu.Lock()
	var ids []ID
	for id, a := range s.active {
		if a.last.After(a.saved) {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.saveActivity(ctx, id)
	}
}

// forget drops what was seen of a sandbox that is gone for good, unless a
// connection to it is still closing (its close records it again).
func (s *Service) forget(id ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.active[id]; ok && a.open == 0 {
		delete(s.active, id)
	}
}

func (s *Service) activityOf(id ID) *activity {
	a, ok := s.active[id]
	if !ok {
		a = &activity{}
		s.active[id] = a
	}
	return a
}

// idle reports whether an engineer sandbox has had no connection for the
// deployment's idle limit. The clock counts from the last connection, or
// from when it last started running (it restarts on resume).
func (s *Service) idle(sb Sandbox, now time.Time) bool {
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
func (s *Service) suspendIdle(ctx context.Context, sb Sandbox) error {
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
	if err := s.driver.Stop(ctx, sb.ID); err != nil && !errors.Is(err, ErrNotFound) {
		// The row is right; the sweep stops what must not run.
		s.log.WarnContext(ctx, "driver could not stop an idle sandbox's machine", "sandbox", sb.ID, "err", err)
	}
	return nil
}

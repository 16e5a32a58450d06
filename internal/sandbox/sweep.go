package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"berth.dev/berth/internal/fault"
)

// Run starts queued machines and sweeps every interval until ctx is done,
// then waits for the starts in flight. It sweeps once before anything else,
// so what should have ended while the gateway was down ends now (SPEC S11).
// Among replicas only the leader sweeps (see Replicas); the others ask
// again at every interval, and one takes over when the leader dies. With
// a Watcher driver the leader also handles each machine the driver says
// stopped or vanished at once, as the sweep would, and sweeps again when
// the watch comes back after breaking. After Shutdown it only starts what
// is queued.
func (s *Service) Run(ctx context.Context, interval time.Duration) {
	var wg sync.WaitGroup
	defer wg.Wait()
	if s.driver == nil {
		<-ctx.Done()
		return
	}
	sw := sweeper{s}
	changes, lost := make(chan ID, 1024), make(chan struct{}, 1)
	if w, ok := s.driver.(Watcher); ok {
		wg.Go(func() { sw.watch(ctx, w, changes, lost) })
	}
	// Starts are taken off the queue on their own: a create that arrives
	// while a sweep lists machines and tidies does not wait for it.
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case job := <-s.starts:
				wg.Go(func() { s.start(ctx, job.spec) })
			}
		}
	})
	leading := false
	sw.sweepIfLeader(ctx, &leading)
	t := time.NewTicker(interval)
	defer t.Stop()
	stopping, tick, follows, changed, broke := s.stopping, t.C, s.follows, changes, lost
	for {
		select {
		case <-ctx.Done():
			return
		case <-stopping:
			// Shutdown: no sweep, no machine handled, no run followed
			// again; the starts queued and under way go on until ctx
			// ends. The next gateway's start-up sweep sees the rest.
			stopping, tick, follows, changed, broke = nil, nil, nil, nil, nil
		case id := <-changed:
			if leading {
				wg.Go(func() { sw.machineChanged(ctx, id) })
			}
		case <-broke:
			sw.sweepIfLeader(ctx, &leading)
		case id := <-follows:
			wg.Go(func() {
				if sb, err := s.store.GetSandbox(ctx, id); err == nil && sb.State == StateRunning {
					s.runs.Follow(ctx, sb, "")
				}
			})
		case <-tick:
			if s.activity != nil {
				s.activity.Save(ctx)
			}
			sw.sweepIfLeader(ctx, &leading)
		}
	}
}

func (s sweeper) sweepAndLog(ctx context.Context) {
	began := s.now()
	res, err := s.sweep(ctx)
	s.metrics.Swept(s.now().Sub(began))
	if err != nil {
		if ctx.Err() == nil {
			s.log.ErrorContext(ctx, "sweep failed", "err", err)
		}
		return
	}
	for id, err := range res.Errors {
		s.log.WarnContext(ctx, "sweep could not handle a sandbox", "sandbox", id, "err", err)
	}
	if res.Deleted > 0 {
		s.log.InfoContext(ctx, "ended sandboxes deleted after the retention", "count", res.Deleted, "retention", s.cfg.Retention)
	}
}

// SweepResult says what one sweep did.
type SweepResult struct {
	Expired   []ID // engineer sandboxes now expired
	Ended     []ID // agent sandboxes terminated: at expiry, on a clean exit, or a session idle past session_idle
	Failed    []ID
	Suspended []ID // engineer machines whose process exited 0 (SPEC S11)
	Resumed   []ID // starts interrupted by a restart, now finishing
	Removed   []ID // machines with no live row, removed by the reconciler
	// Tidied are what a Tidier driver removed that no sandbox owned (the
	// podman driver: runtime containers a killed podman left).
	Tidied  []string
	Deleted int // ended sandboxes deleted after the retention
	Errors  map[ID]error
}

// Tidier is the capability of a driver that has more to clean than its
// machines: what its engine left behind when it was killed, owned by no
// sandbox (SPEC S11: sandboxes never outlive what the database says). The
// sweep calls Tidy after the reconciler; it returns what it removed.
type Tidier interface {
	Tidy(ctx context.Context) ([]string, error)
}

// Sweep is one pass over every live sandbox: it ends what has expired
// and sessions idle past their class's session_idle, notices machines
// that stopped or vanished, finishes or fails starts that a restart
// interrupted, and removes machines the database does not know.
// Last, it deletes the sandboxes that ended longer ago than the retention.
func (s *Service) Sweep(ctx context.Context) (SweepResult, error) { return sweeper{s}.sweep(ctx) }

// sweeper is the sweeping replica's background work (SPEC S11): the sweep
// over every live sandbox, the machines a Watcher driver says changed,
// idle engineer sandboxes suspended, sessions idle past their class's
// session_idle terminated, starts a stop interrupted finished,
// and the retention. It is the service's (it acts through the service's
// one write path and start queue), kept apart from what callers ask of
// the service.
type sweeper struct{ *Service }

func (s sweeper) sweep(ctx context.Context) (SweepResult, error) {
	res := SweepResult{Errors: map[ID]error{}}
	if s.driver == nil {
		return res, nil
	}
	live, err := s.store.ListSandboxes(ctx, Filter{})
	if err != nil {
		return res, fmt.Errorf("sweep: %w", err)
	}
	machines, err := s.driver.List(ctx)
	if err != nil {
		return res, fmt.Errorf("sweep: driver: %w", err)
	}
	byID := make(map[ID]Machine, len(machines))
	for _, m := range machines {
		byID[m.ID] = m
	}
	keep := map[ID]bool{}
	for _, sb := range live {
		keep[sb.ID] = true
		m, has := byID[sb.ID]
		var err error
		if sb.State != StateStarting && (sb.State == StateRunning) != (has && m.Status == MachineRunning) {
			// The machines were listed after the rows were read, and
			// the two disagree. A suspend and a resume in between leave
			// a running row beside a machine listed stopped, and a
			// write's compare-and-set (on the state alone) would let the
			// stale list end a sandbox that runs; a resume that ends in
			// between leaves a suspended row beside its machine listed
			// running, which the sweep would stop under it. Both are
			// read again first.
			err = s.sweepSandbox(ctx, sb.ID, &res)
		} else {
			err = s.sweepLive(ctx, sb, m, has, &res)
		}
		if err != nil {
			res.Errors[sb.ID] = err
		}
	}
	for _, m := range machines {
		if keep[m.ID] || s.busy(m.ID) {
			continue
		}
		// Double-check against the row: it may have been created after the
		// list was read.
		if sb, err := s.store.GetSandbox(ctx, m.ID); err == nil && sb.Live() {
			continue
		}
		if err := s.driver.Remove(ctx, m.ID); err != nil {
			res.Errors[m.ID] = fmt.Errorf("remove stray machine: %w", err)
			continue
		}
		res.Removed = append(res.Removed, m.ID)
	}
	if t, ok := s.driver.(Tidier); ok {
		tidied, err := t.Tidy(ctx)
		res.Tidied = tidied
		if err != nil {
			s.log.WarnContext(ctx, "sweep could not tidy the driver's leftovers", "err", err)
		}
	}
	if s.cfg.Retention > 0 {
		ids, err := s.store.DeleteEnded(ctx, s.now().Add(-s.cfg.Retention))
		if err != nil {
			return res, fmt.Errorf("sweep: retention: %w", err)
		}
		res.Deleted = len(ids)
		// What a run left on the gateway's disk goes with its row.
		if s.runs != nil {
			for _, id := range ids {
				s.runs.Forget(ctx, id)
			}
		}
	}
	return res, nil
}

// sweepLive is the sweep's handling of one live sandbox, given what the
// driver holds for it (m; has false when nothing): the sweep's for every
// live sandbox, and the service's for one whose machine the driver says
// changed (Watcher) or a tunnel found stopped (sweepSandbox). A start in
// flight and what another replica serves are left alone.
func (s sweeper) sweepLive(ctx context.Context, sb Sandbox, m Machine, has bool, res *SweepResult) error {
	if sb.State != StateRunning && s.busy(sb.ID) {
		// Its start is queued or under way. Once the row says running
		// the start has written all it will, and the sandbox is the
		// sweep's again, even if the start has not quite returned.
		return nil
	}
	if sb.State == StateStarting {
		// The list may be older than a start that ended since (a fast
		// agent run): a start writes its row before it lets go, so the
		// row read now says what it did. Only a row still starting is
		// a start a restart interrupted.
		fresh, err := s.store.GetSandbox(ctx, sb.ID)
		if err != nil && !errors.Is(err, fault.NotFound) {
			return err
		}
		if err != nil || !fresh.Live() {
			return nil // ended meanwhile: whoever ended it removes its machine
		}
		if fresh.State != StateStarting {
			// Its start ended after the machines were listed, which
			// may not show the machine it made: the next sweep looks.
			return nil
		}
		sb = fresh
	}
	if s.servedElsewhere(ctx, sb) {
		return nil
	}
	if err := s.sweepOne(ctx, sb, m, has, has && !m.VolumeOnly, res); err != nil && !errors.Is(err, fault.Conflict) {
		return err
	}
	return nil
}

// sweepOne handles one live sandbox. has says the driver holds anything
// for it (a machine or just its volume), running that a machine exists.
func (s sweeper) sweepOne(ctx context.Context, sb Sandbox, m Machine, has, machine bool, res *SweepResult) error {
	now := s.now()
	if !now.Before(sb.ExpiresAt) && CanMove(sb.State, StateExpired) {
		// A machine that stopped before its expiry stopped the clock then.
		var exited time.Time
		if machine && m.Status == MachineStopped {
			exited = m.FinishedAt
		}
		if sb.Purpose == PurposeAgent {
			_, err := s.endAt(ctx, "", sb, StateTerminated, "expired", exited)
			if err == nil {
				res.Ended = append(res.Ended, sb.ID)
			}
			return err
		}
		_, err := s.endAt(ctx, "", sb, StateExpired, "expired", exited)
		if err == nil {
			res.Expired = append(res.Expired, sb.ID)
		}
		return err
	}
	if reason := s.idleSession(ctx, sb, now); reason != "" {
		// A session that waited too long for its next task ends as at
		// its expiry; its checkout and home go with it (Runs.Removed).
		_, err := s.end(ctx, "", sb, StateTerminated, reason)
		if err == nil {
			res.Ended = append(res.Ended, sb.ID)
		}
		return err
	}
	if sb.State == StateRunning && s.agentRun(sb) && s.inMachine() {
		// The machine reports how its run ended; one that stopped (or
		// went) without reporting failed. A report being read here is
		// left to finish.
		if s.runs.Following(sb.ID) || (machine && m.Status == MachineRunning) {
			return nil
		}
		reason := "its machine ended without reporting its run to the gateway"
		switch {
		case !machine:
			reason = "its machine is gone; its run never reported"
		case m.Detail != "":
			reason += " (" + m.Detail + ")"
		}
		_, err := s.endAt(ctx, "", sb, StateFailed, reason, m.FinishedAt)
		if err == nil {
			res.Failed = append(res.Failed, sb.ID)
		}
		return err
	}
	if sb.State == StateRunning && s.agentRun(sb) {
		// The run's follower decides how it ended; after a restart there is
		// none yet: follow it again.
		if !s.runs.Following(sb.ID) {
			select {
			case s.follows <- sb.ID:
			default:
			}
		}
		return nil
	}
	switch sb.State {
	case StateStarting:
		// A stop interrupted the start: nobody holds it (servedElsewhere).
		if machine && (m.Status == MachineRunning || sb.Checkpoint != 0) && !sb.FromPool {
			// Its machine was made with the key it was given, and runs
			// (wait for it to be ready again) or waits to be restored
			// from the save its row records (a fork's, a resume's from
			// memory): its processes go on.
			s.enqueue(ctx, Spec{Sandbox: sb})
		} else if err := s.finishStart(ctx, sb); err != nil {
			// (A pool's machine that runs may still wait for its token:
			// it gets a new one, which it takes only if it does.)
			return s.failUnfinished(ctx, sb, err, res)
		}
		res.Resumed = append(res.Resumed, sb.ID)
		return nil
	case StateRunning:
		switch {
		case machine && m.Status == MachineRunning && s.idle(sb, now) && !s.heldElsewhere(ctx, sb.ID):
			// A connection open through another replica is held there.
			err := s.suspendIdle(ctx, sb)
			if err == nil {
				res.Suspended = append(res.Suspended, sb.ID)
			}
			return err
		case !machine:
			_, err := s.end(ctx, "", sb, StateFailed, "its machine is gone")
			if err == nil {
				res.Failed = append(res.Failed, sb.ID)
			}
			return err
		case m.Status == MachineStopped && m.Final:
			// A finished pod cannot restart, whatever its exit (SPEC S11).
			reason := "its machine finished and cannot restart"
			if m.Detail != "" {
				reason += " (" + m.Detail + ")"
			}
			_, err := s.endAt(ctx, "", sb, StateFailed, reason, m.FinishedAt)
			if err == nil {
				res.Failed = append(res.Failed, sb.ID)
			}
			return err
		case m.Status == MachineStopped && m.ExitCode == 0 && sb.Purpose == PurposeEngineer:
			next, _ := sb.Transition(StateSuspended)
			next.Reason = "its process exited 0"
			if m.Detail != "" {
				next.Reason += " (" + m.Detail + ")"
			}
			_, err := s.write(ctx, "", sb, Update{Sandbox: next, From: StateRunning, At: s.stoppedAt(sb, m.FinishedAt)})
			if err == nil {
				res.Suspended = append(res.Suspended, sb.ID)
			}
			return err
		case m.Status == MachineStopped && m.ExitCode == 0:
			_, err := s.endAt(ctx, "", sb, StateTerminated, "its task finished", m.FinishedAt)
			if err == nil {
				res.Ended = append(res.Ended, sb.ID)
			}
			return err
		case m.Status == MachineStopped:
			reason := fmt.Sprintf("its process exited %d", m.ExitCode)
			if m.Detail != "" {
				reason += ": " + m.Detail
			}
			_, err := s.endAt(ctx, "", sb, StateFailed, reason, m.FinishedAt)
			if err == nil {
				res.Failed = append(res.Failed, sb.ID)
			}
			return err
		}
	case StateSuspended, StateExpired, StateFailed:
		// Such a machine must not run: stop what holds work. (A failed
		// sandbox that never ran is not live; the reconciler below removes
		// whatever a crash left of it.)
		if has && m.Status == MachineRunning {
			if err := s.driver.Stop(ctx, sb.ID); err != nil && !errors.Is(err, fault.NotFound) {
				return err
			}
		}
	}
	return nil
}

// servedElsewhere reports whether another replica is starting sb or
// following its run (it holds it then): this sweep leaves it to that
// replica while it lives, unless it has expired. Only those states are
// asked about, to keep a sweep's queries few.
func (s sweeper) servedElsewhere(ctx context.Context, sb Sandbox) bool {
	if !s.now().Before(sb.ExpiresAt) {
		return false
	}
	switch {
	case sb.State == StateStarting:
	case sb.State == StateRunning && s.agentRun(sb) && !s.runs.Following(sb.ID):
	default:
		return false
	}
	return s.heldElsewhere(ctx, sb.ID)
}

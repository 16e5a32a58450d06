package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"berth.dev/berth/internal/fault"
)

// The pauses between two watches of a driver whose watch broke: doubling
// from the first to the last, and back to the first after a watch that
// lasted a minute.
const (
	firstWatchPause = 100 * time.Millisecond
	lastWatchPause  = 10 * time.Second
)

// watch follows a Watcher driver's changes until ctx is done, handing the
// id of each machine it tells of to changes; Run handles them. A watch
// that breaks is started again after a pause, and lost is signalled: what
// changed while it was down went untold, so Run sweeps.
func (s sweeper) watch(ctx context.Context, w Watcher, changes chan<- ID, lost chan<- struct{}) {
	pause := firstWatchPause
	for {
		began := time.Now()
		err := w.Watch(ctx, func(id ID) {
			select {
			case changes <- id:
			default: // more at once than the queue holds: the sweep sees them
			}
		})
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("the watch ended")
		}
		if time.Since(began) > time.Minute {
			pause = firstWatchPause
		}
		s.log.WarnContext(ctx, "the driver's watch broke; watching again", "err", err, "in", pause)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, lastWatchPause)
		select {
		case lost <- struct{}{}:
		default:
		}
	}
}

// machineChanged handles a sandbox whose machine the driver says may
// have stopped or vanished, at once and as the sweep would.
func (s sweeper) machineChanged(ctx context.Context, id ID) {
	if err := s.sweepSandbox(ctx, id, &SweepResult{Errors: map[ID]error{}}); err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "could not handle a sandbox whose machine changed", "sandbox", id, "err", err)
	}
}

// sweepSandbox is one sandbox's part of a sweep, now: its row and its
// machine read afresh, then sweepLive. A sandbox that is not live is left
// to the sweep's reconciler. Like two sweeps, it may meet a sweep acting
// on the same sandbox: every state change is a compare-and-set, and the
// one that loses it does nothing.
func (s sweeper) sweepSandbox(ctx context.Context, id ID, res *SweepResult) error {
	sb, err := s.store.GetSandbox(ctx, id)
	if errors.Is(err, fault.NotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !sb.Live() {
		return nil
	}
	m, err := s.driver.Inspect(ctx, id)
	if err != nil && !errors.Is(err, fault.NotFound) {
		return fmt.Errorf("driver: %w", err)
	}
	return s.sweepLive(ctx, sb, m, err == nil, res)
}

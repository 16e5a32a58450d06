package sandbox

import (
	"berth.dev/berth/internal/fault"
)

// State is where a sandbox is in its life (SPEC S3).
type State string

// The states of SPEC S3.
const (
	StateStarting   State = "starting"
	StateRunning    State = "running"
	StateSuspended  State = "suspended"
	StateExpired    State = "expired"
	StateFailed     State = "failed"
	StateTerminated State = "terminated"
)

// transitions lists, for each state, the states it may move to.
var transitions = map[State][]State{
	// A start can finish, fail, be ended by its owner, or outlast the
	// sandbox's lifetime; an engineer's machine that exits 0 before it is
	// ready is suspended (SPEC S11).
	StateStarting: {StateRunning, StateFailed, StateTerminated, StateExpired, StateSuspended},
	StateRunning:  {StateSuspended, StateExpired, StateFailed, StateTerminated},
	// Resume starts it again; expiry, failure and terminate end it.
	StateSuspended: {StateStarting, StateExpired, StateFailed, StateTerminated},
	// An expired engineer sandbox keeps its volume and may be resumed.
	StateExpired: {StateStarting, StateFailed, StateTerminated},
	// A failed sandbox is over; terminate frees what it kept.
	StateFailed:     {StateTerminated},
	StateTerminated: nil,
}

// CanMove reports whether from → to is a legal transition.
func CanMove(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Transition returns sb moved to state to, or a fault.Conflict naming both
// states when S3 does not allow the move.
func (sb Sandbox) Transition(to State) (Sandbox, error) {
	if !CanMove(sb.State, to) {
		return sb, fault.Errorf(fault.Conflict, "sandbox %s is %s, it cannot become %s", sb.Name, sb.State, to)
	}
	sb.State = to
	return sb, nil
}

// Live reports whether a sandbox in this state still counts: towards
// max-sandboxes, for its name, and in `list` without --all (SPEC S3, S7).
// A failed engineer sandbox counts for its volume, so it stays live until
// terminated, but only if it holds one: a sandbox keeps its volume when
// it fails only once it has run (HoldsVolume). A failed agent sandbox is
// gone.
func (sb Sandbox) Live() bool {
	switch sb.State {
	case StateTerminated:
		return false
	case StateFailed:
		return sb.Purpose == PurposeEngineer && sb.HoldsVolume()
	}
	return true
}

// HoldsVolume reports whether the sandbox's volume is worth keeping: its
// machine has run, so its home may hold work. A sandbox that ends before
// it ever ran has its volume removed with its machine (Service.end), so
// the row knows whether a failed sandbox still holds one from its running
// segments (FirstRan), which the store reads with it.
func (sb Sandbox) HoldsVolume() bool { return !sb.neverRan() }

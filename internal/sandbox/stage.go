package sandbox

import (
	"sync"
	"time"
)

// Stage is how far a start this replica runs has got, so a create that
// waits can say more than "starting" (berth sandbox create shows it). It
// is known only to the replica running the start, and only while it runs.
type Stage string

// The stages of a start, in order; running follows the last.
const (
	// StageQueued: admitted, waiting for a free start.
	StageQueued Stage = "queued"
	// StageCheckout: an agent run's repository is being checked out on
	// the gateway's host.
	StageCheckout Stage = "checkout"
	// StageMachine: the driver is creating the machine and waiting until
	// it answers (sshd's greeting; an engineer sandbox's repository is
	// checked out inside it first).
	StageMachine Stage = "machine"
)

// Step is a stage and when the start reached it.
type Step struct {
	Stage Stage
	Since time.Time
}

// stages is where each start of this replica is; its zero value is ready.
type stages struct {
	mu sync.Mutex
	at map[ID]Step
}

func (st *stages) set(id ID, stage Stage, now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.at == nil {
		st.at = map[ID]Step{}
	}
	st.at[id] = Step{Stage: stage, Since: now}
}

func (st *stages) clear(id ID) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.at, id)
}

// Progress says how far sb's start has got on this replica: false when
// it is not starting here (another replica starts it, or it is not
// starting).
func (s *Service) Progress(sb Sandbox) (Step, bool) {
	if sb.State != StateStarting {
		return Step{}, false
	}
	s.stages.mu.Lock()
	defer s.stages.mu.Unlock()
	step, ok := s.stages.at[sb.ID]
	return step, ok
}

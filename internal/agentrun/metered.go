package agentrun

import (
	"context"
	"time"

	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
)

// Metered is what the gateway itself metered of one session's model calls
// (SPEC S14): the authoritative side of a run's tokens and cost, beside
// what the agent reported.
type Metered struct {
	Requests int
	Usage    runner.Usage
	// CostUSD is what the gateway charged: what budgets count.
	CostUSD float64
	Models  []string
	// Unmetered counts the successful answers that said no usage (a
	// stream cut short), charged their worst case, UnmeteredCostUSD in
	// all, and no tokens.
	Unmetered        int
	UnmeteredCostUSD float64
}

// MeteredCall is one model call as the gateway metered it.
type MeteredCall struct {
	Model  string // the model that answered
	Status int    // the upstream's HTTP status; 0 when it never answered
	Usage  runner.Usage
	// CostUSD is what it was charged.
	CostUSD float64
	// Metered is false when the answer said no usage: CostUSD is then
	// its worst case and Usage is zero.
	Metered bool
}

// SessionMeter reads what the gateway metered of a sandbox's model calls:
// an agent sandbox's key serves its one run, so all of them are the run's,
// whether or not its CLI could name the session.
type SessionMeter interface {
	MeteredOfSandbox(ctx context.Context, id sandbox.ID, span Span) (Metered, error)
	// MeteredCallsOfSandbox lists them one by one, oldest first, at most
	// limit of them.
	MeteredCallsOfSandbox(ctx context.Context, id sandbox.ID, span Span, limit int) ([]MeteredCall, error)
}

// Span bounds the calls metered of a sandbox to those made From To, both
// included; a zero end is open. A session's runs are its calls in each
// run's own time; any other sandbox's run is all of them.
type Span struct{ From, To time.Time }

// WithSessionMeter joins the gateway's metering to runs.
func WithSessionMeter(m SessionMeter) Option { return func(s *Service) { s.meter = m } }

// maxComparedCalls bounds the calls read one by one to explain a run's
// difference; a run with more is compared on its totals alone.
const maxComparedCalls = 10000

// addMetered puts the gateway's figures on a run and, once it is over,
// how they differ from the agent's and why. A run still going is not
// compared: calls may be in flight on either side.
func (s *Service) addMetered(ctx context.Context, run *Run, session bool) error {
	if s.meter == nil {
		return nil
	}
	var span Span
	if session {
		span = Span{From: run.StartedAt, To: run.EndedAt}
	}
	m, err := s.meter.MeteredOfSandbox(ctx, run.Sandbox, span)
	if err != nil {
		return err
	}
	run.Metered, run.Difference = &m, nil
	if run.State == RunRunning {
		return nil
	}
	c := comparison{runner: run.Runner, agent: run.Telemetry, metered: m, prices: s.prices(), list: runner.ListPrices()}
	if c.needsCalls() {
		if c.calls, err = s.meter.MeteredCallsOfSandbox(ctx, run.Sandbox, span, maxComparedCalls+1); err != nil {
			return err
		}
		if len(c.calls) > maxComparedCalls {
			c.calls = nil
		}
	}
	run.Difference = c.difference()
	return nil
}

// SessionCost is what the gateway charged for all of a session's model
// calls, every run's: with its machine time, the session's cost. ok is
// false without metering.
func (s *Service) SessionCost(ctx context.Context, sb sandbox.Sandbox) (usd float64, ok bool, err error) {
	if s.meter == nil {
		return 0, false, nil
	}
	m, err := s.meter.MeteredOfSandbox(ctx, sb.ID, Span{})
	if err != nil {
		return 0, false, err
	}
	return m.CostUSD, true, nil
}

package sandbox

import (
	"context"
	"fmt"

	"berth.dev/berth/internal/runner"
)

// Metered is what the gateway itself metered of one session's model calls
// (SPEC S14): the authoritative side of a run's tokens, beside what the
// agent reported.
type Metered struct {
	Requests int
	Usage    runner.Usage
	CostUSD  float64
	Models   []string
}

// SessionMeter reads what the gateway metered of a sandbox's model calls:
// an agent sandbox's key serves its one run, so all of them are the run's,
// whether or not its CLI could name the session.
type SessionMeter interface {
	MeteredOfSandbox(ctx context.Context, id ID) (Metered, error)
}

// WithSessionMeter joins the gateway's metering to runs.
func WithSessionMeter(m SessionMeter) Option { return func(s *Service) { s.meter = m } }

// addMetered puts the gateway's figures on a run and says whether they
// differ from the agent's. A run still going is not compared: calls may
// be in flight on either side.
func (s *Service) addMetered(ctx context.Context, run *Run) error {
	if s.meter == nil {
		return nil
	}
	m, err := s.meter.MeteredOfSandbox(ctx, run.Sandbox)
	if err != nil {
		return err
	}
	run.Metered = &m
	run.Mismatch = ""
	if run.State != RunRunning {
		run.Mismatch = mismatch(run.Telemetry.Usage, m.Usage)
	}
	return nil
}

// mismatch words a difference between the agent's tokens and the
// gateway's; "" when they agree. Reasoning is left out: not every CLI
// reports it apart.
func mismatch(agent, gateway runner.Usage) string {
	if agent.Input == gateway.Input && agent.CacheRead == gateway.CacheRead &&
		agent.CacheWrite == gateway.CacheWrite && agent.Output == gateway.Output {
		return ""
	}
	return fmt.Sprintf("the agent reported %s; the gateway metered %s", words(agent), words(gateway))
}

func words(u runner.Usage) string {
	return fmt.Sprintf("%d in, %d cache read, %d cache write, %d out", u.Input, u.CacheRead, u.CacheWrite, u.Output)
}

package gateway

import (
	"context"
	"errors"
	"fmt"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/trigger"
)

// Results are the runs' results as their forge reports tell them, priced
// as the runs' answers are (package trigger's Results and Costs).
type Results struct{ s *Server }

// Results returns the gateway's Results.
func (s *Server) Results() Results { return Results{s} }

var _ trigger.Results = Results{}

// Result is a sandbox's latest run's result: over once its sandbox has
// ended (or, a session, once it waits for its next task), with the
// agent's last words then.
func (r Results) Result(ctx context.Context, id sandbox.ID) (trigger.Result, error) {
	res, err := r.result(ctx, id)
	if err == nil && res.Ended {
		res.Summary = r.s.runs.Summary(ctx, res.Sandbox)
	}
	return res, err
}

// LatestSeq is the number of a sandbox's latest run.
func (r Results) LatestSeq(ctx context.Context, id sandbox.ID) int {
	return r.s.runs.LatestSeq(ctx, id)
}

// result is a run's result without its summary, which reads its log.
func (r Results) result(ctx context.Context, id sandbox.ID) (trigger.Result, error) {
	s := r.s
	sb, err := s.sandboxes.Read(ctx, id)
	if err != nil {
		return trigger.Result{}, err
	}
	out := trigger.Result{Sandbox: sb, Ended: !sb.Live(), Runner: sb.Runner, Model: sb.Model, RunningTime: s.sandboxes.RunningTime(sb)}
	run := s.runOf(ctx, sb)
	if run == nil {
		out.Error = sb.Reason
		return out, nil
	}
	out.Seq = run.Seq
	if sb.Session && sb.State == sandbox.StateSuspended && run.State != api.RunRunning {
		// A session waiting for its next task: this task is over.
		out.Ended = true
	}
	out.Succeeded = run.State == api.RunSucceeded
	out.Error, out.Branch, out.Commit = run.Error, run.Branch, run.Commit
	if out.Error == "" && !out.Succeeded {
		out.Error = sb.Reason
	}
	out.Model = run.Model
	if run.Runner != "" {
		out.Runner = run.Runner
	}
	u := run.Usage
	out.Tokens = u.Input + u.Output + u.CacheRead + u.CacheWrite
	switch {
	case run.Metered != nil:
		usd := run.Metered.CostUSD
		out.ModelUSD = &usd
		mu := run.Metered.Usage
		out.Tokens = max(out.Tokens, mu.Input+mu.Output+mu.CacheRead+mu.CacheWrite)
	case run.CostUSD != nil:
		out.ModelUSD = run.CostUSD
	}
	out.MachineUSD, out.TotalUSD = run.MachineCostUSD, run.TotalCostUSD
	out.EgressRefused = run.EgressRefused
	if run.Review != nil {
		out.Verdict, out.VerdictSummary = run.Review.Outcome, run.Review.Summary
	}
	return out, nil
}

// Spent is what the runs of ids cost so far: their tokens, and dollars
// with machine time where it is priced.
func (r Results) Spent(ctx context.Context, ids []sandbox.ID) (int64, float64, error) {
	var tokens int64
	var usd float64
	for _, id := range ids {
		res, err := r.result(ctx, id) // its cost, not its words
		if errors.Is(err, fault.NotFound) {
			continue // removed since: its cost went with it
		}
		if err != nil {
			return 0, 0, fmt.Errorf("run %s: %w", id, err)
		}
		tokens += res.Tokens
		switch {
		case res.TotalUSD != nil:
			usd += *res.TotalUSD
		case res.ModelUSD != nil:
			usd += *res.ModelUSD
		}
	}
	return tokens, usd, nil
}

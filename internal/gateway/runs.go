package gateway

import (
	"cmp"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
)

// followPoll is how often a followed run log is checked for new bytes.
const followPoll = 250 * time.Millisecond

// runOf adds an agent sandbox's run to its answer. A sandbox without a
// run (an engineer sandbox, or an agent sandbox the deployment runs no
// runner for) answers without one.
func (s *Server) runOf(ctx context.Context, sb sandbox.Sandbox) *api.Run {
	if sb.Purpose != sandbox.PurposeAgent {
		return nil
	}
	run, err := s.runs.Of(ctx, sb)
	if err != nil {
		if !errors.Is(err, fault.NotFound) && ctx.Err() == nil {
			// The sandbox is still worth showing; its run is left out.
			s.log.WarnContext(ctx, "could not read a sandbox's run", "sandbox", sb.ID, "err", err)
		}
		return nil
	}
	out := apiRun(sb, run)
	out.EgressRefused = s.refusedOf(ctx, sb)
	if s.coreHour.Priced() {
		machine := s.coreHour.Cost(s.sandboxes.RunningTime(sb).Seconds() * sb.CPU.Cores())
		total := machine
		switch {
		case sb.Session:
			// A session's cost is all its runs' and its machine time.
			models, _, err := s.runs.SessionCost(ctx, sb)
			if err != nil {
				s.log.WarnContext(ctx, "could not read what a session's runs were charged", "sandbox", sb.ID, "err", err)
			}
			total += models
		case out.Metered != nil:
			total += out.Metered.CostUSD
		case out.CostUSD != nil:
			total += *out.CostUSD
		}
		total = math.Round(total*1e6) / 1e6
		out.MachineCostUSD, out.TotalCostUSD = &machine, &total
	}
	return out
}

// listRuns answers an agent sandbox's runs, oldest first: a session's
// tasks, each with its own telemetry.
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, p account.Principal) {
	runs, sb, err := s.runs.Runs(r.Context(), p, r.PathValue("ref"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.Runs{Runs: []api.Run{}}
	for _, run := range runs {
		out.Runs = append(out.Runs, *apiRun(sb, run))
	}
	writeJSON(w, http.StatusOK, out)
}

func apiRun(sb sandbox.Sandbox, r agentrun.Run) *api.Run {
	t := r.Telemetry
	out := &api.Run{
		Seq: max(r.Seq, 1), Task: cmp.Or(r.Task, sb.Task),
		Runner: r.Runner, Model: cmp.Or(t.Model, r.Model), State: api.RunState(r.State), Error: r.Error,
		Branch: r.Branch, Commit: r.Commit,
		Usage:      apiTokens(t.Usage),
		CostSource: t.Cost.String(), PriceBasis: t.PriceBasis, SessionID: t.SessionID, Turns: t.Turns,
		Lines: r.Lines, IgnoredLines: r.Ignored, StartedAt: r.StartedAt, EndedAt: timePtr(r.EndedAt),
	}
	if t.Cost != runner.CostUnknown {
		usd := t.CostUSD
		out.CostUSD = &usd
	}
	if r.Exited {
		code := r.ExitCode
		out.ExitCode = &code
	}
	if r.Ended != "" {
		out.Ended, out.EndedBy, out.EndedByID = api.State(r.Ended), cmp.Or(r.EndedByName, r.EndedBy), r.EndedBy
		if r.EndedBy == "" {
			out.EndedBy = "berth"
		}
	}
	if m := r.Metered; m != nil {
		out.Metered = &api.Metered{Requests: m.Requests, Usage: apiTokens(m.Usage), CostUSD: m.CostUSD, Models: m.Models, Unmetered: m.Unmetered}
	}
	out.Difference = apiDifference(r.Difference)
	if sb.Role == sandbox.RoleReviewer {
		v := r.Review
		out.Review = &api.Review{Outcome: string(v.Outcome), Summary: v.Summary, SHA256: v.SHA256, Reason: v.Reason, File: v.File, Best: v.Best}
	}
	out.Outputs, out.Results = r.Outputs, r.Results
	return out
}

func apiDifference(d *agentrun.Difference) *api.Difference {
	if d == nil {
		return nil
	}
	out := &api.Difference{Tokens: d.Tokens, Cost: d.Cost, Summary: d.Summary, Causes: []api.Cause{}}
	for _, c := range d.Causes {
		ac := api.Cause{Kind: string(c.Kind), Message: c.Message, Requests: c.Requests}
		if c.Requests > 0 {
			u, usd := apiTokens(c.Usage), c.CostUSD
			ac.Usage, ac.CostUSD = &u, &usd
		}
		out.Causes = append(out.Causes, ac)
	}
	return out
}

func apiTokens(u runner.Usage) api.Tokens {
	return api.Tokens{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite, Reasoning: u.Reasoning}
}

// runLog answers an agent run's log as text. With follow=true the answer
// stays open and carries what the run writes as it writes it, until the
// run is over and everything it wrote has been sent, or the client goes
// away.
func (s *Server) runLog(w http.ResponseWriter, r *http.Request, p account.Principal) {
	follow := false
	if v := r.URL.Query().Get("follow"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.writeError(w, r, fault.Field("follow", "%q is not true or false", v))
			return
		}
		follow = b
	}
	seq := 0
	if v := r.URL.Query().Get("run"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			s.writeError(w, r, fault.Field("run", "%q is not a run's number (1, 2, …)", v))
			return
		}
		seq = n
	}
	f, sb, err := s.runs.RunLog(r.Context(), p, r.PathValue("ref"), seq)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer f.Close()
	// The agent's output is not ours: a browser must not take it for
	// anything but text.
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !follow {
		_, _ = io.Copy(w, f)
		return
	}
	s.followLog(w, r, f, sb)
}

// runVerdict answers the host's copy of a reviewer run's verdict, as text:
// the agent wrote it.
func (s *Server) runVerdict(w http.ResponseWriter, r *http.Request, p account.Principal) {
	f, _, err := s.runs.Verdict(r.Context(), p, r.PathValue("ref"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = io.Copy(w, f)
}

// runDiff answers what a run changed, as text: git's stat and patch of
// its pushed commit against where it started, the branch and commit in
// headers; empty when it pushed nothing (yet).
func (s *Server) runDiff(w http.ResponseWriter, r *http.Request, p account.Principal) {
	c, _, err := s.runs.Diff(r.Context(), p, r.PathValue("ref"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if c.Commit != "" {
		w.Header().Set(api.DiffBranchHeader, c.Branch)
		w.Header().Set(api.DiffCommitHeader, c.Commit)
	}
	if c.Cut {
		w.Header().Set(api.DiffCutHeader, strconv.Itoa(agentrun.MaxDiff))
	}
	_, _ = io.WriteString(w, c.Diff)
}

// followLog sends f as it grows until sb's run is over. A run's log is
// complete before its record says it ended, so one more read after "over"
// leaves nothing behind. A log rewritten from its start (the run followed
// again after its follower stopped) carries the same lines again: reading
// on from the offset already sent skips those sent.
func (s *Server) followLog(w http.ResponseWriter, r *http.Request, f io.Reader, sb sandbox.Sandbox) {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	for {
		over := s.runOver(ctx, sb)
		n, err := io.Copy(w, f)
		if err != nil {
			return // the client went away, or the file cannot be read
		}
		if n > 0 {
			if err := rc.Flush(); err != nil {
				return
			}
		}
		if over {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-s.stopping:
			return // the gateway is going down: the client follows again
		case <-tick.C:
		}
	}
}

// runOver reports whether sb's run has ended. When the run cannot be read
// the answer is cut off, not ended cleanly: a clean end would tell the
// client the run is over when nobody knows.
func (s *Server) runOver(ctx context.Context, sb sandbox.Sandbox) bool {
	run, err := s.runs.Of(ctx, sb)
	switch {
	case errors.Is(err, fault.NotFound):
		return true // no record (the sandbox was deleted): nothing will add to the log
	case err != nil:
		if ctx.Err() == nil {
			s.log.ErrorContext(ctx, "following a run log: cannot read the run", "sandbox", sb.ID, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	return run.State != agentrun.RunRunning
}

// StopStreams ends every followed log: http.Server.Shutdown waits for
// handlers, and a follow would keep it waiting until its run ends. Hand it
// to the server's RegisterOnShutdown.
func (s *Server) StopStreams() { s.stopOnce.Do(func() { close(s.stopping) }) }

// runTask answers an in-machine run's task, as text.
func (s *Server) runTask(w http.ResponseWriter, r *http.Request, p account.Principal) {
	task, err := s.runs.Task(r.Context(), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, task)
}

// runOutput reads an in-machine run's output as it streams in.
func (s *Server) runOutput(w http.ResponseWriter, r *http.Request, p account.Principal) {
	if err := s.runs.Output(r.Context(), p, r.Body); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// maxRunExit bounds an exit report (bodyLimits): its bundle in base64,
// and room for the rest (a verdict is at most 64 KiB).
const maxRunExit = agentrun.MaxBundle/3*4 + 1<<20

// runExit concludes an in-machine run and answers the run as it ended.
func (s *Server) runExit(w http.ResponseWriter, r *http.Request, p account.Principal) {
	var req api.RunExit
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.Bundle) > agentrun.MaxBundle {
		s.writeError(w, r, fault.Field("bundle", "%d bytes, over the %d MiB limit of an in-machine run's work", len(req.Bundle), agentrun.MaxBundle>>20))
		return
	}
	sb, run, err := s.runs.Exit(r.Context(), p, agentrun.Report{ExitCode: req.ExitCode, Commit: req.Commit, Bundle: req.Bundle, Error: req.Error,
		Verdict: req.Verdict, VerdictFile: req.VerdictFile, VerdictError: req.VerdictError})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiRun(sb, run))
}

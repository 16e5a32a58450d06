package agentrun

import (
	"context"
	"fmt"
	"io"
	"time"

	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/kelos"
	"berth.dev/berth/internal/review"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
)

// Follow reads an agent run's output until its machine exits, then
// finishes the run. It belongs to the sandbox service's Run goroutines.
func (s *Service) Follow(ctx context.Context, sb sandbox.Sandbox, work string) {
	f, ok := s.driver.(Follower)
	if !ok {
		return
	}
	s.mu.Lock()
	if s.following[sb.ID] > 0 {
		s.mu.Unlock()
		return
	}
	s.following[sb.ID] = 1
	s.mu.Unlock()
	release := s.hold(ctx, sb.ID)
	defer func() {
		release()
		s.mu.Lock()
		delete(s.following, sb.ID)
		s.mu.Unlock()
	}()
	run, err := s.store.GetRun(ctx, sb.ID)
	if err != nil {
		s.log.ErrorContext(ctx, "agent run without its record", "sandbox", sb.ID, "err", err)
		return
	}
	r, err := runner.Get(run.Runner)
	if err != nil {
		return
	}
	rr := s.readRun(ctx, sb, run, r)
	err = f.Follow(ctx, sb.ID, func(stdout bool, b []byte) { rr.line(ctx, stdout, b) })
	rr.close()
	if ctx.Err() != nil {
		return // the gateway is stopping; the start-up sweep follows again
	}
	if err != nil {
		s.log.WarnContext(ctx, "following a run ended with an error", "sandbox", sb.ID, "err", err)
	}
	s.finishRun(ctx, rr.result(), work)
}

// maxRunLog caps what a run's log keeps: a machine that prints without end
// (or streams it, in-machine) fills neither the disk nor the database.
const maxRunLog = 256 << 20

// runReader reads one run's output, from its first line: every line to
// the run log, a kelos image's markers to its capture, the agent's stream
// to the runner's ParseLine; the telemetry saved every couple of seconds.
// A run's output read again (after a restart, or streamed again by its
// machine) is read from its start: the log is rewritten.
type runReader struct {
	s       *Service
	sb      sandbox.Sandbox
	run     Run
	r       runner.Runner
	tel     runner.Telemetry
	lines   int
	ignored int
	saved   time.Time
	logw    io.WriteCloser
	logged  int64          // bytes written to the log
	limit   int64          // and the most it keeps (maxRunLog)
	capture *kelos.Capture // what a kelos image says beside its agent's stream
	learnt  bool           // the sandbox's learning was ended at its setup's end
	// setupExit is a kelos session's entrypoint's exit at its setup, as
	// the session's runtime told it (setupSeen).
	setupExit int
	setupSeen bool
	// earlier is what a session's earlier runs reported, when the CLI's
	// totals count its whole conversation (runner.ThreadTotals): this
	// run's are its totals since.
	earlier runner.Usage
}

func (s *Service) readRun(ctx context.Context, sb sandbox.Sandbox, run Run, r runner.Runner) *runReader {
	logw, err := s.logs().Write(ctx, logOf(sb.ID, run.Seq))
	if err != nil {
		s.log.ErrorContext(ctx, "run log", "sandbox", sb.ID, "err", err)
	}
	rr := &runReader{s: s, sb: sb, run: run, r: r, tel: runner.Telemetry{Model: run.Model}, saved: s.now(), logw: logw, limit: maxRunLog}
	if sb.Contract == sandbox.ContractKelos {
		rr.capture = &kelos.Capture{}
	}
	if _, ok := r.(runner.ThreadTotals); ok && run.Seq > 1 {
		rr.earlier = s.earlierUsage(ctx, run)
	}
	return rr
}

// earlierUsage sums what a session's runs before run reported.
func (s *Service) earlierUsage(ctx context.Context, run Run) runner.Usage {
	runs, err := s.store.ListRuns(ctx, run.Sandbox)
	if err != nil {
		s.log.WarnContext(ctx, "could not read a session's earlier runs: this run's totals include theirs", "sandbox", run.Sandbox, "err", err)
		return runner.Usage{}
	}
	var u runner.Usage
	for _, r := range runs {
		if r.Seq < run.Seq {
			u = u.Plus(r.Telemetry.Usage)
		}
	}
	return u
}

// line takes one line of the machine's output, stdout or stderr.
func (rr *runReader) line(ctx context.Context, stdout bool, b []byte) {
	if rr.logw != nil && rr.logged <= rr.limit {
		prefix := ""
		if !stdout {
			prefix = "stderr: "
		}
		if rr.logged += int64(len(prefix) + len(b) + 1); rr.logged > rr.limit {
			// The telemetry still reads every line: a run's totals come last.
			_, _ = fmt.Fprintf(rr.logw, "berth: the run log stops here, at %d bytes; the run's telemetry still counts what follows\n", rr.limit)
		} else {
			_, _ = fmt.Fprintf(rr.logw, "%s%s\n", prefix, b)
		}
	}
	if rr.capture != nil && !stdout && rr.sb.Session {
		if code, ok := kelos.SessionSetup(string(b)); ok {
			rr.setupExit, rr.setupSeen = code, true
			return
		}
	}
	if rr.capture != nil {
		consumed := rr.capture.Line(stdout, b)
		rr.setupEnded(ctx)
		if consumed {
			return
		}
	}
	if !stdout {
		return
	}
	rr.lines++
	if rr.r.ParseLine(&rr.tel, b).Ignored() {
		rr.ignored++
		rr.s.log.DebugContext(ctx, "run output line not understood", "sandbox", rr.sb.ID, "runner", rr.run.Runner)
	}
	if now := rr.s.now(); now.Sub(rr.saved) > 2*time.Second {
		rr.saved = now
		rr.save(ctx)
	}
}

// setupEnded ends a learning sandbox's learning once its kelos image
// says its setup command ended, well or not: what setup reached is all
// its agent reaches. (Its agent's first model call ends it too, at the
// gateway, whatever the image prints.)
func (rr *runReader) setupEnded(ctx context.Context) {
	if rr.learnt || rr.s.learning == nil || rr.sb.Egress != string(egress.ModeLearn) {
		return
	}
	if st := rr.capture.Setup(); st == kelos.SetupOK || st == kelos.SetupError {
		rr.learnt = true
		rr.s.learning.EndLearning(ctx, rr.sb, "its setup command ended")
	}
}

// save writes what the output said so far to the run's record, and
// nothing else of it: the run may have been ended meanwhile (its sandbox
// terminated), and that record stands.
func (rr *runReader) save(ctx context.Context) {
	if err := rr.s.store.PutRunOutput(ctx, rr.result()); err != nil {
		rr.s.log.WarnContext(ctx, "could not save a run's telemetry", "sandbox", rr.sb.ID, "err", err)
	}
}

func (rr *runReader) close() {
	if rr.logw != nil {
		if err := rr.logw.Close(); err != nil {
			rr.s.log.Warn("run log not written whole", "sandbox", rr.sb.ID, "err", err)
		}
	}
}

// result is the run with what its output said: its telemetry and, of a
// kelos image, its outputs, results and how far its setup command got.
func (rr *runReader) result() Run {
	run, tel := rr.run, rr.tel
	if rr.capture != nil {
		run.Outputs, run.Results, run.Setup = rr.capture.Outputs(), rr.capture.Results(), rr.capture.Setup()
		// Totals from the markers count where the stream said nothing.
		t := kelos.TotalsOf(run.Results)
		if t.Tokens {
			tel.FillUsage(runner.Usage{Input: t.InputTokens, Output: t.OutputTokens})
		}
		if t.Cost {
			tel.FillCost(t.CostUSD)
		}
	}
	if tel.Usage != (runner.Usage{}) {
		tel.Usage = tel.Usage.Since(rr.earlier)
	}
	if rr.setupSeen && rr.setupExit != 0 {
		run.State = RunFailed
		run.Error = fmt.Sprintf("the image's session setup (%s=1 %s) exited %d, so the agent did not run", kelos.SessionSetupOnly, kelos.Entrypoint, rr.setupExit)
	}
	run.Telemetry, run.Lines, run.Ignored = tel, rr.lines, rr.ignored
	return run
}

// finishRun records how a run ended, pushes its work after a clean exit,
// and ends the sandbox: terminated after a clean run, failed otherwise.
// When a kelos image's setup command failed (run.Setup), the run failed
// before its agent ran, and the reason says so.
func (s *Service) finishRun(ctx context.Context, run Run, work string) {
	sb, err := s.store.GetSandbox(ctx, run.Sandbox)
	if err != nil {
		return
	}
	if work == "" {
		work = s.work.Dir(sb) // followed again after a restart
	}
	removePrompt(sb, work)
	run.Telemetry.Settle(s.prices())
	run.EndedAt = s.now()
	if sb.State != sandbox.StateRunning && sb.State != sandbox.StateStarting {
		// Terminated or expired meanwhile: nothing to push, and no exit
		// of its own.
		run.State, run.Error, run.Ended = RunFailed, "the sandbox ended ("+string(sb.State)+") before the run did", sb.State
		if saved, err := s.store.GetRun(ctx, sb.ID); err == nil && saved.State != RunRunning {
			// What end said, with the telemetry read since.
			run.Error, run.EndedAt, run.Ended, run.EndedBy = saved.Error, saved.EndedAt, saved.Ended, saved.EndedBy
		}
		run.holdReview(run.Error)
		s.removeCheckout(ctx, sb)
		s.saveRun(ctx, run)
		return
	}
	m, err := s.driver.Inspect(ctx, sb.ID)
	var exited time.Time
	switch {
	case err != nil:
		run.State, run.Error, run.Ended = RunFailed, "its machine is gone", sandbox.StateFailed
	case m.Status == sandbox.MachineRunning:
		return // not over yet: the next sweep follows again
	default:
		run.Exited, run.ExitCode = true, m.ExitCode
		// Followed again after a restart, it may have exited long ago:
		// the run ended, and its sandbox's clock stops, when it did.
		exited = sb.StoppedAt(m.FinishedAt, s.now())
		run.EndedAt = exited
	}
	s.concludeRun(ctx, sb, run, s.hostPush(work, run.Onto), func(dest string) review.Result { return review.Collect(work, dest) }, exited)
}

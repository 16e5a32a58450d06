package agentrun

import (
	"context"
	"os"
	"path/filepath"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/review"
	"berth.dev/berth/internal/sandbox"
)

// verdictPath is where the host keeps its copy of a reviewer run's verdict,
// beside the run's log.
func (s *Service) verdictPath(id sandbox.ID) string {
	return filepath.Join(s.cfg.LogDir, string(id)+".verdict.json")
}

// verdictFunc makes the host's copy of a reviewer run's verdict at dest
// and judges it: found in the host's checkout, or as an in-machine run
// sent it.
type verdictFunc func(dest string) review.Result

// digestVerdict settles a reviewer run's review once its machine is done
// with the checkout: the verdict is copied out beside the run's log and
// the copy digested. It counts only for a run that succeeded; any other is
// held with the run's error, the copy kept for the human who decides.
func (s *Service) digestVerdict(ctx context.Context, run *Run, verdict verdictFunc) {
	if err := os.MkdirAll(s.cfg.LogDir, 0o700); err != nil {
		run.Review = run.Review.Hold("no place for the verdict's copy: " + err.Error())
		return
	}
	run.Review = verdict(s.verdictPath(run.Sandbox))
	if run.State != RunSucceeded {
		run.Review = run.Review.Hold(run.Error)
	}
	s.log.InfoContext(ctx, "review digested", "sandbox", run.Sandbox, "outcome", run.Review.Outcome,
		"reason", run.Review.Reason, "file", run.Review.File)
}

// holdReview holds a reviewer run's review for a human when the run ends
// without its verdict digested; an author's run has none.
func (r *Run) holdReview(reason string) {
	if r.Review.Outcome != "" {
		r.Review = r.Review.Hold(reason)
	}
}

// Verdict opens the host's copy of the verdict of a reviewer run the
// caller may see.
func (s *Service) Verdict(ctx context.Context, p account.Principal, ref string) (*os.File, sandbox.Sandbox, error) {
	return s.openRunFile(ctx, p, ref, s.verdictPath, "review verdict")
}

package agentrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/sandbox"
)

// Best of N (SPEC S13): a reviewer that compares several agent
// sandboxes' work (sb.Compare) finds each one's pushed change in its
// checkout, AttemptsDir/<name>.diff (git's stat and patch of the
// attempt's commit against where the reviewer's branch is), is told so
// at the end of its prompt, and names the best in its verdict's "best".

// AttemptsDir is where a comparing reviewer's checkout holds the attempts.
const AttemptsDir = ".berth-attempts"

// attempt is one compared sandbox's work.
type attempt struct {
	sb     sandbox.Sandbox
	commit string
}

// attempts reads the work of the sandboxes the reviewer sb compares:
// each must have pushed some, and its latest run be over.
func (s *Service) attempts(ctx context.Context, sb sandbox.Sandbox) ([]attempt, error) {
	var out []attempt
	for _, id := range sb.Compare {
		other, err := s.store.GetSandbox(ctx, id)
		if errors.Is(err, fault.NotFound) {
			return nil, fault.Field("compare", "sandbox %s is gone", id)
		}
		if err != nil {
			return nil, err
		}
		run, err := s.store.GetRun(ctx, id)
		switch {
		case errors.Is(err, fault.NotFound):
			return nil, fault.Field("compare", "%s has run no task yet: there is nothing of its to compare", other.Name)
		case err != nil:
			return nil, err
		case run.State == RunRunning:
			return nil, fault.Field("compare", "%s is still running its task: compare once it is over", other.Name)
		case run.Commit == "":
			return nil, fault.Field("compare", "%s pushed no work (its run %s): there is nothing of its to compare", other.Name, run.State)
		}
		out = append(out, attempt{sb: other, commit: run.Commit})
	}
	return out, nil
}

// checkCompare refuses, at create, a comparing reviewer this deployment
// cannot give its attempts, or whose attempts are not there to compare.
func (s *Service) checkCompare(ctx context.Context, sb sandbox.Sandbox) error {
	if len(sb.Compare) == 0 {
		return nil
	}
	switch {
	case s.work == nil || s.inMachine():
		return fault.Field("compare", "this deployment's runs keep no checkout on its host to put the attempts in")
	case !takesPromptFile(sb):
		return fault.Field("compare", "a kelos image's reviewer takes its task as an argument, where the attempts cannot be named: use a class of berth's contract")
	}
	_, err := s.attempts(ctx, sb)
	return err
}

// putAttempts writes each attempt the reviewer sb compares into its
// checkout dir, and returns the note its prompt ends with.
func (s *Service) putAttempts(ctx context.Context, sb sandbox.Sandbox, dir string) (string, error) {
	all, err := s.attempts(ctx, sb)
	if err != nil {
		return "", err
	}
	into := filepath.Join(dir, AttemptsDir)
	if err := os.RemoveAll(into); err != nil {
		return "", err
	}
	if err := os.Mkdir(into, 0o755); err != nil {
		return "", err
	}
	var names []string
	for _, a := range all {
		// Against where the reviewer's checkout is: a session's forks
		// share its work, which the change then leaves out.
		base := a.sb
		base.Branch = sb.Branch
		diff, cut, err := s.work.Diff(ctx, base, a.commit)
		if err != nil {
			return "", fmt.Errorf("the work of %s: %w", a.sb.Name, err)
		}
		if cut {
			diff += fmt.Sprintf("\n[berth: cut at %d bytes]\n", MaxDiff)
		}
		if err := os.WriteFile(filepath.Join(into, a.sb.Name+".diff"), []byte(diff), 0o644); err != nil {
			return "", err
		}
		names = append(names, a.sb.Name)
	}
	if err := exclude(dir, "/"+AttemptsDir+"/"); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n\n---\nberth: compare %d attempts at one task and judge which is best. Each is the change one agent pushed, as git's stat and patch:\n", len(all))
	for _, a := range all {
		fmt.Fprintf(&b, "- %s/%s.diff: %s at %s\n", AttemptsDir, a.sb.Name, strings.TrimPrefix(forge.AgentBranch(a.sb.Name), "refs/heads/"), a.commit)
	}
	fmt.Fprintf(&b, "Write your verdict to /work/.berth-review-verdict.json with \"best\" set to the name of the best attempt (one of %s), beside \"verdict\" (approve or request_changes, of that attempt) and \"summary\".\n",
		strings.Join(names, ", "))
	return b.String(), nil
}

// judgeBest keeps the best attempt the verdict of the comparing reviewer
// sb names (review.Judge bounded it), holding a verdict that names none
// of those compared.
func (s *Service) judgeBest(ctx context.Context, sb sandbox.Sandbox, run *Run) {
	if len(sb.Compare) == 0 {
		run.Review.Best = ""
		return
	}
	var names []string
	for _, id := range sb.Compare {
		if other, err := s.store.GetSandbox(ctx, id); err == nil {
			names = append(names, other.Name)
		}
	}
	best := run.Review.Best
	if !slices.Contains(names, best) {
		run.Review.Best = ""
		if run.Review.Outcome != "" {
			run.Review = run.Review.Hold(fmt.Sprintf("the verdict names %q best, which is none of the attempts compared (%s)", best, strings.Join(names, ", ")))
		}
	}
}

// exclude adds pattern to the checkout dir's .git/info/exclude, once.
func exclude(dir, pattern string) error {
	path := filepath.Join(dir, ".git", "info", "exclude")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if b, err := os.ReadFile(path); err == nil && slices.Contains(strings.Split(string(b), "\n"), pattern) {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString("\n" + pattern + "\n")
	return err
}

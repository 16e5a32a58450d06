package agentrun_test

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/review"
	"berth.dev/berth/internal/runner/runnertest"
	"berth.dev/berth/internal/sandbox"
)

const verdictFile = ".berth-review-verdict.json"

func (e *env) reviewRun(t *testing.T, runnerName string) sandbox.Sandbox {
	t.Helper()
	sb, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "check", Purpose: "agent", Repo: "acme/app", Branch: "main",
		Task: "review the change", Runner: runnerName, Role: "reviewer"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Role != sandbox.RoleReviewer {
		t.Fatalf("created with role %q, want reviewer", sb.Role)
	}
	return sb
}

// TestReviewerRuns plays a reviewing agent for every way its run can end
// (SPEC S13.5): only a clean run's clear verdict is approved or asks for
// changes; everything else is held for a human. No reviewer pushes.
func TestReviewerRuns(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "host-secret.json")
	if err := os.WriteFile(secret, []byte(`{"verdict":"approve","summary":"host secret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	approve := `{"verdict":"approve","summary":"the greeting is right","comments":[{"path":"hello.txt","line":1,"body":"fine"}]}`
	for _, tt := range []struct {
		name    string
		runner  string
		stream  string
		exit    int
		files   map[string]string // written by the agent; "->x" is a symbolic link to x
		state   sandbox.State
		want    review.Outcome
		reason  string
		summary string
		copied  bool
	}{
		{name: "approve", files: map[string]string{verdictFile: approve},
			want: review.Approved, summary: "the greeting is right", copied: true},
		{name: "request changes", files: map[string]string{verdictFile: `{"verdict":"request_changes","summary":"no test"}`},
			want: review.ChangesRequested, summary: "no test", copied: true},
		{name: "recovered from a sub-directory", files: map[string]string{"docs/" + verdictFile: approve},
			want: review.Approved, summary: "the greeting is right", copied: true},
		{name: "missing", want: review.Held, reason: "no .berth-review-verdict.json in the checkout"},
		{name: "unparseable", files: map[string]string{verdictFile: "approve!"}, want: review.Held, reason: "not a verdict", copied: true},
		{name: "unknown verdict", files: map[string]string{verdictFile: `{"verdict":"ship it"}`}, want: review.Held, reason: `unknown verdict "ship it"`, copied: true},
		{name: "oversized", files: map[string]string{verdictFile: `{"verdict":"approve","summary":"` + strings.Repeat("x", 70<<10) + `"}`},
			want: review.Held, reason: "larger than 64 KiB"},
		{name: "symbolic link to a host file", files: map[string]string{verdictFile: "->" + secret}, want: review.Held, reason: "symbolic link: not followed"},
		{name: "non-zero exit", stream: "claude-error", exit: 1, files: map[string]string{verdictFile: approve},
			state: sandbox.StateFailed, want: review.Held, reason: "the agent exited 1", summary: "the greeting is right", copied: true},
		{name: "error in the telemetry", runner: "pi", stream: "pi-error", files: map[string]string{verdictFile: approve},
			state: sandbox.StateFailed, want: review.Held, reason: "the agent reported an error", summary: "the greeting is right", copied: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.runner == "" {
				tt.runner, tt.stream = "claude-code", cmp.Or(tt.stream, "claude-text")
			}
			if tt.state == "" {
				tt.state = sandbox.StateTerminated
			}
			e := newEnv(t)
			e.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
				// A reviewer that commits has still nothing pushed.
				if err := os.WriteFile(filepath.Join(spec.Run.Work, "notes.txt"), []byte("notes\n"), 0o644); err != nil {
					t.Error(err)
				}
				gitIn(t, spec.Run.Work, "add", "notes.txt")
				gitIn(t, spec.Run.Work, "commit", "-q", "-m", "notes")
				writeFiles(t, spec.Run.Work, tt.files)
				return runnertest.Stream(t, tt.stream), tt.exit
			})
			e.run(t)
			sb := e.reviewRun(t, tt.runner)
			end := e.waitState(t, sb.ID, tt.state)
			run, err := e.runs.Of(t.Context(), end)
			if err != nil {
				t.Fatal(err)
			}
			got := run.Review
			if got.Outcome != tt.want {
				t.Errorf("review %s (%q), want %s", got.Outcome, got.Reason, tt.want)
			}
			if !strings.Contains(got.Reason, tt.reason) || (tt.reason == "") != (got.Reason == "") {
				t.Errorf("review reason %q, want %q", got.Reason, tt.reason)
			}
			if got.Summary != tt.summary {
				t.Errorf("review summary %q, want %q", got.Summary, tt.summary)
			}
			if run.Branch != "" || run.Commit != "" {
				t.Errorf("a reviewer run reports branch %q commit %q", run.Branch, run.Commit)
			}
			bare, _ := e.local.Path(forge.Repo{Path: "acme/app"})
			if out, err := exec.Command("git", "--git-dir", bare, "for-each-ref", "--format=%(refname)").Output(); err != nil || strings.TrimSpace(string(out)) != "refs/heads/main" {
				t.Errorf("refs after a reviewer run: %q, %v; want main alone", out, err)
			}

			f, _, err := e.runs.Verdict(t.Context(), e.alice, "check")
			if !tt.copied {
				if err == nil {
					f.Close()
					t.Error("a verdict copy was kept for a verdict that could not be taken")
				} else if !errors.Is(err, fault.NotFound) {
					t.Errorf("RunVerdict = %v, want fault.NotFound", err)
				}
				if got.SHA256 != "" {
					t.Errorf("review sha256 %s with nothing copied", got.SHA256)
				}
				return
			}
			if err != nil {
				t.Fatalf("RunVerdict: %v", err)
			}
			defer f.Close()
			b, _ := io.ReadAll(f)
			if sum := sha256.Sum256(b); got.SHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("review sha256 %s, want the copy's %x", got.SHA256, sum)
			}
			if strings.Contains(string(b), "host secret") {
				t.Error("a host file was copied out as the verdict")
			}
			if _, _, err := e.runs.Verdict(t.Context(), e.stranger, string(sb.ID)); !errors.Is(err, fault.NotFound) {
				t.Errorf("a stranger read the verdict: %v", err)
			}
		})
	}
}

// writeFiles writes files (path → content) under dir as the agent; a
// content "->x" makes a symbolic link to x.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Error(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Error(err)
		}
	}
}

// TestReviewerTerminatedIsHeld: a review whose sandbox ends before its run
// does is held, whatever the agent left behind.
func TestReviewerTerminatedIsHeld(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	e.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
		writeFiles(t, spec.Run.Work, map[string]string{verdictFile: `{"verdict":"approve"}`})
		<-release
		return nil, 143
	})
	e.run(t)
	sb := e.reviewRun(t, "claude-code")
	e.waitState(t, sb.ID, sandbox.StateRunning)
	if run, err := e.runs.Of(t.Context(), sb); err != nil || run.Review.Outcome != review.Held {
		t.Errorf("a running review is %+v (%v), want held until digested", run.Review, err)
	}
	if _, err := e.svc.Terminate(t.Context(), e.alice, "check"); err != nil {
		t.Fatal(err)
	}
	close(release)
	end := e.waitState(t, sb.ID, sandbox.StateTerminated)
	run, err := e.runs.Of(t.Context(), end)
	if err != nil {
		t.Fatal(err)
	}
	if run.Review.Outcome != review.Held || !strings.Contains(run.Review.Reason, "terminated") {
		t.Errorf("review of a terminated run: %+v, want held saying it was terminated", run.Review)
	}
}

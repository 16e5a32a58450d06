package review_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"berth.dev/berth/internal/review"
)

const (
	approve = `{"verdict":"approve","summary":"looks right","comments":[{"path":"main.go","line":3,"body":"nit"}]}`
	changes = `{"verdict":"request_changes","summary":"the test is missing"}`
)

// put writes files (path → content) under dir; a content starting with
// "->" makes a symbolic link to the rest.
func put(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestCollect(t *testing.T) {
	// A file of the host's the agent must never get copied out.
	secret := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(secret, []byte(`{"verdict":"approve","summary":"host secret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Dir(secret)
	if err := os.WriteFile(filepath.Join(outside, review.FileName), []byte(approve), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		files   map[string]string
		want    review.Outcome
		file    string // where it was found
		reason  string // in the reason of a hold
		summary string
		copied  bool
	}{
		{name: "approve", files: map[string]string{review.FileName: approve}, want: review.Approved, file: review.FileName, summary: "looks right", copied: true},
		{name: "request changes", files: map[string]string{review.FileName: changes}, want: review.ChangesRequested, file: review.FileName, summary: "the test is missing", copied: true},
		{name: "missing", files: map[string]string{"README": "hi"}, want: review.Held, reason: "no .berth-review-verdict.json in the checkout"},
		{name: "not JSON", files: map[string]string{review.FileName: "LGTM!"}, want: review.Held, reason: "not a verdict", file: review.FileName, copied: true},
		{name: "unknown verdict", files: map[string]string{review.FileName: `{"verdict":"lgtm"}`}, want: review.Held, reason: `unknown verdict "lgtm"`, file: review.FileName, copied: true},
		{name: "no verdict", files: map[string]string{review.FileName: `{"summary":"fine"}`}, want: review.Held, reason: "no verdict", file: review.FileName, copied: true},
		{name: "verdict of the wrong type", files: map[string]string{review.FileName: `{"verdict":true}`}, want: review.Held, reason: "not a verdict", file: review.FileName, copied: true},
		{name: "two objects", files: map[string]string{review.FileName: approve + `{"verdict":"request_changes"}`}, want: review.Held, reason: "more follows", file: review.FileName, copied: true},
		{name: "oversized", files: map[string]string{review.FileName: `{"verdict":"approve","summary":"` + strings.Repeat("a", review.MaxSize) + `"}`}, want: review.Held, reason: "larger than 64 KiB", file: review.FileName},
		{name: "symbolic link to a host file", files: map[string]string{review.FileName: "->" + secret}, want: review.Held, reason: "symbolic link: not followed", file: review.FileName},
		{name: "symbolic link inside the checkout", files: map[string]string{"v.json": approve, review.FileName: "->v.json"}, want: review.Held, reason: "symbolic link: not followed", file: review.FileName},
		{name: "a root link is not passed over for another verdict", files: map[string]string{review.FileName: "->" + secret, "sub/" + review.FileName: approve}, want: review.Held, reason: "symbolic link", file: review.FileName},
		{name: "a directory", files: map[string]string{review.FileName + "/x": approve}, want: review.Held, reason: "not a regular file", file: review.FileName},
		{name: "recovered from a sub-directory", files: map[string]string{"sub/" + review.FileName: approve}, want: review.Approved, file: "sub/" + review.FileName, summary: "looks right", copied: true},
		{name: "shallowest first, then byte order", files: map[string]string{
			"a/x/" + review.FileName: approve, "c/" + review.FileName: approve, "b/" + review.FileName: changes,
		}, want: review.ChangesRequested, file: "b/" + review.FileName, summary: "the test is missing", copied: true},
		{name: "not in .git", files: map[string]string{".git/" + review.FileName: approve}, want: review.Held, reason: "no .berth-review-verdict.json"},
		{name: "too deep", files: map[string]string{"a/b/c/d/e/" + review.FileName: approve}, want: review.Held, reason: "no .berth-review-verdict.json"},
		{name: "deepest searched", files: map[string]string{"a/b/c/d/" + review.FileName: approve}, want: review.Approved, file: "a/b/c/d/" + review.FileName, summary: "looks right", copied: true},
		{name: "a linked directory is not searched", files: map[string]string{"sub": "->" + outside}, want: review.Held, reason: "no .berth-review-verdict.json"},
		{name: "a link found in a sub-directory", files: map[string]string{"sub/" + review.FileName: "->" + secret}, want: review.Held, reason: "symbolic link: not followed", file: "sub/" + review.FileName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkout, logs := t.TempDir(), t.TempDir()
			put(t, checkout, tt.files)
			dest := filepath.Join(logs, "sbx_1.verdict.json")
			got := review.Collect(checkout, dest)
			if got.Outcome != tt.want {
				t.Errorf("Outcome = %s (%s), want %s", got.Outcome, got.Reason, tt.want)
			}
			if tt.want == review.Held && !strings.Contains(got.Reason, tt.reason) {
				t.Errorf("Reason = %q, want it to say %q", got.Reason, tt.reason)
			}
			if tt.want != review.Held && got.Reason != "" {
				t.Errorf("Reason = %q for a review not held", got.Reason)
			}
			if got.File != tt.file {
				t.Errorf("File = %q, want %q", got.File, tt.file)
			}
			if got.Summary != tt.summary {
				t.Errorf("Summary = %q, want %q", got.Summary, tt.summary)
			}
			copy, err := os.ReadFile(dest)
			switch {
			case !tt.copied && !errors.Is(err, os.ErrNotExist):
				t.Errorf("a copy was written (%q, %v); want none", copy, err)
			case !tt.copied && got.SHA256 != "":
				t.Errorf("SHA256 = %s with nothing copied", got.SHA256)
			case tt.copied && err != nil:
				t.Errorf("no copy: %v", err)
			case tt.copied:
				sum := sha256.Sum256(copy)
				if got.SHA256 != hex.EncodeToString(sum[:]) {
					t.Errorf("SHA256 = %s, want the copy's %x", got.SHA256, sum)
				}
				if fi, _ := os.Lstat(dest); fi == nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
					t.Errorf("the copy is %v, want a regular file of mode 0600", fi)
				}
			}
			if strings.Contains(string(copy), "host secret") {
				t.Error("the host's file was copied out")
			}
		})
	}
}

// TestCollectRefusesSpecialFiles: a FIFO must not hang the host, and a
// hard link (to what the agent cannot reach, or can) is not taken.
func TestCollectRefusesSpecialFiles(t *testing.T) {
	t.Run("fifo", func(t *testing.T) {
		checkout := t.TempDir()
		if err := syscall.Mkfifo(filepath.Join(checkout, review.FileName), 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		got := review.Collect(checkout, filepath.Join(t.TempDir(), "v.json"))
		if got.Outcome != review.Held || !strings.Contains(got.Reason, "not a regular file") {
			t.Errorf("a FIFO: %s (%q), want held as not a regular file", got.Outcome, got.Reason)
		}
	})
	t.Run("hard link", func(t *testing.T) {
		checkout := t.TempDir()
		put(t, checkout, map[string]string{"v.json": approve})
		if err := os.Link(filepath.Join(checkout, "v.json"), filepath.Join(checkout, review.FileName)); err != nil {
			t.Fatal(err)
		}
		got := review.Collect(checkout, filepath.Join(t.TempDir(), "v.json"))
		if got.Outcome != review.Held || !strings.Contains(got.Reason, "hard link") {
			t.Errorf("a hard link: %s (%q), want held", got.Outcome, got.Reason)
		}
	})
}

func TestHoldKeepsWhatWasRead(t *testing.T) {
	r := review.Result{Outcome: review.Approved, Summary: "fine", SHA256: "ab", File: review.FileName}
	got := r.Hold("the agent exited 1")
	want := review.Result{Outcome: review.Held, Summary: "fine", SHA256: "ab", File: review.FileName, Reason: "the agent exited 1"}
	if got != want {
		t.Errorf("Hold = %+v, want %+v", got, want)
	}
	if p := review.Pending(); p.Outcome != review.Held {
		t.Errorf("Pending() = %+v: a review not yet digested must be held", p)
	}
}

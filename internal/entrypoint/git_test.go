package entrypoint_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// bareRepo makes dir/app.git with a commit on main (README) and one more on
// feature (FEATURE), using real git isolated from the user's configuration.
func bareRepo(t *testing.T) string {
	t.Helper()
	needCommand(t, "git")
	dir := t.TempDir()
	git := func(wd string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = wd
		cmd.Env = append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	bare := filepath.Join(dir, "app.git")
	work := filepath.Join(dir, "work")
	git(dir, "init", "-q", "--bare", "-b", "main", bare)
	git(dir, "init", "-q", "-b", "main", work)
	write(t, filepath.Join(work, "README"), "hello\n")
	git(work, "add", "README")
	git(work, "commit", "-q", "-m", "first")
	git(work, "checkout", "-q", "-b", "feature")
	write(t, filepath.Join(work, "FEATURE"), "feature\n")
	git(work, "add", "FEATURE")
	git(work, "commit", "-q", "-m", "feature")
	git(work, "push", "-q", bare, "main", "feature")
	return bare
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func agentVars(repo, branch string) map[string]string {
	return map[string]string{
		"BERTH_SANDBOX_ID": "sbx_3", "BERTH_SANDBOX_PURPOSE": "agent",
		"BERTH_REPO": repo, "BERTH_BRANCH": branch,
		"GIT_CONFIG_NOSYSTEM": "1",
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestCheckout(t *testing.T) {
	bare := bareRepo(t)
	tests := []struct {
		name, branch      string
		wantFeature       bool
		wantBranchInClone string
	}{
		{"default branch", "", false, "main"},
		{"at a branch", "feature", true, "feature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, agentVars(bare, tt.branch))
			if code := h.main("true"); code != 0 {
				t.Fatalf("Main = %d, want 0 (the agent ran and exited 0); stderr:\n%s", code, h.stderr.String())
			}
			clone := filepath.Join(h.home, "app")
			if !exists(filepath.Join(clone, "README")) {
				t.Fatalf("~/app/README missing after the checkout; stderr:\n%s", h.stderr.String())
			}
			if got := exists(filepath.Join(clone, "FEATURE")); got != tt.wantFeature {
				t.Errorf("~/app/FEATURE exists = %v, want %v", got, tt.wantFeature)
			}
			head := h.read("app/.git/HEAD")
			if want := "ref: refs/heads/" + tt.wantBranchInClone + "\n"; head != want {
				t.Errorf("~/app/.git/HEAD = %q, want %q", head, want)
			}

			// A second start (resume) keeps the checkout and its changes.
			write(t, filepath.Join(clone, "WIP"), "mine\n")
			h.main("true")
			if !exists(filepath.Join(clone, "WIP")) {
				t.Errorf("~/app/WIP lost on the second start")
			}
			if n := countClones(h.runs); n != 1 {
				t.Errorf("git clone ran %d times over two starts, want once", n)
			}
		})
	}
}

func countClones(runs [][]string) int {
	n := 0
	for _, argv := range runs {
		if len(argv) > 1 && argv[0] == "git" && argv[1] == "clone" {
			n++
		}
	}
	return n
}

func TestCheckoutShallowOverFileURL(t *testing.T) {
	bare := bareRepo(t)
	h := newHarness(t, agentVars("file://"+bare, "feature"))
	h.main("true")
	out, err := exec.Command("git", "-C", filepath.Join(h.home, "app"), "rev-list", "--count", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-list in the clone: %v; stderr:\n%s", err, h.stderr.String())
	}
	if got := strings.TrimSpace(string(out)); got != "1" {
		t.Errorf("commits in the clone = %s, want 1 (shallow)", got)
	}
}

func TestCheckoutFails(t *testing.T) {
	needCommand(t, "git")
	missing := filepath.Join(t.TempDir(), "gone.git")
	h := newHarness(t, agentVars(missing, ""))
	if code := h.main("true"); code != 1 {
		t.Errorf("Main = %d, want 1", code)
	}
	if len(h.execs) != 0 {
		t.Errorf("the agent was exec'd after a failed checkout: %v", h.execs)
	}
	if !strings.Contains(h.stderr.String(), "fatal:") {
		t.Errorf("stderr lacks git's message:\n%s", h.stderr.String())
	}
	if _, err := os.Stat(filepath.Join(h.home, "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("~/gone left behind by a failed clone (err %v)", err)
	}
}

func TestGitAuthor(t *testing.T) {
	needCommand(t, "git")
	config := func(h *harness, key string) string {
		out, _ := exec.Command("git", "config", "--file", filepath.Join(h.home, ".gitconfig"), key).Output()
		return strings.TrimSpace(string(out))
	}

	h := newHarness(t, agentVars("", ""))
	h.vars["BERTH_GIT_AUTHOR_NAME"] = "Ada O'Lovelace"
	h.vars["BERTH_GIT_AUTHOR_EMAIL"] = "ada@example.com"
	h.main("true")
	if got := config(h, "user.name"); got != "Ada O'Lovelace" {
		t.Errorf("user.name = %q, want %q", got, "Ada O'Lovelace")
	}
	if got := config(h, "user.email"); got != "ada@example.com" {
		t.Errorf("user.email = %q, want %q", got, "ada@example.com")
	}

	h = newHarness(t, agentVars("", ""))
	h.main("true")
	if exists(filepath.Join(h.home, ".gitconfig")) {
		t.Errorf("~/.gitconfig written without an author given")
	}
}

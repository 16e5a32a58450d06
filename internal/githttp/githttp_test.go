package githttp_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/githttp"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitErr runs git expecting a failure and returns its output.
func gitErr(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("git %s succeeded, want it refused:\n%s", strings.Join(args, " "), out)
	}
	return string(out)
}

// bareRepo makes a bare repository with one commit on main.
func bareRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	os.MkdirAll(work, 0o755)
	git(t, work, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, "README"), []byte("hello\n"), 0o644)
	git(t, work, "add", ".")
	git(t, work, "commit", "-q", "-m", "init")
	bare := filepath.Join(dir, "app.git")
	git(t, dir, "clone", "-q", "--bare", work, bare)
	return bare
}

func TestPushRulesOverRealGit(t *testing.T) {
	bare := bareRepo(t)
	var mu sync.Mutex
	var pushed, refusedRefs []string
	rules := &forge.PushRules{DefaultBranch: "main", Only: forge.AgentBranch("dev"), Created: map[string]bool{}}
	h := githttp.New("", slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest := strings.TrimPrefix(r.URL.Path, "/app.git")
		h.Serve(w, r, githttp.Target{Dir: bare, User: "sbx_1", Rules: rules,
			Refused: func(_ context.Context, _ []forge.RefUpdate, why map[string]string) {
				mu.Lock()
				defer mu.Unlock()
				for ref := range why {
					refusedRefs = append(refusedRefs, ref)
				}
			},
			Pushed: func(_ context.Context, done []forge.RefUpdate) error {
				mu.Lock()
				defer mu.Unlock()
				for _, u := range done {
					pushed = append(pushed, u.Ref)
					if u.IsCreate() {
						rules.Created[u.Ref] = true
					}
				}
				return nil
			}}, rest)
	}))
	defer srv.Close()

	dir := t.TempDir()
	git(t, dir, "clone", "-q", srv.URL+"/app.git", "app")
	work := filepath.Join(dir, "app")
	os.WriteFile(filepath.Join(work, "f.txt"), []byte("hi\n"), 0o644)
	git(t, work, "add", ".")
	git(t, work, "commit", "-q", "-m", "work")

	out := gitErr(t, work, "push", "origin", "HEAD:main")
	if !strings.Contains(out, "[remote rejected]") || !strings.Contains(out, "never writes the default branch") {
		t.Errorf("push to main: git said\n%s\nwant a remote rejection naming the reason", out)
	}
	out = gitErr(t, work, "push", "origin", "HEAD:refs/heads/berth/other")
	if !strings.Contains(out, "may push only berth/dev") {
		t.Errorf("push to another sandbox's branch: git said\n%s", out)
	}
	git(t, work, "push", "-q", "origin", "HEAD:refs/heads/berth/dev")
	head := git(t, work, "rev-parse", "HEAD")
	if got := git(t, bare, "rev-parse", "refs/heads/berth/dev"); got != head {
		t.Errorf("berth/dev in the repository = %s, want %s", got, head)
	}
	if got := git(t, bare, "rev-parse", "refs/heads/main"); got == head {
		t.Error("main moved")
	}
	git(t, work, "push", "-q", "origin", "--delete", "berth/dev") // it created it
	gitErr(t, work, "push", "origin", "--delete", "main")
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(pushed, ",") != "refs/heads/berth/dev,refs/heads/berth/dev" {
		t.Errorf("Pushed saw %v", pushed)
	}
	if len(refusedRefs) != 3 {
		t.Errorf("Refused saw %v, want three refusals", refusedRefs)
	}
}

func TestReadOnlyTargetRefusesPush(t *testing.T) {
	bare := bareRepo(t)
	h := githttp.New("", slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Serve(w, r, githttp.Target{Dir: bare, User: "x"}, strings.TrimPrefix(r.URL.Path, "/app.git"))
	}))
	defer srv.Close()
	dir := t.TempDir()
	git(t, dir, "clone", "-q", srv.URL+"/app.git", "app")
	out := gitErr(t, filepath.Join(dir, "app"), "push", "origin", "HEAD:refs/heads/x")
	if !strings.Contains(out, "403") && !strings.Contains(out, "cannot be pushed") {
		t.Errorf("push to a read-only target: %s", out)
	}
	resp, err := http.Get(srv.URL + "/app.git/HEAD")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("dumb-protocol file: %d, want 404", resp.StatusCode)
	}
}

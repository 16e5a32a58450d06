// Package forgetest has stand-ins for GitHub and GitLab for tests: HTTP
// servers on 127.0.0.1 that implement only the API calls berth makes,
// check what the real forges check, answer with their documented shapes and
// fail the test on any other call. They also serve real bare repositories
// over git's smart HTTP protocol, to whoever presents a live token minted
// for that repository.
package forgetest

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/forge"
)

// Git runs git in dir (the current directory when "") as a test should:
// no system or global configuration, no prompt, no proxy, a fixed author.
// It returns what git printed, both streams.
func Git(t testing.TB, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// gitEnv is the environment of every git the package runs: the caller's,
// less what would make git reach beyond 127.0.0.1 or read the machine's
// configuration.
func gitEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "GIT_DIR", "GIT_WORK_TREE", "GIT_ASKPASS", "SSH_ASKPASS":
			continue
		}
		if strings.HasPrefix(k, "GIT_CONFIG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_TERMINAL_PROMPT=0",
		"NO_PROXY=*",
		"GIT_AUTHOR_NAME=forgetest", "GIT_AUTHOR_EMAIL=forgetest@example.com",
		"GIT_COMMITTER_NAME=forgetest", "GIT_COMMITTER_EMAIL=forgetest@example.com",
	)
}

// repos is a directory of bare repositories served over smart HTTP.
type repos struct {
	t     testing.TB
	root  string // GIT_PROJECT_ROOT: <root>/<path>.git
	home  string
	git   string // the git binary
	paths map[string]bool
}

// newRepos creates a bare repository for each path, each with one commit
// on main holding README.md. maxElems is how many path elements a path may
// have (2 on GitHub: owner/name).
func newRepos(t testing.TB, paths []string, maxElems int) *repos {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("forgetest: the stand-ins need git: %v", err)
	}
	rs := &repos{t: t, root: t.TempDir(), home: t.TempDir(), git: git, paths: map[string]bool{}}
	for _, p := range paths {
		n := strings.Count(p, "/") + 1
		if err := forge.CheckPath(p); err != nil || n < 2 || n > maxElems {
			t.Fatalf("forgetest: %q is not a repository path here (%d to %d elements): %v", p, 2, maxElems, err)
		}
		if rs.paths[p] {
			t.Fatalf("forgetest: repository %q given twice", p)
		}
		rs.paths[p] = true
		rs.create(p)
	}
	return rs
}

// create makes the bare repository of path with its first commit, without
// a work tree: blob, tree, commit, branch.
func (rs *repos) create(path string) {
	rs.t.Helper()
	dir := rs.bare(path)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		rs.t.Fatalf("forgetest: %v", err)
	}
	run := func(stdin string, args ...string) string {
		rs.t.Helper()
		cmd := exec.CommandContext(rs.t.Context(), rs.git, args...)
		cmd.Env = append(gitEnv(), "GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z")
		cmd.Stdin = strings.NewReader(stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			rs.t.Fatalf("forgetest: create %s: git %s: %v\n%s", path, strings.Join(args, " "), err, stderr.String())
		}
		return strings.TrimSpace(string(out))
	}
	run("", "init", "--quiet", "--bare", "--initial-branch=main", dir)
	gd := "--git-dir=" + dir
	blob := run("# "+path+"\n", gd, "hash-object", "-w", "--stdin")
	tree := run("100644 blob "+blob+"\tREADME.md\n", gd, "mktree")
	commit := run("", gd, "commit-tree", tree, "-m", "Initial commit")
	run("", gd, "update-ref", "refs/heads/main", commit)
}

func (rs *repos) bare(path string) string {
	return filepath.Join(rs.root, filepath.FromSlash(path)+".git")
}

// has reports whether path is one of the repositories.
func (rs *repos) has(path string) bool { return rs.paths[path] }

// gitRequest reads a smart HTTP request: the repository's path and
// whether r is one (GET info/refs?service=…, POST git-upload-pack or
// git-receive-pack under <path>.git/).
func gitRequest(r *http.Request) (path string, ok bool) {
	path, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), ".git/")
	if !ok {
		return "", false
	}
	switch {
	case r.Method == http.MethodGet && rest == "info/refs":
		s := r.URL.Query().Get("service")
		return path, s == "git-upload-pack" || s == "git-receive-pack"
	case r.Method == http.MethodPost && (rest == "git-upload-pack" || rest == "git-receive-pack"):
		return path, true
	}
	return "", false
}

// serve answers a smart HTTP request through git http-backend, as user
// (already allowed to), with receive-pack enabled.
func (rs *repos) serve(w http.ResponseWriter, r *http.Request, user string) {
	logw := logWriter{rs.t}
	if r.ContentLength < 0 {
		// git sends a body past its post buffer (1 MiB) chunked, which
		// net/http/cgi refuses: spool it to learn its length.
		f, err := os.CreateTemp(rs.home, "body")
		if err != nil {
			rs.t.Errorf("forgetest: spool a chunked body: %v", err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer os.Remove(f.Name())
		defer f.Close()
		n, err := io.Copy(f, r.Body)
		if err == nil {
			_, err = f.Seek(0, io.SeekStart)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body, r.ContentLength, r.TransferEncoding = f, n, nil
	}
	h := &cgi.Handler{
		Path: rs.git,
		Args: []string{"http-backend"},
		Root: "/",
		Env: []string{
			"GIT_PROJECT_ROOT=" + rs.root,
			"GIT_HTTP_EXPORT_ALL=1",
			"REMOTE_USER=" + user,
			"HOME=" + rs.home,
			"GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_GLOBAL=" + os.DevNull,
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=true",
		},
		InheritEnv: []string{"PATH"},
		Stderr:     logw,
		Logger:     log.New(logw, "cgi: ", 0),
	}
	h.ServeHTTP(w, r)
}

// refuseGit answers 401 with a Basic challenge, as the forges do for a
// missing or wrong credential: git then says "Authentication failed".
func refuseGit(w http.ResponseWriter, realm string) {
	w.Header().Set("WWW-Authenticate", `Basic realm="`+realm+`"`)
	http.Error(w, "HTTP Basic: Access denied", http.StatusUnauthorized)
}

// logWriter passes git http-backend's complaints to the test's log.
type logWriter struct{ t testing.TB }

func (l logWriter) Write(p []byte) (int, error) {
	l.t.Logf("forgetest: git http-backend: %s", bytes.TrimSpace(p))
	return len(p), nil
}

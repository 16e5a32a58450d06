package forgetest

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// site is what both stand-ins are: one server for the API and for git, and
// the repositories it serves.
type site struct {
	t     testing.TB
	name  string // GitHub, GitLab
	srv   *httptest.Server
	repos *repos
}

// start serves api (pattern → handler) and, under any other path, the
// repositories over smart HTTP to user with a token live reports live for
// the repository. Any other call fails the test. The server stops when the
// test ends.
func (s *site) start(api map[string]http.HandlerFunc, user string, live func(repo, token string) bool) {
	mux := http.NewServeMux()
	for pattern, h := range api {
		mux.HandleFunc(pattern, h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		repo, ok := gitRequest(r)
		if !ok {
			unexpected(s.t, s.name, w, r)
			return
		}
		u, token, _ := r.BasicAuth()
		if u != user || !live(repo, token) {
			refuseGit(w, s.name)
			return
		}
		s.repos.serve(w, r, u)
	})
	s.srv = httptest.NewServer(mux)
	s.t.Cleanup(s.srv.Close)
}

// URL is the stand-in's URL, for BERTH_SANDBOX_GIT_URL:
// http://127.0.0.1:port. The API is served at its root, as at
// api.github.com and under /api/v4 on GitLab; repositories at
// URL/<path>.git.
func (s *site) URL() string { return s.srv.URL }

// Client is an HTTP client for the stand-in.
func (s *site) Client() *http.Client { return s.srv.Client() }

// CloneURL is where git reaches repo (its path: owner/name,
// group/…/name).
func (s *site) CloneURL(repo string) string {
	s.t.Helper()
	s.mustHave(repo)
	return s.srv.URL + "/" + repo + ".git"
}

// BarePath is the directory of repo's bare repository.
func (s *site) BarePath(repo string) string {
	s.t.Helper()
	s.mustHave(repo)
	return s.repos.bare(repo)
}

func (s *site) mustHave(repo string) {
	s.t.Helper()
	if !s.repos.has(repo) {
		s.t.Fatalf("forgetest: %s stand-in: no repository %q", s.name, repo)
	}
}

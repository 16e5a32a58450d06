package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/githttp"
)

// splitGitPath splits "acme/app.git/info/refs" into the repository path
// ("acme/app") and the rest ("/info/refs").
func splitGitPath(p string) (repo, rest string, ok bool) {
	i := strings.Index(p, ".git/")
	if i <= 0 {
		return "", "", false
	}
	return p[:i], p[i+len(".git"):], true
}

// basicPassword is the password of HTTP Basic auth, which is how git sends
// what a credential helper gave it.
func basicPassword(r *http.Request) (string, bool) {
	_, pw, ok := r.BasicAuth()
	return pw, ok && pw != ""
}

// gitUnauthorized asks git for credentials: git then asks its credential
// helper (git-credential-berth in a sandbox).
func gitUnauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Basic realm="berth"`)
	http.Error(w, "berth: "+msg+"\n", http.StatusUnauthorized)
}

// serveGit is the gateway's git endpoint (SPEC S17): a sandbox's remote,
// authenticated with the sandbox's own key (as the Basic auth password),
// for its own repository only, with the ref policy enforced on every push.
func (s *Server) serveGit(w http.ResponseWriter, r *http.Request, _ account.Principal) {
	path, rest, ok := splitGitPath(r.PathValue("path"))
	if !ok {
		http.NotFound(w, r)
		return
	}
	key, ok := basicPassword(r)
	if !ok {
		gitUnauthorized(w, "a sandbox's git remote takes the sandbox's own key")
		return
	}
	p, err := s.accounts.Authenticate(r.Context(), key)
	if err != nil {
		gitUnauthorized(w, "the key is unknown, revoked or expired")
		return
	}
	sb, repo, rules, err := s.repos.Access(r.Context(), p, path)
	if err != nil {
		s.gitError(w, r, err)
		return
	}
	dir, err := s.repoDir(r.Context(), repo)
	if err != nil {
		s.gitError(w, r, err)
		return
	}
	rules.DefaultBranch = forge.DefaultBranch(dir)
	s.git.Serve(w, r, githttp.Target{
		Dir:   dir,
		User:  string(sb.ID),
		Rules: &rules,
		Refused: func(ctx context.Context, _ []forge.RefUpdate, why map[string]string) {
			s.repos.Refused(ctx, sb, why)
		},
		Pushed: func(ctx context.Context, done []forge.RefUpdate) error {
			if s.mirrors != nil {
				if err := s.mirrors.Push(ctx, repo, done); err != nil {
					s.repos.Refused(ctx, sb, map[string]string{done[0].Ref: err.Error()})
					return err
				}
			}
			s.repos.Pushed(ctx, sb, done)
			return nil
		},
	}, rest)
}

// HostedForge is a forge whose bare repositories are on the gateway's own
// host (the local forge): the gateway serves them itself, to sandboxes
// through their own key and to the tokens the forge minted. Any other forge
// is served from the gateway's mirrors.
type HostedForge interface {
	forge.Forge
	// Path is the bare repository of r; fault.NotFound when there is
	// none.
	Path(r forge.Repo) (string, error)
	// Check reports whether secret is a live token the forge minted for
	// the repository at path.
	Check(ctx context.Context, secret, path string) bool
}

// serveForge serves the local forge's repositories to the tokens it minted
// (token mode): any branch but the default one, like a forge with a
// protected default branch.
func (s *Server) serveForge(w http.ResponseWriter, r *http.Request, _ account.Principal) {
	hosted, ok := s.forge.(HostedForge)
	if !ok {
		http.NotFound(w, r)
		return
	}
	path, rest, ok := splitGitPath(r.PathValue("path"))
	if !ok {
		http.NotFound(w, r)
		return
	}
	token, ok := basicPassword(r)
	if !ok || !hosted.Check(r.Context(), token, path) {
		gitUnauthorized(w, "this repository takes a live token minted for it")
		return
	}
	dir, err := hosted.Path(forge.Repo{Path: path})
	if err != nil {
		http.NotFound(w, r)
		return
	}
	rules := forge.PushRules{DefaultBranch: forge.DefaultBranch(dir), DeleteAny: true}
	s.git.Serve(w, r, githttp.Target{Dir: dir, User: "token", Rules: &rules}, rest)
}

// repoDir is the bare repository the gateway serves for repo: the local
// forge's own, or (for GitHub and GitLab) its mirror.
func (s *Server) repoDir(ctx context.Context, repo forge.Repo) (string, error) {
	if hosted, ok := s.forge.(HostedForge); ok {
		return hosted.Path(repo)
	}
	if s.mirrors != nil {
		return s.mirrors.Sync(ctx, repo)
	}
	return "", fault.Errorf(fault.Unavailable, "no git forge")
}

// gitError answers a git client: plain text, which git shows.
func (s *Server) gitError(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, fault.NotFound):
		status = http.StatusNotFound
	case errors.Is(err, fault.Forbidden):
		status = http.StatusForbidden
	case errors.Is(err, fault.Unavailable):
		status = http.StatusServiceUnavailable
	default:
		s.log.ErrorContext(r.Context(), "git request failed", "path", r.URL.Path, "err", err)
		err = errors.New("internal error")
	}
	http.Error(w, "berth: "+err.Error()+"\n", status)
}

// bootstrap hands a warm pool sandbox its environment, once, for the
// one-time token its pod was given when it was claimed (SPEC S12).
func (s *Server) bootstrap(w http.ResponseWriter, r *http.Request, _ account.Principal) {
	token, ok := bearer(r)
	if !ok {
		s.writeError(w, r, fault.Errorf(fault.Unauthenticated, "send the bootstrap token as Authorization: Bearer <token>"))
		return
	}
	if s.warm == nil {
		s.writeError(w, r, fault.Errorf(fault.Unauthenticated, "bootstrap: this gateway keeps no warm pools"))
		return
	}
	env, err := s.warm.Bootstrap(r.Context(), token)
	replyCredential(s, w, r, "bootstrap", http.StatusOK, api.Environment{Env: env}, err)
}

// gitCredential hands a token-mode sandbox a fresh repository token (SPEC
// S9): POST /sandbox/v1/git-credential with the sandbox's own key, 10
// requests a minute per client address on this replica.
func (s *Server) gitCredential(w http.ResponseWriter, r *http.Request, p account.Principal) {
	kind := "none"
	if s.forge != nil {
		kind = s.forge.Kind()
	}
	if s.rateLimited(w, r, s.credLimit, kind) {
		return
	}
	t, err := s.repos.Credential(r.Context(), p)
	outcome := "issued"
	switch {
	case errors.Is(err, forge.ErrNoCredential):
		outcome = "none"
	case err != nil:
		outcome = "refused"
	}
	s.meter.CredentialRequested(kind, outcome)
	if errors.Is(err, forge.ErrNoCredential) {
		writeJSON(w, http.StatusConflict, api.Error{Code: api.CodeNoGitCredential, Message: err.Error()})
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.GitCredential{Username: t.Username, Token: t.Secret.Reveal(), ExpiresAt: t.ExpiresAt})
}

// rateLimited answers 429 and reports true when the client's address has
// used up l's credential requests for now.
func (s *Server) rateLimited(w http.ResponseWriter, r *http.Request, l *rateLimit, kind string) bool {
	if l.allow(clientAddr(r), s.now()) {
		return false
	}
	s.meter.CredentialRequested(kind, "rate_limited")
	w.Header().Set("Retry-After", "60")
	writeJSON(w, http.StatusTooManyRequests, api.Error{Code: api.CodeRateLimited,
		Message: fmt.Sprintf("at most %d credential requests a minute per client address; try again shortly", l.n)})
	return true
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// rateLimit allows n requests per window per key: a fixed window, kept in
// memory, so per replica (SPEC S9).
type rateLimit struct {
	n      int
	window time.Duration
	mu     sync.Mutex
	seen   map[string]*rateWindow
}

type rateWindow struct {
	start time.Time
	count int
}

func newRateLimit(n int, window time.Duration) *rateLimit {
	return &rateLimit{n: n, window: window, seen: map[string]*rateWindow{}}
}

func (l *rateLimit) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.seen[key]
	if !ok || now.Sub(w.start) >= l.window {
		if len(l.seen) > 10000 {
			// Forget old windows rather than grow without bound.
			for k, v := range l.seen {
				if now.Sub(v.start) >= l.window {
					delete(l.seen, k)
				}
			}
		}
		l.seen[key] = &rateWindow{start: now, count: 1}
		return true
	}
	if w.count >= l.n {
		return false
	}
	w.count++
	return true
}

package forgetest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// GitHub is a stand-in for GitHub: the two App calls berth makes, as
// api.github.com serves them (no /api/v3 prefix), the calls that take a
// run's results back (github_change.go), and git hosting, on one server.
// Every repository it is given is installed (the App's one installation
// per owner covers it) until Uninstall.
//
// It checks the App's JWT as GitHub does: RS256 signed by the App's key,
// issuer the App id, expiry in the future, issued in the past, at most ten
// minutes between the two and from now; a wrong key or id or an expired
// JWT is a 401, a JWT berth should never make (another algorithm, too long
// a life, no iat) is a 401 and a test failure. A token must be asked for
// one repository by name with permissions exactly contents:write (git's)
// or exactly pull_requests:write, issues:write and contents:read (the
// reporter's): anything else is a 422 and a test failure. Calls lacking the Accept and
// X-GitHub-Api-Version headers berth sends fail the test, as does any call
// it does not implement.
//
// Git reaches a repository at CloneURL with HTTP Basic auth: the username
// x-access-token, the password a token minted for that repository, not
// expired and not revoked; anything else is a 401.
type GitHub struct {
	site
	appID string
	key   *rsa.PublicKey

	mu        sync.Mutex
	owners    []string        // owner of installation 1001+i
	installed map[string]bool // owner/name → the App is installed on it
	repoIDs   map[string]int64
	minted    []GitHubToken
	revoked   []GitHubToken
	threads   map[string][]*githubThread // owner/name → its issues and pulls, number i+1 at i
	lastID    int64                      // of comments and reviews, unique across the site as on GitHub
}

// GitHubToken is an installation token the GitHub stand-in minted.
type GitHubToken struct {
	Token        string
	Repo         string // owner/name
	Installation int64
	// Permissions are those asked for: contents:write, or
	// pull_requests:write, issues:write and contents:read (the stand-in
	// mints nothing else).
	Permissions map[string]string
	ExpiresAt   time.Time
	Revoked     bool
	// JWT is the App's JWT the token was asked with.
	JWT JWT
}

// JWT is what the GitHub stand-in read in an App's JWT.
type JWT struct {
	Issuer              string
	IssuedAt, ExpiresAt time.Time
}

// GitHub's limits.
const (
	githubTokenLifetime = time.Hour
	githubMaxJWT        = 10 * time.Minute
	githubInstallBase   = 1001
)

// NewAppKey makes a GitHub App's key pair: the private key and its PEM as
// GitHub hands it out (what BERTH_SANDBOX_GIT_APP_KEY_FILE holds).
func NewAppKey(t testing.TB) (*rsa.PrivateKey, []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("forgetest: App key: %v", err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// NewGitHub starts a GitHub stand-in for the App appID whose JWTs key
// verifies, with a bare repository for each owner/name in repos, the App
// installed on all of them. It stops when the test ends.
func NewGitHub(t testing.TB, appID string, key *rsa.PublicKey, repos ...string) *GitHub {
	t.Helper()
	g := &GitHub{site: site{t: t, name: "GitHub", repos: newRepos(t, repos, 2)}, appID: appID, key: key,
		installed: map[string]bool{}, repoIDs: map[string]int64{}, threads: map[string][]*githubThread{}}
	for i, p := range repos {
		g.installed[p] = true
		g.repoIDs[p] = int64(2001 + i)
		owner, _, _ := strings.Cut(p, "/")
		if g.installation(owner) == 0 {
			g.owners = append(g.owners, owner)
		}
	}
	g.start(map[string]http.HandlerFunc{
		"GET /repos/{owner}/{repo}/installation":              g.getInstallation,
		"POST /app/installations/{id}/access_tokens":          g.createToken,
		"GET /repos/{owner}/{repo}":                           g.getRepo,
		"POST /repos/{owner}/{repo}/pulls":                    g.createPull,
		"GET /repos/{owner}/{repo}/pulls":                     g.listPulls,
		"POST /repos/{owner}/{repo}/issues/{number}/comments": g.createComment,
		"POST /repos/{owner}/{repo}/pulls/{number}/reviews":   g.createReview,
	}, "x-access-token", g.live)
	return g
}

// Uninstall takes repo out of the App's installation: the repository stays,
// but the App gets no token for it.
func (g *GitHub) Uninstall(repo string) {
	g.t.Helper()
	g.mustHave(repo)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.installed[repo] = false
}

// Minted returns the tokens minted so far, oldest first.
func (g *GitHub) Minted() []GitHubToken {
	g.mu.Lock()
	defer g.mu.Unlock()
	return cloneGitHubTokens(g.minted)
}

// Revoked returns the tokens revoked so far, in the order they were.
func (g *GitHub) Revoked() []GitHubToken {
	g.mu.Lock()
	defer g.mu.Unlock()
	return cloneGitHubTokens(g.revoked)
}

// Expire makes the minted token expire now.
func (g *GitHub) Expire(token string) {
	g.t.Helper()
	g.update(token, func(tok *GitHubToken) { tok.ExpiresAt = time.Now().Add(-time.Second) })
}

// Revoke revokes the minted token, as DELETE /installation/token does.
func (g *GitHub) Revoke(token string) {
	g.t.Helper()
	g.update(token, func(tok *GitHubToken) {
		if !tok.Revoked {
			tok.Revoked = true
			g.revoked = append(g.revoked, *tok)
		}
	})
}

func (g *GitHub) update(token string, f func(*GitHubToken)) {
	g.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range g.minted {
		if g.minted[i].Token == token {
			f(&g.minted[i])
			return
		}
	}
	g.t.Errorf("forgetest: GitHub stand-in: no token %q was minted", token)
}

// installation is owner's installation id, 0 if none. The caller holds
// g.mu (or is the constructor).
func (g *GitHub) installation(owner string) int64 {
	for i, o := range g.owners {
		if o == owner {
			return int64(githubInstallBase + i)
		}
	}
	return 0
}

// githubError answers GitHub's error shape.
func githubError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{
		"message":           msg,
		"documentation_url": "https://docs.github.com/rest",
		"status":            strconv.Itoa(status),
	})
}

// headers checks the headers berth sends on every API call.
func (g *GitHub) headers(r *http.Request) {
	if got := r.Header.Get("Accept"); got != "application/vnd.github+json" {
		g.t.Errorf("forgetest: GitHub stand-in: %s %s: Accept %q, want application/vnd.github+json", r.Method, r.URL.Path, got)
	}
	if got := r.Header.Get("X-GitHub-Api-Version"); got != "2022-11-28" {
		g.t.Errorf("forgetest: GitHub stand-in: %s %s: X-GitHub-Api-Version %q, want 2022-11-28", r.Method, r.URL.Path, got)
	}
}

// api checks the headers berth sends and the App's JWT; when it returns
// false it has answered.
func (g *GitHub) api(w http.ResponseWriter, r *http.Request) (JWT, bool) {
	g.headers(r)
	claims, err := g.checkJWT(r.Header.Get("Authorization"))
	if err != nil {
		if !errors.Is(err, errAppRefused) {
			g.t.Errorf("forgetest: GitHub stand-in: %s %s: berth sent a JWT GitHub refuses: %v", r.Method, r.URL.Path, err)
		}
		githubError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return JWT{}, false
	}
	return claims, true
}

// errAppRefused marks a JWT refused for the deployment's mistake (another
// App's key or id, a clock off), not berth's.
var errAppRefused = errors.New("not this App's JWT, or out of its time")

// checkJWT reads an Authorization header as GitHub reads an App's JWT.
func (g *GitHub) checkJWT(auth string) (JWT, error) {
	raw, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		return JWT{}, errors.New("no Bearer authorization")
	}
	unverified, _, err := jwt.NewParser().ParseUnverified(raw, &jwt.RegisteredClaims{})
	if err != nil {
		return JWT{}, err
	}
	if alg := unverified.Method.Alg(); alg != "RS256" {
		return JWT{}, errors.New("signed with " + alg + ", not RS256")
	}
	var c jwt.RegisteredClaims
	_, err = jwt.ParseWithClaims(raw, &c, func(*jwt.Token) (any, error) { return g.key, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(g.appID),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenInvalidIssuer),
		errors.Is(err, jwt.ErrTokenExpired), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return JWT{}, errors.Join(errAppRefused, err)
	default:
		return JWT{}, err
	}
	if c.IssuedAt == nil {
		return JWT{}, errors.New("no iat")
	}
	got := JWT{Issuer: c.Issuer, IssuedAt: c.IssuedAt.Time, ExpiresAt: c.ExpiresAt.Time}
	if got.ExpiresAt.Sub(got.IssuedAt) > githubMaxJWT || time.Until(got.ExpiresAt) > githubMaxJWT {
		return JWT{}, errors.New("exp is more than ten minutes after iat or from now")
	}
	return got, nil
}

// getInstallation is GET /repos/{owner}/{repo}/installation.
func (g *GitHub) getInstallation(w http.ResponseWriter, r *http.Request) {
	if _, ok := g.api(w, r); !ok {
		return
	}
	owner, repo := r.PathValue("owner"), r.PathValue("repo")
	g.mu.Lock()
	id := g.installation(owner)
	installed := g.installed[owner+"/"+repo]
	g.mu.Unlock()
	if !installed {
		githubError(w, http.StatusNotFound, "Not Found")
		return
	}
	account := map[string]any{"login": owner, "id": id + 5000, "type": "Organization"}
	writeJSON(w, http.StatusOK, map[string]any{
		"id":                   id,
		"account":              account,
		"repository_selection": "selected",
		"access_tokens_url":    g.srv.URL + "/app/installations/" + strconv.FormatInt(id, 10) + "/access_tokens",
		"repositories_url":     g.srv.URL + "/installation/repositories",
		"html_url":             g.srv.URL + "/organizations/" + owner + "/settings/installations/" + strconv.FormatInt(id, 10),
		"app_id":               g.appIDNumber(),
		"app_slug":             "berth",
		"target_id":            id + 5000,
		"target_type":          "Organization",
		"permissions":          map[string]string{"contents": "write", "issues": "write", "metadata": "read", "pull_requests": "write"},
		"events":               []string{},
		"created_at":           "2026-01-01T00:00:00Z",
		"updated_at":           "2026-01-01T00:00:00Z",
		"single_file_name":     nil,
		"suspended_at":         nil,
	})
}

// appIDNumber is the App id as GitHub's JSON has it: a number.
func (g *GitHub) appIDNumber() int64 {
	n, _ := strconv.ParseInt(g.appID, 10, 64)
	return n
}

// createToken is POST /app/installations/{id}/access_tokens.
func (g *GitHub) createToken(w http.ResponseWriter, r *http.Request) {
	claims, ok := g.api(w, r)
	if !ok {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var req struct {
		Repositories  []string          `json:"repositories"`
		RepositoryIDs []int64           `json:"repository_ids"`
		Permissions   map[string]string `json:"permissions"`
	}
	if !decode(g.t, "GitHub", r, &req) {
		githubError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if len(req.Repositories) != 1 || len(req.RepositoryIDs) != 0 {
		g.t.Errorf("forgetest: GitHub stand-in: token asked for repositories %q and ids %v, want one repository by name", req.Repositories, req.RepositoryIDs)
		githubError(w, http.StatusUnprocessableEntity, "berth asks for exactly one repository")
		return
	}
	if !maps.Equal(req.Permissions, map[string]string{"contents": "write"}) &&
		!maps.Equal(req.Permissions, map[string]string{"pull_requests": "write", "issues": "write", "contents": "read"}) {
		g.t.Errorf("forgetest: GitHub stand-in: token asked with permissions %v, want exactly contents:write, or exactly pull_requests:write, issues:write and contents:read", req.Permissions)
		githubError(w, http.StatusUnprocessableEntity, "The permissions requested are not granted to this installation.")
		return
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	i := int(id - githubInstallBase)
	if i < 0 || i >= len(g.owners) {
		githubError(w, http.StatusNotFound, "Not Found")
		return
	}
	repo := g.owners[i] + "/" + req.Repositories[0]
	if !g.installed[repo] {
		githubError(w, http.StatusUnprocessableEntity, "There is at least one repository that does not exist or is not accessible to the parent installation.")
		return
	}
	tok := GitHubToken{
		Token:        "ghs_" + rand.Text(),
		Repo:         repo,
		Installation: id,
		Permissions:  req.Permissions,
		ExpiresAt:    time.Now().Add(githubTokenLifetime).UTC().Truncate(time.Second),
		JWT:          claims,
	}
	g.minted = append(g.minted, tok)
	granted := maps.Clone(req.Permissions)
	granted["metadata"] = "read" // every installation token can read it
	writeJSON(w, http.StatusCreated, map[string]any{
		"token":                tok.Token,
		"expires_at":           tok.ExpiresAt.Format(time.RFC3339),
		"permissions":          granted,
		"repository_selection": "selected",
		"repositories": []map[string]any{{
			"id":        g.repoIDs[repo],
			"name":      req.Repositories[0],
			"full_name": repo,
			"private":   true,
			"owner":     map[string]any{"login": g.owners[i], "id": id + 5000, "type": "Organization"},
		}},
	})
}

// live reports whether token is a live token for repo.
func (g *GitHub) live(repo, token string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range g.minted {
		if t.Token == token && token != "" {
			return t.Repo == repo && !t.Revoked && time.Now().Before(t.ExpiresAt)
		}
	}
	return false
}

func cloneGitHubTokens(ts []GitHubToken) []GitHubToken {
	out := make([]GitHubToken, len(ts))
	for i, t := range ts {
		t.Permissions = maps.Clone(t.Permissions)
		out[i] = t
	}
	return out
}

package forgetest

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// GitLab is a stand-in for a GitLab instance: creating and revoking
// project access tokens, the calls that take a run's results back
// (gitlab_change.go), and git hosting, on one server.
//
// It checks the deployment's token (PRIVATE-TOKEN; a wrong one is a 401)
// and that the project exists (404). A token must be asked for with a
// name, scopes exactly read_repository and write_repository, access level
// 30 (Developer) and an expiry date YYYY-MM-DD not in the past: anything
// else is a 400 and a test failure. An expiry more than a year ahead is a
// 400, as on GitLab. Revoking a token the project does not have, or has
// revoked already, is a 404. Any call it does not implement fails the test.
//
// Git reaches a project at CloneURL with HTTP Basic auth: the username
// oauth2, the password a token minted for that project, not expired (it
// expires at midnight UTC starting its expiry date) and not revoked;
// anything else is a 401.
type GitLab struct {
	site
	admin string

	mu         sync.Mutex
	minted     []GitLabToken
	revoked    []GitLabToken
	issues     map[string][]*gitlabIssue        // project → its issues, iid i+1 at i
	mrs        map[string][]*gitlabMergeRequest // project → its merge requests, iid i+1 at i
	lastNoteID int64                            // unique across the instance, as on GitLab
}

// GitLabToken is a project access token the GitLab stand-in minted.
type GitLabToken struct {
	ID          int64
	Project     string // group/…/name
	Name        string
	Scopes      []string
	AccessLevel int
	ExpiresAt   string // the date asked for, YYYY-MM-DD
	Token       string
	Revoked     bool // through the API or Revoke
	Expired     bool // through Expire
}

// GitLab's limits.
const (
	gitlabDeveloper  = 30
	gitlabMaxDays    = 365
	gitlabBotUserID  = 9001
	gitlabDateLayout = time.DateOnly
)

// NewGitLab starts a GitLab stand-in whose deployment token is adminToken,
// with a bare repository for each project path (group/…/name) in repos. It
// stops when the test ends.
func NewGitLab(t testing.TB, adminToken string, repos ...string) *GitLab {
	t.Helper()
	g := &GitLab{site: site{t: t, name: "GitLab", repos: newRepos(t, repos, 8)}, admin: adminToken,
		issues: map[string][]*gitlabIssue{}, mrs: map[string][]*gitlabMergeRequest{}}
	g.start(map[string]http.HandlerFunc{
		"POST /api/v4/projects/{project}/access_tokens":               g.createToken,
		"DELETE /api/v4/projects/{project}/access_tokens/{id}":        g.revokeToken,
		"GET /api/v4/projects/{project}":                              g.getProject,
		"GET /api/v4/projects/{project}/repository/branches/{branch}": g.getBranch,
		"POST /api/v4/projects/{project}/merge_requests":              g.createMergeRequest,
		"GET /api/v4/projects/{project}/merge_requests":               g.listMergeRequests,
		"POST /api/v4/projects/{project}/issues/{iid}/notes":          g.createIssueNote,
		"POST /api/v4/projects/{project}/merge_requests/{iid}/notes":  g.createMergeRequestNote,
	}, "oauth2", g.live)
	return g
}

// Minted returns the tokens minted so far, oldest first.
func (g *GitLab) Minted() []GitLabToken {
	g.mu.Lock()
	defer g.mu.Unlock()
	return cloneGitLabTokens(g.minted)
}

// Revoked returns the tokens revoked so far, through the API or Revoke, in
// the order they were.
func (g *GitLab) Revoked() []GitLabToken {
	g.mu.Lock()
	defer g.mu.Unlock()
	return cloneGitLabTokens(g.revoked)
}

// Expire makes the minted token expire now.
func (g *GitLab) Expire(token string) {
	g.t.Helper()
	g.update(token, func(tok *GitLabToken) { tok.Expired = true })
}

// Revoke revokes the minted token, as a person could in GitLab's settings.
func (g *GitLab) Revoke(token string) {
	g.t.Helper()
	g.update(token, g.revoke)
}

// revoke marks tok revoked; the caller holds g.mu.
func (g *GitLab) revoke(tok *GitLabToken) {
	if !tok.Revoked {
		tok.Revoked = true
		g.revoked = append(g.revoked, *tok)
	}
}

func (g *GitLab) update(token string, f func(*GitLabToken)) {
	g.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range g.minted {
		if g.minted[i].Token == token {
			f(&g.minted[i])
			return
		}
	}
	g.t.Errorf("forgetest: GitLab stand-in: no token %q was minted", token)
}

// api checks the deployment's token and the project; when it returns
// false it has answered.
func (g *GitLab) api(w http.ResponseWriter, r *http.Request) (project string, ok bool) {
	if r.Header.Get("PRIVATE-TOKEN") != g.admin || g.admin == "" {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "401 Unauthorized"})
		return "", false
	}
	project = r.PathValue("project")
	if !g.repos.has(project) {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "404 Project Not Found"})
		return "", false
	}
	return project, true
}

// badRequest answers 400 with GitLab's shape and fails the test: berth
// never asks for such a token.
func (g *GitLab) badRequest(w http.ResponseWriter, r *http.Request, why string) {
	g.t.Errorf("forgetest: GitLab stand-in: %s %s: %s", r.Method, r.URL.Path, why)
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": why})
}

// createToken is POST /api/v4/projects/{project}/access_tokens.
func (g *GitLab) createToken(w http.ResponseWriter, r *http.Request) {
	project, ok := g.api(w, r)
	if !ok {
		return
	}
	var req struct {
		Name        string   `json:"name"`
		Scopes      []string `json:"scopes"`
		AccessLevel *int     `json:"access_level"`
		ExpiresAt   *string  `json:"expires_at"`
	}
	if !decode(g.t, "GitLab", r, &req) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "400 Bad request"})
		return
	}
	scopes := slices.Sorted(slices.Values(req.Scopes))
	y, m, d := time.Now().UTC().Date()
	today := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	var expires time.Time
	if req.ExpiresAt != nil {
		expires, _ = time.Parse(gitlabDateLayout, *req.ExpiresAt)
	}
	switch {
	case req.Name == "":
		g.badRequest(w, r, "name is missing")
		return
	case !slices.Equal(scopes, []string{"read_repository", "write_repository"}):
		g.badRequest(w, r, fmt.Sprintf("scopes %q are not exactly read_repository and write_repository", scopes))
		return
	case req.AccessLevel == nil || *req.AccessLevel != gitlabDeveloper:
		g.badRequest(w, r, "access_level is not 30 (Developer)")
		return
	case expires.IsZero():
		g.badRequest(w, r, "expires_at is missing or not a date YYYY-MM-DD")
		return
	case expires.Before(today):
		g.badRequest(w, r, "expires_at "+*req.ExpiresAt+" is in the past")
		return
	case expires.After(today.AddDate(0, 0, gitlabMaxDays)):
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": map[string][]string{
			"expires_at": {"must be before " + today.AddDate(0, 0, gitlabMaxDays).Format(gitlabDateLayout)},
		}})
		return
	}

	g.mu.Lock()
	tok := GitLabToken{
		ID:          int64(len(g.minted) + 1),
		Project:     project,
		Name:        req.Name,
		Scopes:      req.Scopes,
		AccessLevel: *req.AccessLevel,
		ExpiresAt:   *req.ExpiresAt,
		Token:       "glpat-" + rand.Text(),
	}
	g.minted = append(g.minted, tok)
	g.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{
		"id":           tok.ID,
		"name":         tok.Name,
		"revoked":      false,
		"created_at":   time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
		"description":  nil,
		"scopes":       tok.Scopes,
		"user_id":      gitlabBotUserID,
		"last_used_at": nil,
		"active":       true,
		"expires_at":   tok.ExpiresAt,
		"access_level": tok.AccessLevel,
		"token":        tok.Token,
	})
}

// revokeToken is DELETE /api/v4/projects/{project}/access_tokens/{id}.
func (g *GitLab) revokeToken(w http.ResponseWriter, r *http.Request) {
	project, ok := g.api(w, r)
	if !ok {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range g.minted {
		if t := &g.minted[i]; t.ID == id && t.Project == project && !t.Revoked {
			g.revoke(t)
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"message": "404 Not Found"})
}

// live reports whether token is a live token for project repo.
func (g *GitLab) live(repo, token string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range g.minted {
		if t.Token == token && token != "" {
			expires, err := time.Parse(gitlabDateLayout, t.ExpiresAt)
			return err == nil && t.Project == repo && !t.Revoked && !t.Expired && time.Now().Before(expires)
		}
	}
	return false
}

func cloneGitLabTokens(ts []GitLabToken) []GitLabToken {
	out := make([]GitLabToken, len(ts))
	for i, t := range ts {
		t.Scopes = slices.Clone(t.Scopes)
		out[i] = t
	}
	return out
}

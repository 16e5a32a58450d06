package forgetest

import (
	"context"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"berth.dev/berth/internal/forge"
)

// This file is the GitHub stand-in's side of a run's results: the
// repository, pull requests, issue comments and reviews, as GitHub serves
// them to an App's installation token.
//
// The token (Authorization: Bearer) must be one the stand-in minted, live,
// for that very repository: anything else fails the test (berth mints one
// per call), with GitHub's answer (401 Bad credentials; 404 for another
// repository, which the token cannot see). It must hold what the call
// needs: pull_requests:write to open pull requests and review them,
// pull_requests read to list them, issues:write to comment on an issue and
// either of the two on a pull request. A token without it gets 403
// "Resource not accessible by integration" and fails the test.
//
// As on GitHub: issues and pull requests share one sequence of numbers per
// repository; a pull request's head and base must be branches of the bare
// repository, the head with commits the base lacks, and only one pull
// request from a head into a base may be open (422 "Validation Failed");
// a comment goes on an issue or pull request that exists, a review on a
// pull request (404 otherwise). What berth should never send fails the
// test as well as being refused: a pull request without a title or from a
// branch into itself, a body over GitHub's 65536 characters, an empty
// comment, a review that is not event COMMENT with a body, a pull request
// list not filtered by state=open and head=owner:branch.

// githubMaxBody is the most characters GitHub takes in a body.
const githubMaxBody = 65536

// GitHubPull is a pull request opened on the GitHub stand-in.
type GitHubPull struct {
	Number      int
	Head, Base  string
	Title, Body string
	Draft       bool
	URL         string // its html_url
}

// GitHubReview is a review posted on the GitHub stand-in.
type GitHubReview struct {
	Body  string
	Event string // COMMENT: berth sends nothing else
}

// githubThread is an issue or a pull request.
type githubThread struct {
	pull     *GitHubPull // nil for an issue
	title    string
	comments []string
	reviews  []GitHubReview
}

// AddIssue opens an issue on repo, as a person would, and returns its
// number.
func (g *GitHub) AddIssue(repo, title, body string) int {
	g.t.Helper()
	g.mustHave(repo)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.threads[repo] = append(g.threads[repo], &githubThread{title: title})
	return len(g.threads[repo])
}

// Pulls returns the pull requests opened on repo, oldest first.
func (g *GitHub) Pulls(repo string) []GitHubPull {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []GitHubPull
	for _, th := range g.threads[repo] {
		if th.pull != nil {
			out = append(out, *th.pull)
		}
	}
	return out
}

// Comments returns the bodies of the comments on issue or pull request
// number of repo, oldest first.
func (g *GitHub) Comments(repo string, number int) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if th := g.thread(repo, number); th != nil {
		return slices.Clone(th.comments)
	}
	return nil
}

// Reviews returns the reviews of pull request number of repo, oldest
// first.
func (g *GitHub) Reviews(repo string, number int) []GitHubReview {
	g.mu.Lock()
	defer g.mu.Unlock()
	if th := g.thread(repo, number); th != nil {
		return slices.Clone(th.reviews)
	}
	return nil
}

// thread is repo's issue or pull request number, nil if none. The caller
// holds g.mu.
func (g *GitHub) thread(repo string, number int) *githubThread {
	ts := g.threads[repo]
	if number < 1 || number > len(ts) {
		return nil
	}
	return ts[number-1]
}

// githubRefused answers GitHub's 422 with the reasons it gives, and fails
// the test when berth should never have sent it.
func (g *GitHub) githubRefused(w http.ResponseWriter, r *http.Request, berthsFault bool, reasons ...map[string]string) {
	if berthsFault {
		g.t.Errorf("forgetest: GitHub stand-in: %s %s: berth sent what GitHub refuses: %v", r.Method, r.URL.Path, reasons)
	}
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"message":           "Validation Failed",
		"errors":            reasons,
		"documentation_url": "https://docs.github.com/rest",
		"status":            "422",
	})
}

// tokenAPI checks the headers berth sends and the installation token of a
// call on {owner}/{repo}. It returns the repository and the token's
// permissions; when it returns false it has answered.
func (g *GitHub) tokenAPI(w http.ResponseWriter, r *http.Request) (repo string, perms map[string]string, ok bool) {
	g.headers(r)
	repo = r.PathValue("owner") + "/" + r.PathValue("repo")
	raw, isBearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	g.mu.Lock()
	var tok *GitHubToken
	for i := range g.minted {
		if t := &g.minted[i]; raw != "" && t.Token == raw {
			tok = t
		}
	}
	var live bool
	if tok != nil {
		live = !tok.Revoked && time.Now().Before(tok.ExpiresAt)
		perms = tok.Permissions
	}
	g.mu.Unlock()
	switch {
	case !isBearer || tok == nil || !live:
		g.t.Errorf("forgetest: GitHub stand-in: %s %s: not with a live installation token the stand-in minted", r.Method, r.URL.Path)
		githubError(w, http.StatusUnauthorized, "Bad credentials")
		return "", nil, false
	case tok.Repo != repo:
		g.t.Errorf("forgetest: GitHub stand-in: %s %s: with a token for %s", r.Method, r.URL.Path, tok.Repo)
		githubError(w, http.StatusNotFound, "Not Found")
		return "", nil, false
	}
	return repo, perms, true
}

// allows reports whether perms give permission name at level (read or
// write): write includes read.
func allows(perms map[string]string, name, level string) bool {
	return perms[name] == "write" || perms[name] == level
}

// forbidden answers 403 as GitHub does to a token without the permission
// a call needs, and fails the test: berth asks for what it needs.
func (g *GitHub) forbidden(w http.ResponseWriter, r *http.Request, perms map[string]string, need string) {
	g.t.Errorf("forgetest: GitHub stand-in: %s %s: a token with %v, want %s", r.Method, r.URL.Path, perms, need)
	githubError(w, http.StatusForbidden, "Resource not accessible by integration")
}

// number reads the {number} of the path, 0 if it is not one.
func number(r *http.Request) int {
	n, err := strconv.Atoi(r.PathValue("number"))
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// getRepo is GET /repos/{owner}/{repo}: any token for the repository
// reads it (metadata:read).
func (g *GitHub) getRepo(w http.ResponseWriter, r *http.Request) {
	repo, _, ok := g.tokenAPI(w, r)
	if !ok {
		return
	}
	owner, name, _ := strings.Cut(repo, "/")
	g.mu.Lock()
	id, inst := g.repoIDs[repo], g.installation(owner)
	g.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"id":             id,
		"name":           name,
		"full_name":      repo,
		"owner":          map[string]any{"login": owner, "id": inst + 5000, "type": "Organization"},
		"private":        true,
		"html_url":       g.srv.URL + "/" + repo,
		"clone_url":      g.srv.URL + "/" + repo + ".git",
		"default_branch": g.repos.defaultBranch(r.Context(), repo),
		"visibility":     "private",
		"archived":       false,
		"disabled":       false,
		"has_issues":     true,
	})
}

// pullJSON is a pull request as GitHub answers it.
func (g *GitHub) pullJSON(repo string, p GitHubPull) map[string]any {
	return map[string]any{
		"number":   p.Number,
		"state":    "open",
		"title":    p.Title,
		"body":     p.Body,
		"draft":    p.Draft,
		"html_url": p.URL,
		"url":      g.srv.URL + "/repos/" + repo + "/pulls/" + strconv.Itoa(p.Number),
		"head":     map[string]any{"ref": p.Head, "label": strings.Split(repo, "/")[0] + ":" + p.Head},
		"base":     map[string]any{"ref": p.Base, "label": strings.Split(repo, "/")[0] + ":" + p.Base},
	}
}

// createPull is POST /repos/{owner}/{repo}/pulls.
func (g *GitHub) createPull(w http.ResponseWriter, r *http.Request) {
	repo, perms, ok := g.tokenAPI(w, r)
	if !ok {
		return
	}
	if !allows(perms, "pull_requests", "write") {
		g.forbidden(w, r, perms, "pull_requests:write")
		return
	}
	var req struct {
		Title string `json:"title"`
		Head  string `json:"head"`
		Base  string `json:"base"`
		Body  string `json:"body"`
		Draft bool   `json:"draft"`
	}
	if !decode(g.t, "GitHub", r, &req) {
		githubError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	owner, _, _ := strings.Cut(repo, "/")
	switch {
	case strings.TrimSpace(req.Title) == "":
		g.githubRefused(w, r, true, map[string]string{"resource": "PullRequest", "code": "missing_field", "field": "title"})
		return
	case req.Head == req.Base:
		g.githubRefused(w, r, true, map[string]string{"resource": "PullRequest", "code": "custom", "message": "No commits between " + req.Base + " and " + req.Head})
		return
	case utf8.RuneCountInString(req.Body) > githubMaxBody:
		g.githubRefused(w, r, true, map[string]string{"resource": "PullRequest", "code": "custom", "field": "body", "message": "body is too long (maximum is 65536 characters)"})
		return
	case !g.repos.hasBranch(r.Context(), repo, req.Base):
		g.githubRefused(w, r, false, map[string]string{"resource": "PullRequest", "code": "invalid", "field": "base"})
		return
	case !g.repos.hasBranch(r.Context(), repo, req.Head):
		g.githubRefused(w, r, false, map[string]string{"resource": "PullRequest", "code": "invalid", "field": "head"})
		return
	case g.repos.isAncestor(r.Context(), repo, req.Head, req.Base):
		g.githubRefused(w, r, false, map[string]string{"resource": "PullRequest", "code": "custom", "message": "No commits between " + req.Base + " and " + req.Head})
		return
	}
	g.mu.Lock()
	for _, th := range g.threads[repo] {
		if p := th.pull; p != nil && p.Head == req.Head && p.Base == req.Base {
			g.mu.Unlock()
			g.githubRefused(w, r, false, map[string]string{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for " + owner + ":" + req.Head + "."})
			return
		}
	}
	n := len(g.threads[repo]) + 1
	p := GitHubPull{
		Number: n, Head: req.Head, Base: req.Base, Title: req.Title, Body: req.Body, Draft: req.Draft,
		URL: g.srv.URL + "/" + repo + "/pull/" + strconv.Itoa(n),
	}
	g.threads[repo] = append(g.threads[repo], &githubThread{pull: &p, title: p.Title})
	g.mu.Unlock()
	writeJSON(w, http.StatusCreated, g.pullJSON(repo, p))
}

// listPulls is GET /repos/{owner}/{repo}/pulls.
func (g *GitHub) listPulls(w http.ResponseWriter, r *http.Request) {
	repo, perms, ok := g.tokenAPI(w, r)
	if !ok {
		return
	}
	if !allows(perms, "pull_requests", "read") {
		g.forbidden(w, r, perms, "pull_requests:read")
		return
	}
	q := r.URL.Query()
	owner, _, _ := strings.Cut(repo, "/")
	headOwner, head, qualified := strings.Cut(q.Get("head"), ":")
	if q.Get("state") != "open" || !qualified || headOwner != owner || head == "" {
		// GitHub lists closed ones too without state=open, and ignores a
		// head that does not name its owner: berth would take another
		// pull request for its own.
		g.t.Errorf("forgetest: GitHub stand-in: GET %s: query %q, want state=open and head=%s:<branch>", r.URL.Path, r.URL.RawQuery, owner)
	}
	base := q.Get("base")
	out := []map[string]any{}
	g.mu.Lock()
	for _, th := range g.threads[repo] {
		if p := th.pull; p != nil && (!qualified || p.Head == head) && (base == "" || p.Base == base) {
			out = append(out, g.pullJSON(repo, *p))
		}
	}
	g.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// createComment is POST /repos/{owner}/{repo}/issues/{number}/comments:
// on an issue or a pull request alike.
func (g *GitHub) createComment(w http.ResponseWriter, r *http.Request) {
	repo, perms, ok := g.tokenAPI(w, r)
	if !ok {
		return
	}
	n := number(r)
	g.mu.Lock()
	th := g.thread(repo, n)
	g.mu.Unlock()
	switch {
	case th == nil:
		githubError(w, http.StatusNotFound, "Not Found")
		return
	case th.pull == nil && !allows(perms, "issues", "write"):
		g.forbidden(w, r, perms, "issues:write")
		return
	case th.pull != nil && !allows(perms, "issues", "write") && !allows(perms, "pull_requests", "write"):
		g.forbidden(w, r, perms, "issues:write or pull_requests:write")
		return
	}
	var req struct {
		Body string `json:"body"`
	}
	if !decode(g.t, "GitHub", r, &req) {
		githubError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	switch {
	case strings.TrimSpace(req.Body) == "":
		g.githubRefused(w, r, true, map[string]string{"resource": "IssueComment", "code": "missing_field", "field": "body"})
		return
	case utf8.RuneCountInString(req.Body) > githubMaxBody:
		g.githubRefused(w, r, true, map[string]string{"resource": "IssueComment", "code": "unprocessable", "field": "data", "message": "Body is too long (maximum is 65536 characters)"})
		return
	}
	g.mu.Lock()
	th.comments = append(th.comments, req.Body)
	g.lastID++
	id := g.lastID
	g.mu.Unlock()
	page := "/issues/"
	if th.pull != nil {
		page = "/pull/"
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"id":         id,
		"body":       req.Body,
		"html_url":   g.srv.URL + "/" + repo + page + strconv.Itoa(n) + "#issuecomment-" + strconv.FormatInt(id, 10),
		"issue_url":  g.srv.URL + "/repos/" + repo + "/issues/" + strconv.Itoa(n),
		"url":        g.srv.URL + "/repos/" + repo + "/issues/comments/" + strconv.FormatInt(id, 10),
		"created_at": time.Now().UTC().Format(time.RFC3339),
	})
}

// createReview is POST /repos/{owner}/{repo}/pulls/{number}/reviews.
func (g *GitHub) createReview(w http.ResponseWriter, r *http.Request) {
	repo, perms, ok := g.tokenAPI(w, r)
	if !ok {
		return
	}
	if !allows(perms, "pull_requests", "write") {
		g.forbidden(w, r, perms, "pull_requests:write")
		return
	}
	n := number(r)
	g.mu.Lock()
	th := g.thread(repo, n)
	g.mu.Unlock()
	if th == nil || th.pull == nil {
		githubError(w, http.StatusNotFound, "Not Found")
		return
	}
	var req struct {
		Body     string `json:"body"`
		Event    string `json:"event"`
		CommitID string `json:"commit_id"`
	}
	if !decode(g.t, "GitHub", r, &req) {
		githubError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	switch {
	case req.Event != "COMMENT":
		// Without an event the review stays pending, seen by no one;
		// APPROVE and REQUEST_CHANGES are not berth's to give.
		g.t.Errorf("forgetest: GitHub stand-in: POST %s: event %q, want COMMENT", r.URL.Path, req.Event)
		githubError(w, http.StatusUnprocessableEntity, "berth reviews with event COMMENT only")
		return
	case strings.TrimSpace(req.Body) == "":
		g.githubRefused(w, r, true, map[string]string{"resource": "PullRequestReview", "code": "custom", "field": "body", "message": "Body is required for COMMENT"})
		return
	case utf8.RuneCountInString(req.Body) > githubMaxBody:
		g.githubRefused(w, r, true, map[string]string{"resource": "PullRequestReview", "code": "custom", "field": "body", "message": "body is too long (maximum is 65536 characters)"})
		return
	}
	g.mu.Lock()
	th.reviews = append(th.reviews, GitHubReview{Body: req.Body, Event: req.Event})
	g.lastID++
	id := g.lastID
	g.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"id":               id,
		"body":             req.Body,
		"state":            "COMMENTED",
		"html_url":         g.srv.URL + "/" + repo + "/pull/" + strconv.Itoa(n) + "#pullrequestreview-" + strconv.FormatInt(id, 10),
		"pull_request_url": g.srv.URL + "/repos/" + repo + "/pulls/" + strconv.Itoa(n),
		"submitted_at":     time.Now().UTC().Format(time.RFC3339),
	})
}

// Both stand-ins read their bare repositories' branches through these.

// gitOK runs git on the bare repository of path and reports whether it
// succeeded, with what it printed.
func (rs *repos) gitOK(ctx context.Context, path string, args ...string) (string, bool) {
	cmd := exec.CommandContext(ctx, rs.git, append([]string{"--git-dir=" + rs.bare(path)}, args...)...)
	cmd.Env = gitEnv()
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err == nil
}

// hasBranch reports whether path's repository has branch.
func (rs *repos) hasBranch(ctx context.Context, path, branch string) bool {
	if forge.CheckBranch(branch) != nil {
		return false
	}
	_, ok := rs.gitOK(ctx, path, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch+"^{commit}")
	return ok
}

// isAncestor reports whether branch a's commit is in branch b's history:
// a pull request from a into b would have no commits.
func (rs *repos) isAncestor(ctx context.Context, path, a, b string) bool {
	_, ok := rs.gitOK(ctx, path, "merge-base", "--is-ancestor", "refs/heads/"+a, "refs/heads/"+b)
	return ok
}

// defaultBranch is the branch path's HEAD names, "" if none.
func (rs *repos) defaultBranch(ctx context.Context, path string) string {
	out, ok := rs.gitOK(ctx, path, "symbolic-ref", "--short", "HEAD")
	if !ok {
		return ""
	}
	return out
}

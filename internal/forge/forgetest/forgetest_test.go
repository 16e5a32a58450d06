package forgetest_test

import (
	"bytes"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/forge/forgetest"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
)

// recorder is a testing.TB that keeps the stand-in's test failures instead
// of failing, so that a test can check the stand-in fails a test when it
// should.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// take returns the failures recorded since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.failures
	r.failures = nil
	return f
}

// call sends a JSON request and returns the status.
func call(t *testing.T, hc *http.Client, method, url string, header http.Header, body any) int {
	t.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// standInCase is one call to a stand-in and what it must do.
type standInCase struct {
	name       string
	method     string
	url        string
	header     http.Header
	body       any
	wantStatus int
	wantFail   bool // the stand-in fails the test: berth must never do this
}

// runStandInCases makes each call in order, checking the status and
// whether the stand-in (made with rec) failed the test.
func runStandInCases(t *testing.T, rec *recorder, hc *http.Client, tests []standInCase) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := call(t, hc, tt.method, tt.url, tt.header, tt.body); got != tt.wantStatus {
				t.Errorf("%s %s = %d, want %d", tt.method, tt.url, got, tt.wantStatus)
			}
			if failures := rec.take(); (len(failures) > 0) != tt.wantFail {
				t.Errorf("test failures %q, want failing %v", failures, tt.wantFail)
			}
		})
	}
}

func signJWT(t *testing.T, key *rsa.PrivateKey, iss string, iat, exp time.Time) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
		Issuer: iss, IssuedAt: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(exp),
	}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGitHubStandInChecks(t *testing.T) {
	key, _ := forgetest.NewAppKey(t)
	otherKey, _ := forgetest.NewAppKey(t)
	rec := &recorder{TB: t}
	stand := forgetest.NewGitHub(rec, "42", &key.PublicKey, "acme/app")
	now := time.Now()
	good := signJWT(t, key, "42", now.Add(-time.Minute), now.Add(9*time.Minute))
	hmac, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Issuer: "42", IssuedAt: jwt.NewNumericDate(now.Add(-time.Minute)), ExpiresAt: jwt.NewNumericDate(now.Add(time.Minute)),
	}).SignedString([]byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	header := func(jwt string) http.Header {
		return http.Header{
			"Authorization":        {"Bearer " + jwt},
			"Accept":               {"application/vnd.github+json"},
			"X-Github-Api-Version": {"2022-11-28"},
		}
	}
	install := stand.URL() + "/repos/acme/app/installation"
	tokens := stand.URL() + "/app/installations/1001/access_tokens"
	contents := map[string]any{"repositories": []string{"app"}, "permissions": map[string]string{"contents": "write"}}
	report := map[string]string{"pull_requests": "write", "issues": "write", "contents": "read"}

	tests := []standInCase{
		{"installation", "GET", install, header(good), nil, 200, false},
		{"token", "POST", tokens, header(good), contents, 201, false},
		{"another App's key", "GET", install, header(signJWT(t, otherKey, "42", now.Add(-time.Minute), now.Add(9*time.Minute))), nil, 401, false},
		{"another App's id", "GET", install, header(signJWT(t, key, "43", now.Add(-time.Minute), now.Add(9*time.Minute))), nil, 401, false},
		{"expired JWT", "GET", install, header(signJWT(t, key, "42", now.Add(-20*time.Minute), now.Add(-11*time.Minute))), nil, 401, false},
		{"JWT of eleven minutes", "GET", install, header(signJWT(t, key, "42", now.Add(-time.Minute), now.Add(10*time.Minute))), nil, 401, true},
		{"JWT signed with HS256", "GET", install, header(hmac), nil, 401, true},
		{"no JWT", "GET", install, http.Header{"Accept": {"application/vnd.github+json"}, "X-Github-Api-Version": {"2022-11-28"}}, nil, 401, true},
		{"no API version", "GET", install, http.Header{"Authorization": {"Bearer " + good}, "Accept": {"application/vnd.github+json"}}, nil, 200, true},
		{"not installed", "GET", stand.URL() + "/repos/acme/nowhere/installation", header(good), nil, 404, false},
		{"workflows too", "POST", tokens, header(good), map[string]any{"repositories": []string{"app"}, "permissions": map[string]string{"contents": "write", "workflows": "write"}}, 422, true},
		{"contents read", "POST", tokens, header(good), map[string]any{"repositories": []string{"app"}, "permissions": map[string]string{"contents": "read"}}, 422, true},
		{"no permissions: all the installation's", "POST", tokens, header(good), map[string]any{"repositories": []string{"app"}}, 422, true},
		{"reporting token", "POST", tokens, header(good), map[string]any{"repositories": []string{"app"}, "permissions": report}, 201, false},
		{"reporting token that writes contents", "POST", tokens, header(good), map[string]any{"repositories": []string{"app"}, "permissions": map[string]string{"pull_requests": "write", "issues": "write", "contents": "write"}}, 422, true},
		{"pull requests only", "POST", tokens, header(good), map[string]any{"repositories": []string{"app"}, "permissions": map[string]string{"pull_requests": "write"}}, 422, true},
		{"reporting token with administration", "POST", tokens, header(good), map[string]any{"repositories": []string{"app"}, "permissions": map[string]string{"pull_requests": "write", "issues": "write", "contents": "read", "administration": "write"}}, 422, true},
		{"every repository", "POST", tokens, header(good), map[string]any{"permissions": map[string]string{"contents": "write"}}, 422, true},
		{"a repository outside the installation", "POST", tokens, header(good), map[string]any{"repositories": []string{"nowhere"}, "permissions": map[string]string{"contents": "write"}}, 422, false},
		{"no such installation", "POST", stand.URL() + "/app/installations/7/access_tokens", header(good), contents, 404, false},
		{"a call berth does not make", "GET", stand.URL() + "/app/installations", header(good), nil, 404, true},
		{"the right path, the wrong method", "GET", tokens, header(good), nil, 404, true},
	}
	runStandInCases(t, rec, stand.Client(), tests)
	if got := len(stand.Minted()); got != 2 {
		t.Errorf("Minted() has %d tokens, want 2", got)
	}
}

func TestGitLabStandInChecks(t *testing.T) {
	rec := &recorder{TB: t}
	stand := forgetest.NewGitLab(rec, "admin", "group/app")
	admin := http.Header{"Private-Token": {"admin"}}
	tokens := stand.URL() + "/api/v4/projects/group%2Fapp/access_tokens"
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	body := func(scopes []string, level int, expires string) map[string]any {
		return map[string]any{"name": "berth test", "scopes": scopes, "access_level": level, "expires_at": expires}
	}
	repoScopes := []string{"write_repository", "read_repository"}

	tests := []standInCase{
		{"token", "POST", tokens, admin, body(repoScopes, 30, tomorrow), 201, false},
		{"wrong deployment token", "POST", tokens, http.Header{"Private-Token": {"nope"}}, body(repoScopes, 30, tomorrow), 401, false},
		{"no deployment token", "POST", tokens, nil, body(repoScopes, 30, tomorrow), 401, false},
		{"no such project", "POST", stand.URL() + "/api/v4/projects/group%2Fnowhere/access_tokens", admin, body(repoScopes, 30, tomorrow), 404, false},
		{"api scope", "POST", tokens, admin, body([]string{"api"}, 30, tomorrow), 400, true},
		{"read only", "POST", tokens, admin, body([]string{"read_repository"}, 30, tomorrow), 400, true},
		{"Maintainer", "POST", tokens, admin, body(repoScopes, 40, tomorrow), 400, true},
		{"no expiry", "POST", tokens, admin, map[string]any{"name": "berth", "scopes": repoScopes, "access_level": 30}, 400, true},
		{"expiry in the past", "POST", tokens, admin, body(repoScopes, 30, "2020-01-01"), 400, true},
		{"expiry not a date", "POST", tokens, admin, body(repoScopes, 30, "tomorrow"), 400, true},
		{"expiry beyond a year", "POST", tokens, admin, body(repoScopes, 30, time.Now().AddDate(2, 0, 0).Format(time.DateOnly)), 400, false},
		{"a field berth does not send", "POST", tokens, admin, map[string]any{"name": "b", "scopes": repoScopes, "access_level": 30, "expires_at": tomorrow, "x": 1}, 400, true},
		{"revoke", "DELETE", tokens + "/1", admin, nil, 204, false},
		{"revoke again", "DELETE", tokens + "/1", admin, nil, 404, false},
		{"revoke in another project", "DELETE", stand.URL() + "/api/v4/projects/group%2Fnowhere/access_tokens/1", admin, nil, 404, false},
		{"a call berth does not make", "GET", stand.URL() + "/api/v4/projects", admin, nil, 404, true},
		{"the right path, the wrong method", "GET", tokens, admin, nil, 404, true},
	}
	runStandInCases(t, rec, stand.Client(), tests)
	if minted, revoked := stand.Minted(), stand.Revoked(); len(minted) != 1 || len(revoked) != 1 || !revoked[0].Revoked {
		t.Errorf("Minted() = %d tokens, Revoked() = %+v, want the one token minted and revoked", len(minted), revoked)
	}
}

// addBranch makes branch in the bare repository: a commit on main, with
// main's files.
func addBranch(t *testing.T, bare, branch string) {
	t.Helper()
	commit, err := forgetest.Git(t, "", "--git-dir="+bare, "commit-tree", "-p", "main", "-m", "a change", "main^{tree}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := forgetest.Git(t, "", "--git-dir="+bare, "update-ref", "refs/heads/"+branch, strings.TrimSpace(commit)); err != nil {
		t.Fatal(err)
	}
}

// mintRaw asks the GitHub stand-in for an installation token of
// installation 1001 for repo (a name under its owner) with perms.
func mintRaw(t *testing.T, stand *forgetest.GitHub, jwt, repo string, perms map[string]string) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{"repositories": []string{repo}, "permissions": perms})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), "POST", stand.URL()+"/app/installations/1001/access_tokens", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = http.Header{
		"Authorization":        {"Bearer " + jwt},
		"Accept":               {"application/vnd.github+json"},
		"X-Github-Api-Version": {"2022-11-28"},
		"Content-Type":         {"application/json"},
	}
	resp, err := stand.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.Token == "" {
		t.Fatalf("mint a token for %s with %v: %d %v", repo, perms, resp.StatusCode, err)
	}
	return tok.Token
}

func TestGitHubStandInReportChecks(t *testing.T) {
	key, _ := forgetest.NewAppKey(t)
	rec := &recorder{TB: t}
	stand := forgetest.NewGitHub(rec, "42", &key.PublicKey, "acme/app", "acme/other")
	bare := stand.BarePath("acme/app")
	addBranch(t, bare, "feature")
	addBranch(t, bare, "berth/other")
	if _, err := forgetest.Git(t, "", "--git-dir="+bare, "update-ref", "refs/heads/same", "main"); err != nil {
		t.Fatal(err)
	}
	issue := stand.AddIssue("acme/app", "a bug", "it breaks")

	now := time.Now()
	jwt := signJWT(t, key, "42", now.Add(-time.Minute), now.Add(9*time.Minute))
	reporting := map[string]string{"pull_requests": "write", "issues": "write", "contents": "read"}
	report := mintRaw(t, stand, jwt, "app", reporting)
	git := mintRaw(t, stand, jwt, "app", map[string]string{"contents": "write"})
	other := mintRaw(t, stand, jwt, "other", reporting)
	expired, revoked := mintRaw(t, stand, jwt, "app", reporting), mintRaw(t, stand, jwt, "app", reporting)
	stand.Expire(expired)
	stand.Revoke(revoked)
	header := func(token string) http.Header {
		h := http.Header{"Accept": {"application/vnd.github+json"}, "X-Github-Api-Version": {"2022-11-28"}}
		if token != "" {
			h.Set("Authorization", "Bearer "+token)
		}
		return h
	}
	api := stand.URL() + "/repos/acme/app"
	pull := func(head, base, title, body string) map[string]any {
		return map[string]any{"title": title, "head": head, "base": base, "body": body, "draft": true}
	}
	long := strings.Repeat("x", 65537)
	// The issue is #1: the first pull request is #2.
	comments := func(n int) string { return api + "/issues/" + strconv.Itoa(n) + "/comments" }
	reviews := func(n int) string { return api + "/pulls/" + strconv.Itoa(n) + "/reviews" }
	text := map[string]string{"body": "all tests pass"}
	review := func(event string) map[string]string { return map[string]string{"body": "looks right", "event": event} }

	tests := []standInCase{
		{"repository", "GET", api, header(report), nil, 200, false},
		{"repository with git's token", "GET", api, header(git), nil, 200, false},
		{"no token", "GET", api, header(""), nil, 401, true},
		{"the App's JWT", "GET", api, header(jwt), nil, 401, true},
		{"an expired token", "GET", api, header(expired), nil, 401, true},
		{"a revoked token", "GET", api, header(revoked), nil, 401, true},
		{"another repository's token", "GET", api, header(other), nil, 404, true},
		{"no API version", "GET", api, http.Header{"Authorization": {"Bearer " + report}, "Accept": {"application/vnd.github+json"}}, nil, 200, true},

		{"pull request", "POST", api + "/pulls", header(report), pull("feature", "main", "Fix it", "what changed"), 201, false},
		{"pull request with git's token", "POST", api + "/pulls", header(git), pull("berth/other", "main", "Fix it", ""), 403, true},
		{"the same pull request again", "POST", api + "/pulls", header(report), pull("feature", "main", "Fix it", ""), 422, false},
		{"pull request without a title", "POST", api + "/pulls", header(report), pull("berth/other", "main", " ", ""), 422, true},
		{"pull request from a branch into itself", "POST", api + "/pulls", header(report), pull("main", "main", "Fix it", ""), 422, true},
		{"pull request body over GitHub's limit", "POST", api + "/pulls", header(report), pull("berth/other", "main", "Fix it", long), 422, true},
		{"pull request from a branch GitHub lacks", "POST", api + "/pulls", header(report), pull("nowhere", "main", "Fix it", ""), 422, false},
		{"pull request into a branch GitHub lacks", "POST", api + "/pulls", header(report), pull("berth/other", "nowhere", "Fix it", ""), 422, false},
		{"pull request without commits", "POST", api + "/pulls", header(report), pull("same", "main", "Fix it", ""), 422, false},
		{"pull request with a field berth does not send", "POST", api + "/pulls", header(report), map[string]any{"title": "t", "head": "berth/other", "base": "main", "maintainer_can_modify": true}, 400, true},
		{"pull request with another repository's token", "POST", api + "/pulls", header(other), pull("berth/other", "main", "Fix it", ""), 404, true},

		{"open pull requests", "GET", api + "/pulls?head=acme:feature&base=main&state=open", header(report), nil, 200, false},
		{"pull requests of every state", "GET", api + "/pulls?head=acme:feature", header(report), nil, 200, true},
		{"pull requests by a head without its owner", "GET", api + "/pulls?head=feature&state=open", header(report), nil, 200, true},
		{"pull requests with git's token", "GET", api + "/pulls?head=acme:feature&state=open", header(git), nil, 403, true},

		{"comment on the issue", "POST", comments(issue), header(report), text, 201, false},
		{"comment on the pull request", "POST", comments(2), header(report), text, 201, false},
		{"comment with git's token", "POST", comments(issue), header(git), text, 403, true},
		{"comment on no such issue", "POST", comments(9), header(report), text, 404, false},
		{"empty comment", "POST", comments(issue), header(report), map[string]string{"body": ""}, 422, true},
		{"comment over GitHub's limit", "POST", comments(issue), header(report), map[string]string{"body": long}, 422, true},

		{"review", "POST", reviews(2), header(report), review("COMMENT"), 200, false},
		{"approval", "POST", reviews(2), header(report), review("APPROVE"), 422, true},
		{"request for changes", "POST", reviews(2), header(report), review("REQUEST_CHANGES"), 422, true},
		{"pending review", "POST", reviews(2), header(report), map[string]string{"body": "looks right"}, 422, true},
		{"review without a body", "POST", reviews(2), header(report), map[string]string{"event": "COMMENT"}, 422, true},
		{"review over GitHub's limit", "POST", reviews(2), header(report), map[string]string{"body": long, "event": "COMMENT"}, 422, true},
		{"review of an issue", "POST", reviews(issue), header(report), review("COMMENT"), 404, false},
		{"review of no such pull request", "POST", reviews(9), header(report), review("COMMENT"), 404, false},
		{"review with git's token", "POST", reviews(2), header(git), review("COMMENT"), 403, true},
	}
	runStandInCases(t, rec, stand.Client(), tests)

	wantPulls := []forgetest.GitHubPull{{
		Number: 2, Head: "feature", Base: "main", Title: "Fix it", Body: "what changed", Draft: true,
		URL: stand.URL() + "/acme/app/pull/2",
	}}
	if diff := cmp.Diff(wantPulls, stand.Pulls("acme/app")); diff != "" {
		t.Errorf("Pulls (-want +got):\n%s", diff)
	}
	for _, n := range []int{issue, 2} {
		if got := stand.Comments("acme/app", n); !cmp.Equal(got, []string{"all tests pass"}) {
			t.Errorf("Comments(#%d) = %q, want the one comment", n, got)
		}
	}
	if diff := cmp.Diff([]forgetest.GitHubReview{{Body: "looks right", Event: "COMMENT"}}, stand.Reviews("acme/app", 2)); diff != "" {
		t.Errorf("Reviews (-want +got):\n%s", diff)
	}
	if got := stand.Pulls("acme/other"); len(got) != 0 {
		t.Errorf("Pulls(acme/other) = %+v, want none", got)
	}
}

func TestGitLabStandInReportChecks(t *testing.T) {
	rec := &recorder{TB: t}
	stand := forgetest.NewGitLab(rec, "admin", "group/app")
	addBranch(t, stand.BarePath("group/app"), "feature")
	addBranch(t, stand.BarePath("group/app"), "berth/other")
	issue := stand.AddIssue("group/app", "a bug", "it breaks")
	admin := http.Header{"Private-Token": {"admin"}}
	api := stand.URL() + "/api/v4/projects/group%2Fapp"
	mr := func(source, target, title string) map[string]string {
		return map[string]string{"source_branch": source, "target_branch": target, "title": title, "description": "what changed"}
	}
	notes := func(kind string, iid int) string { return api + "/" + kind + "/" + strconv.Itoa(iid) + "/notes" }
	text := map[string]string{"body": "all tests pass"}

	tests := []standInCase{
		{"project", "GET", api, admin, nil, 200, false},
		{"project with a wrong token", "GET", api, http.Header{"Private-Token": {"nope"}}, nil, 401, false},
		{"no such project", "GET", stand.URL() + "/api/v4/projects/group%2Fnowhere", admin, nil, 404, false},
		{"branch", "GET", api + "/repository/branches/berth%2Fother", admin, nil, 200, false},
		{"no such branch", "GET", api + "/repository/branches/nowhere", admin, nil, 404, false},

		{"merge request", "POST", api + "/merge_requests", admin, mr("feature", "main", "Draft: Fix it"), 201, false},
		{"the same merge request again", "POST", api + "/merge_requests", admin, mr("feature", "main", "Draft: again"), 409, false},
		{"merge request with a wrong token", "POST", api + "/merge_requests", http.Header{"Private-Token": {"nope"}}, mr("berth/other", "main", "Fix it"), 401, false},
		{"merge request without a title", "POST", api + "/merge_requests", admin, mr("berth/other", "main", ""), 400, true},
		{"merge request without a source branch", "POST", api + "/merge_requests", admin, mr("", "main", "Fix it"), 400, true},
		{"merge request without a target branch", "POST", api + "/merge_requests", admin, mr("berth/other", "", "Fix it"), 400, true},
		{"merge request from a branch into itself", "POST", api + "/merge_requests", admin, mr("main", "main", "Fix it"), 422, true},
		{"merge request title over GitLab's limit", "POST", api + "/merge_requests", admin, mr("berth/other", "main", strings.Repeat("t", 256)), 400, true},
		{"merge request from a branch GitLab lacks", "POST", api + "/merge_requests", admin, mr("nowhere", "main", "Fix it"), 400, false},
		{"merge request into a branch GitLab lacks", "POST", api + "/merge_requests", admin, mr("berth/other", "nowhere", "Fix it"), 400, true},
		{"merge request with a field berth does not send", "POST", api + "/merge_requests", admin, map[string]any{"source_branch": "berth/other", "target_branch": "main", "title": "t", "remove_source_branch": true}, 400, true},

		{"open merge requests", "GET", api + "/merge_requests?source_branch=feature&target_branch=main&state=opened", admin, nil, 200, false},
		{"merge requests of every state", "GET", api + "/merge_requests?source_branch=feature", admin, nil, 200, true},
		{"merge requests of every branch", "GET", api + "/merge_requests?state=opened", admin, nil, 200, true},

		{"note on the issue", "POST", notes("issues", issue), admin, text, 201, false},
		{"note on the merge request", "POST", notes("merge_requests", 1), admin, text, 201, false},
		{"note with a wrong token", "POST", notes("issues", issue), http.Header{"Private-Token": {"nope"}}, text, 401, false},
		{"note on no such issue", "POST", notes("issues", 7), admin, text, 404, false},
		{"note on no such merge request", "POST", notes("merge_requests", 7), admin, text, 404, false},
		{"empty note", "POST", notes("issues", issue), admin, map[string]string{"body": " "}, 400, true},
		{"note over GitLab's limit", "POST", notes("issues", issue), admin, map[string]string{"body": strings.Repeat("x", 1000001)}, 400, true},
	}
	runStandInCases(t, rec, stand.Client(), tests)

	want := []forgetest.GitLabMergeRequest{{
		IID: 1, Source: "feature", Target: "main", Title: "Draft: Fix it", Description: "what changed", Draft: true,
		URL: stand.URL() + "/group/app/-/merge_requests/1",
	}}
	if diff := cmp.Diff(want, stand.MergeRequests("group/app")); diff != "" {
		t.Errorf("MergeRequests (-want +got):\n%s", diff)
	}
	if got := stand.Notes("group/app", forge.ThreadIssue, issue); !cmp.Equal(got, []string{"all tests pass"}) {
		t.Errorf("Notes(issue #%d) = %q, want the one note", issue, got)
	}
	if got := stand.Notes("group/app", forge.ThreadChange, 1); !cmp.Equal(got, []string{"all tests pass"}) {
		t.Errorf("Notes(merge request !1) = %q, want the one note", got)
	}
}

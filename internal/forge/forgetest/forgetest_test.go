package forgetest_test

import (
	"bytes"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/forge/forgetest"
	"github.com/golang-jwt/jwt/v5"
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
		{"every repository", "POST", tokens, header(good), map[string]any{"permissions": map[string]string{"contents": "write"}}, 422, true},
		{"a repository outside the installation", "POST", tokens, header(good), map[string]any{"repositories": []string{"nowhere"}, "permissions": map[string]string{"contents": "write"}}, 422, false},
		{"no such installation", "POST", stand.URL() + "/app/installations/7/access_tokens", header(good), contents, 404, false},
		{"a call berth does not make", "GET", stand.URL() + "/app/installations", header(good), nil, 404, true},
		{"the right path, the wrong method", "GET", tokens, header(good), nil, 404, true},
	}
	runStandInCases(t, rec, stand.Client(), tests)
	if got := len(stand.Minted()); got != 1 {
		t.Errorf("Minted() has %d tokens, want 1", got)
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

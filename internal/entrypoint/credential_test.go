package entrypoint_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"berth.dev/berth/internal/entrypoint"
)

// helper runs berth-init as git-credential-berth with a request on stdin.
func (h *harness) helper(request string) int {
	h.t.Helper()
	h.stdout.Reset()
	h.stderr.Reset()
	env := h.env()
	env.Stdin = strings.NewReader(request)
	return entrypoint.Main([]string{"/usr/local/bin/git-credential-berth", "get"}, env)
}

func TestCredentialHelperGatewayMode(t *testing.T) {
	h := newHarness(t, map[string]string{
		"BERTH_REPO": "http://gateway.test:8080/git/acme/app.git", "BERTH_GIT_MODE": "gateway", "BERTH_API_KEY": "berth_k_secret",
	})
	if code := h.helper("protocol=http\nhost=gateway.test:8080\npath=git/acme/app.git\n\n"); code != 0 {
		t.Fatalf("helper = %d: %s", code, h.stderr.String())
	}
	if got := h.stdout.String(); got != "username=berth\npassword=berth_k_secret\n" {
		t.Errorf("answer %q", got)
	}
	// Another host (a submodule elsewhere) gets nothing.
	for _, req := range []string{"protocol=http\nhost=evil.example\n\n", "protocol=https\nhost=gateway.test:8080\n\n", "protocol=http\nhost=gateway.test\n\n"} {
		if code := h.helper(req); code != 0 || h.stdout.Len() != 0 {
			t.Errorf("request %q: code %d, answer %q; want silence", req, code, h.stdout.String())
		}
	}
}

// TestCredentialHelperTokenMode: the helper keeps the current token and
// gets a new one with five minutes left, with the sandbox's own key.
func TestCredentialHelperTokenMode(t *testing.T) {
	var calls atomic.Int32
	var fail atomic.Bool
	expires := time.Now().Add(time.Hour)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer berth_k_secret" {
			t.Errorf("credential request %s with %q", r.Method, r.Header.Get("Authorization"))
		}
		calls.Add(1)
		if fail.Load() {
			w.WriteHeader(http.StatusTooManyRequests)
			json.NewEncoder(w).Encode(map[string]string{"code": "rate_limited", "message": "slow down"})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"username": "berth", "token": "fresh-token", "expires_at": expires})
	}))
	defer srv.Close()
	vars := map[string]string{
		"BERTH_SANDBOX_ID": "sbx_1", "BERTH_SANDBOX_PURPOSE": "engineer", "BERTH_AUTHORIZED_KEYS": "ssh-ed25519 AAAA x",
		"BERTH_REPO": "http://forge.test/forge/acme/app.git", "BERTH_GIT_MODE": "token", "BERTH_API_KEY": "berth_k_secret",
		"BERTH_GIT_CREDENTIAL_URL": srv.URL, "BERTH_GIT_USERNAME": "berth", "BERTH_GIT_TOKEN": "first-token",
		"BERTH_GIT_TOKEN_EXPIRES": "0",
	}
	vars["BERTH_GIT_TOKEN_EXPIRES"] = itoa(time.Now().Add(30 * time.Minute).Unix())
	h := newHarness(t, vars)
	h.main() // the start seeds the cache with the token the gateway handed over
	req := "protocol=http\nhost=forge.test\n\n"
	if code := h.helper(req); code != 0 || h.stdout.String() != "username=berth\npassword=first-token\n" || calls.Load() != 0 {
		t.Fatalf("with 30 minutes left: code %d, answer %q, %d refreshes; want the first token and none", code, h.stdout.String(), calls.Load())
	}
	if info, err := os.Stat(filepath.Join(h.home, ".config/berth/git-credential.json")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("token cache: %v, %v; want mode 0600", info, err)
	}
	// Four minutes left: replaced.
	writeCache(t, h.home, "old-token", time.Now().Add(4*time.Minute))
	if code := h.helper(req); code != 0 || h.stdout.String() != "username=berth\npassword=fresh-token\n" || calls.Load() != 1 {
		t.Fatalf("with 4 minutes left: code %d, answer %q, %d refreshes", code, h.stdout.String(), calls.Load())
	}
	// A refresh that fails while the token still works is not fatal...
	fail.Store(true)
	writeCache(t, h.home, "still-good", time.Now().Add(2*time.Minute))
	if code := h.helper(req); code != 0 || !strings.Contains(h.stdout.String(), "still-good") {
		t.Errorf("refresh refused, token still valid: code %d, answer %q", code, h.stdout.String())
	}
	// ...but with the token gone it is, and says why.
	writeCache(t, h.home, "dead", time.Now().Add(-time.Minute))
	if code := h.helper(req); code == 0 || h.stdout.Len() != 0 || !strings.Contains(h.stderr.String(), "slow down") {
		t.Errorf("refresh refused, token expired: code %d, answer %q, stderr %q", code, h.stdout.String(), h.stderr.String())
	}
	// A restart with the environment it was created with keeps a newer token.
	fail.Store(false)
	writeCache(t, h.home, "newer", time.Now().Add(55*time.Minute))
	h.main()
	if code := h.helper(req); code != 0 || !strings.Contains(h.stdout.String(), "newer") {
		t.Errorf("after a restart: %q, want the newer cached token kept", h.stdout.String())
	}
}

func writeCache(t *testing.T, home, token string, expires time.Time) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"username": "berth", "token": token, "expires_at": expires})
	if err := os.WriteFile(filepath.Join(home, ".config/berth/git-credential.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestAgentPushesItsBranch: a clean run pushes the checkout's HEAD to
// berth/<name>; a failed one pushes nothing.
func TestAgentPushesItsBranch(t *testing.T) {
	bare := bareRepo(t)
	vars := agentVars(bare, "")
	vars["BERTH_SANDBOX_NAME"] = "fix-1"
	vars["GIT_AUTHOR_NAME"], vars["GIT_AUTHOR_EMAIL"] = "agent", "agent@example.com"
	vars["GIT_COMMITTER_NAME"], vars["GIT_COMMITTER_EMAIL"] = "agent", "agent@example.com"
	h := newHarness(t, vars)
	if code := h.main("sh", "-c", "exit 3"); code != 3 {
		t.Fatalf("a failing agent: Main = %d, want its exit code 3", code)
	}
	if out, _ := exec.Command("git", "--git-dir", bare, "branch", "--list", "berth/*").Output(); len(out) != 0 {
		t.Fatalf("a failed run pushed %q", out)
	}
	if code := h.main("sh", "-c", "echo fixed > fix.txt && git add fix.txt && git commit -q -m fix"); code != 0 {
		t.Fatalf("Main = %d; stderr:\n%s", code, h.stderr.String())
	}
	got, err := exec.Command("git", "--git-dir", bare, "log", "-1", "--format=%s", "berth/fix-1").Output()
	if err != nil || strings.TrimSpace(string(got)) != "fix" {
		t.Fatalf("berth/fix-1 in the repository: %q, %v; stderr:\n%s", got, err, h.stderr.String())
	}
	if !strings.Contains(h.stderr.String(), "pushed berth/fix-1 at ") {
		t.Errorf("stderr does not say what was pushed:\n%s", h.stderr.String())
	}
}

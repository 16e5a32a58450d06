package gateway_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/forge"
	"berth.dev/berth/internal/forge/forgetest"
	"berth.dev/berth/internal/forge/github"
	"berth.dev/berth/internal/forge/gitlab"
	"berth.dev/berth/internal/forge/local"
	"berth.dev/berth/internal/gateway"
	"berth.dev/berth/internal/githttp"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/secret"
)

// The local forge is served by the gateway itself: were it no longer a
// HostedForge, its repositories would silently be not found.
var _ gateway.HostedForge = (*local.Forge)(nil)

// seedRepo makes a git repository with one commit on main.
func seedRepo(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	run(t, dir, "git", "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "git", "add", ".")
	run(t, dir, "git", "commit", "-q", "-m", "init")
	return dir
}

func gitEnv(home string) []string {
	return append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+home, "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
}

func run(t testing.TB, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, gitEnv(dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// refuse runs git expecting it to fail, and returns what it printed.
func refuse(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, gitEnv(dir)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("git %s succeeded; want it refused\n%s", strings.Join(args, " "), out)
	}
	return string(out)
}

// withAuth puts a credential into a clone URL, as a test's stand-in for
// git-credential-berth.
func withAuth(t testing.TB, raw, user, password string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// allowRepos sets acme's allowed_repos, as its operator would.
func (w *world) allowRepos(t testing.TB, repos ...string) {
	t.Helper()
	g, err := w.operator.Guardrail(t.Context(), "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	g.AllowedRepos = repos
	if _, err := w.operator.SetGuardrail(t.Context(), "acme", "", g); err != nil {
		t.Fatal(err)
	}
}

// agent creates an agent sandbox on repo and returns it with its environment.
func (w *world) agent(t testing.TB, c *client.Client, name, repo string) (api.Sandbox, map[string]string) {
	t.Helper()
	sb, err := c.CreateSandbox(t.Context(), api.CreateSandbox{Name: name, Purpose: "agent", Repo: repo, Task: "fix it"})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return sb, w.envOf(t, sb.ID)
}

// envOf waits for the sandbox's machine and returns its environment.
func (w *world) envOf(t testing.TB, id string) map[string]string {
	t.Helper()
	return machineEnv(t, w.drv, id)
}

// machineEnv waits for the fake driver to start sandbox id's machine and
// returns its environment.
func machineEnv(t testing.TB, drv *fake.Driver, id string) map[string]string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if env := drv.Env(sandbox.ID(id)); env != nil {
			return env
		}
	}
	t.Fatalf("sandbox %s never started", id)
	return nil
}

// TestGitThroughTheGateway is SPEC S17's git endpoint with real git: an agent
// sandbox clones its repository with its own key, may push only its branch,
// never the default one, deletes only what it created, sees nothing else,
// and loses access the moment its key is revoked.
func TestGitThroughTheGateway(t *testing.T) {
	w := newWorld(t)
	w.allowRepos(t, "acme")
	sb, env := w.agent(t, w.owner, "fix-1", "acme/app.git")
	if sb.Repo != "acme/app" {
		t.Fatalf("the repository is recorded as %q, want acme/app", sb.Repo)
	}
	if env["BERTH_REPO"] != w.url+"/git/acme/app.git" || env["BERTH_GIT_MODE"] != "gateway" {
		t.Fatalf("BERTH_REPO %q mode %q; want the gateway's endpoint", env["BERTH_REPO"], env["BERTH_GIT_MODE"])
	}
	if _, ok := env["BERTH_GIT_TOKEN"]; ok {
		t.Fatal("a forge token entered an agent sandbox")
	}
	key := env["BERTH_API_KEY"]
	dir := t.TempDir()

	if out := refuse(t, dir, "clone", "-q", env["BERTH_REPO"], "nokey"); !strings.Contains(out, "401") && !strings.Contains(out, "Authentication failed") && !strings.Contains(out, "could not read Username") {
		t.Errorf("clone without a key: %s", out)
	}
	run(t, dir, "git", "clone", "-q", withAuth(t, env["BERTH_REPO"], "berth", key), "app")
	work := filepath.Join(dir, "app")
	os.WriteFile(filepath.Join(work, "fix.txt"), []byte("fixed\n"), 0o644)
	run(t, work, "git", "add", ".")
	run(t, work, "git", "commit", "-q", "-m", "fix")

	for ref, why := range map[string]string{
		"HEAD:main":                   "never writes the default branch main",
		"HEAD:refs/heads/berth/other": "may push only berth/fix-1",
		"HEAD:refs/heads/feature":     "may push only berth/fix-1",
	} {
		if out := refuse(t, work, "push", "origin", ref); !strings.Contains(out, "[remote rejected]") || !strings.Contains(out, why) {
			t.Errorf("push %s: git said\n%s\nwant a remote rejection saying %q", ref, out, why)
		}
	}
	run(t, work, "git", "push", "-q", "origin", "HEAD:refs/heads/berth/fix-1")
	bare, _ := w.forge.Path(forge.Repo{Path: "acme/app"})
	if got, want := run(t, bare, "git", "rev-parse", "berth/fix-1"), run(t, work, "git", "rev-parse", "HEAD"); got != want {
		t.Errorf("berth/fix-1 in the repository is %s, want %s", got, want)
	}
	if out := refuse(t, work, "push", "origin", "--delete", "main"); !strings.Contains(out, "[remote rejected]") {
		t.Errorf("delete main: %s", out)
	}

	// Another repository is not there for this key, even one it may reach.
	if out := refuse(t, dir, "clone", "-q", withAuth(t, w.url+"/git/acme/other.git", "berth", key), "other"); !strings.Contains(out, "not found") {
		t.Errorf("clone another repository with this sandbox's key: %s", out)
	}
	// A person's key is not a sandbox's.
	pk, _ := w.owner.CreateKey(t.Context(), api.CreateKey{Name: "laptop"})
	if out := refuse(t, dir, "clone", "-q", withAuth(t, env["BERTH_REPO"], "berth", pk.Secret), "mine"); !strings.Contains(out, "not found") {
		t.Errorf("clone with a person's key: %s", out)
	}

	// Taking the repository off allowed_repos stops the next request.
	w.allowRepos(t, "elsewhere")
	if out := refuse(t, work, "fetch", "-q", "origin"); !strings.Contains(out, "403") {
		t.Errorf("fetch after allowed_repos changed: %s", out)
	}
	w.allowRepos(t, "acme")

	// Terminating the sandbox revokes its key: git is refused at once.
	if _, err := w.owner.Terminate(t.Context(), sb.ID); err != nil {
		t.Fatal(err)
	}
	if out := refuse(t, work, "fetch", "-q", "origin"); !strings.Contains(out, "401") && !strings.Contains(out, "Authentication failed") {
		t.Errorf("fetch with a revoked key: %s", out)
	}

	events, _, err := w.st.ListAudit(t.Context(), audit.Filter{Sandbox: sb.ID}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var pushes, refusals int
	for _, e := range events {
		if e.Action == audit.GitPush && e.Outcome == audit.OK {
			pushes++
		}
		if e.Action == audit.GitPush && e.Outcome == audit.Refused {
			refusals++
		}
		if strings.Contains(e.Detail, key) {
			t.Errorf("the audit log holds the sandbox's key: %+v", e)
		}
	}
	if pushes != 1 || refusals != 4 {
		t.Errorf("audit: %d pushes accepted and %d refused, want 1 and 4", pushes, refusals)
	}
}

func TestRepositoryChecksAtCreation(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	var e *api.Error
	_, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "a", Purpose: "agent", Repo: "acme/app", Task: "t"})
	if !errors.As(err, &e) || e.Status != http.StatusForbidden || !strings.Contains(e.Message, "allowed_repos") {
		t.Errorf("a repository with no allowed_repos set: %v, want 403 naming allowed_repos", err)
	}
	w.allowRepos(t, "acme")
	for addr, want := range map[string]string{
		"https://github.com/acme/app": "local one",
		"acme/missing":                "no such repository",
		"elsewhere/app":               "allowed_repos",
		"../etc/passwd":               "not a repository address",
	} {
		_, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "a", Purpose: "agent", Repo: addr, Task: "t"})
		if !errors.As(err, &e) || !strings.Contains(e.Message, want) {
			t.Errorf("repo %q: %v, want an error saying %q", addr, err, want)
		}
	}
}

// TestTokenMode is SPEC S9's token mode on the local forge: the sandbox gets a
// short-lived token for its one repository, pushes a feature branch straight
// to the forge, never the default branch, and refreshes the token through
// the credential route, which revokes the one it replaces and is rate limited.
func TestTokenMode(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	w.allowRepos(t, "acme")
	file := `sandboxes:
  - name: tokens
    image: localhost/berth-sandbox:1
    isolation: standard
    purposes: [engineer]
    git: token
`
	if _, err := w.admin.ApplyClasses(ctx, "", strings.NewReader(file)); err != nil {
		t.Fatal(err)
	}
	sb, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "dev", Class: "tokens", Repo: "acme/app", SSHKeys: []string{sshKey}})
	if err != nil {
		t.Fatal(err)
	}
	env := w.envOf(t, sb.ID)
	if env["BERTH_REPO"] != w.url+"/forge/acme/app.git" || env["BERTH_GIT_TOKEN"] == "" || env["BERTH_GIT_USERNAME"] == "" {
		t.Fatalf("token mode env: repo %q, user %q, token set %v", env["BERTH_REPO"], env["BERTH_GIT_USERNAME"], env["BERTH_GIT_TOKEN"] != "")
	}
	first := env["BERTH_GIT_TOKEN"]
	dir := t.TempDir()
	run(t, dir, "git", "clone", "-q", withAuth(t, env["BERTH_REPO"], env["BERTH_GIT_USERNAME"], first), "app")
	work := filepath.Join(dir, "app")
	run(t, work, "git", "checkout", "-q", "-b", "feature")
	os.WriteFile(filepath.Join(work, "f.txt"), []byte("x\n"), 0o644)
	run(t, work, "git", "add", ".")
	run(t, work, "git", "commit", "-q", "-m", "feature")
	run(t, work, "git", "push", "-q", "origin", "feature")
	if out := refuse(t, work, "push", "origin", "feature:main"); !strings.Contains(out, "never writes the default branch") {
		t.Errorf("push to main with a token: %s", out)
	}
	if out := refuse(t, dir, "clone", "-q", withAuth(t, w.url+"/forge/acme/other.git", "berth", first), "other"); !strings.Contains(out, "401") && !strings.Contains(out, "Authentication failed") {
		t.Errorf("the token opened another repository: %s", out)
	}

	// Refresh with the sandbox's own key: a new token; the old one is revoked.
	sbKey := env["BERTH_API_KEY"]
	cred := credential(t, w.url, sbKey)
	if cred.status != http.StatusOK || cred.Token == "" || cred.Token == first || time.Until(cred.ExpiresAt) < 50*time.Minute {
		t.Fatalf("refresh: %d %+v", cred.status, cred.GitCredential)
	}
	if out := refuse(t, work, "fetch", "-q", withAuth(t, env["BERTH_REPO"], "berth", first)); !strings.Contains(out, "401") && !strings.Contains(out, "Authentication failed") {
		t.Errorf("the replaced token still works: %s", out)
	}
	run(t, work, "git", "fetch", "-q", withAuth(t, env["BERTH_REPO"], "berth", cred.Token))

	// A person's key, and a gateway-mode sandbox's, get no token.
	pk, err := w.owner.CreateKey(ctx, api.CreateKey{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	if c := credential(t, w.url, pk.Secret); c.status != http.StatusForbidden {
		t.Errorf("credential with a person's key: %d", c.status)
	}
	_, agentEnv := w.agent(t, w.owner, "fix", "acme/app")
	if c := credential(t, w.url, agentEnv["BERTH_API_KEY"]); c.status != http.StatusConflict || c.err.Code != api.CodeNoGitCredential {
		t.Errorf("credential for a gateway-mode sandbox: %d %q, want 409 no_git_credential", c.status, c.err.Code)
	}
	// 10 a minute per client address: three used above.
	var last int
	for range 8 {
		last = credential(t, w.url, sbKey).status
	}
	if last != http.StatusTooManyRequests {
		t.Errorf("the 11th credential request in a minute: %d, want 429", last)
	}
	// Terminate revokes the token at once.
	if _, err := w.owner.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if out := refuse(t, work, "fetch", "-q", withAuth(t, env["BERTH_REPO"], "berth", cred.Token)); !strings.Contains(out, "401") && !strings.Contains(out, "Authentication failed") {
		t.Errorf("a terminated sandbox's token still works: %s", out)
	}
}

type credAnswer struct {
	api.GitCredential
	status int
	err    api.Error
}

func credential(t *testing.T, base, key string) credAnswer {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", base+"/sandbox/v1/git-credential", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := credAnswer{status: resp.StatusCode}
	if resp.StatusCode == http.StatusOK {
		json.NewDecoder(resp.Body).Decode(&a.GitCredential)
	} else {
		json.NewDecoder(resp.Body).Decode(&a.err)
	}
	return a
}

// TestGitThroughTheGatewayToGitHub: with GitHub as the forge, the gateway
// serves a mirror it fetches with an App installation token, and sends an
// agent's accepted push on to GitHub; the sandbox never holds a token.
func TestGitThroughTheGatewayToGitHub(t *testing.T) {
	var gh *forgetest.GitHub
	w := newWorld(t, withForge(func(t testing.TB) (forge.Forge, gateway.Mirrors) {
		key, pem := forgetest.NewAppKey(t)
		gh = forgetest.NewGitHub(t, "4242", &key.PublicKey, "acme/app")
		f, err := github.New(github.Config{URL: gh.URL(), AppID: "4242", Key: secret.New(string(pem))}, gh.Client(), time.Now)
		if err != nil {
			t.Fatal(err)
		}
		return f, githttp.NewMirrors(t.TempDir(), f, time.Nanosecond, time.Now)
	}))
	w.allowRepos(t, "acme")
	sb, env := w.agent(t, w.owner, "fix-1", gh.CloneURL("acme/app"))
	if !strings.HasSuffix(sb.Repo, "/acme/app") || env["BERTH_REPO"] != w.url+"/git/acme/app.git" {
		t.Fatalf("repo %q, BERTH_REPO %q", sb.Repo, env["BERTH_REPO"])
	}
	dir := t.TempDir()
	run(t, dir, "git", "clone", "-q", withAuth(t, env["BERTH_REPO"], "berth", env["BERTH_API_KEY"]), "app")
	work := filepath.Join(dir, "app")
	os.WriteFile(filepath.Join(work, "fix.txt"), []byte("fixed\n"), 0o644)
	run(t, work, "git", "add", ".")
	run(t, work, "git", "commit", "-q", "-m", "fix")
	run(t, work, "git", "push", "-q", "origin", "HEAD:refs/heads/berth/fix-1")
	if got := run(t, dir, "git", "--git-dir", gh.BarePath("acme/app"), "log", "-1", "--format=%s", "berth/fix-1"); got != "fix" {
		t.Errorf("berth/fix-1 on GitHub: %q, want the sandbox's commit", got)
	}
	if out := refuse(t, work, "push", "origin", "HEAD:main"); !strings.Contains(out, "never writes the default branch") {
		t.Errorf("push main: %s", out)
	}
	for _, m := range gh.Minted() {
		if m.Repo != "acme/app" || len(m.Permissions) != 1 || m.Permissions["contents"] != "write" {
			t.Errorf("minted %+v; want contents:write on app only", m)
		}
	}
}

// TestDisabledOwner: disabling a user stops their keys and their sandboxes'
// keys at once; their agent sandbox ends, their engineer sandbox expires
// with its volume, and its repository token is revoked (SPEC S9).
func TestDisabledOwner(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	w.allowRepos(t, "acme")
	file := "sandboxes:\n  - name: tokens\n    image: localhost/berth-sandbox:1\n    isolation: standard\n    purposes: [engineer]\n    git: token\n"
	if _, err := w.admin.ApplyClasses(ctx, "", strings.NewReader(file)); err != nil {
		t.Fatal(err)
	}
	eng, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "dev", Class: "tokens", Repo: "acme/app", SSHKeys: []string{sshKey}})
	if err != nil {
		t.Fatal(err)
	}
	engEnv := w.envOf(t, eng.ID)
	agent, agentEnv := w.agent(t, w.owner, "fix", "acme/app")
	var e *api.Error
	if _, err := w.member.DisableUser(ctx, "acme", "alice"); !errors.As(err, &e) || e.Status != http.StatusForbidden {
		t.Errorf("a member disabling a user: %v, want 403", err)
	}
	res, err := w.admin.DisableUser(ctx, "acme", "alice")
	if err != nil || !res.User.Disabled || res.Sandboxes != 2 {
		t.Fatalf("disable alice: %+v, %v", res, err)
	}
	if _, err := w.owner.Whoami(ctx); !errors.As(err, &e) || e.Status != http.StatusUnauthorized {
		t.Errorf("a disabled user's key: %v, want 401", err)
	}
	if c := credential(t, w.url, engEnv["BERTH_API_KEY"]); c.status != http.StatusUnauthorized {
		t.Errorf("a disabled user's sandbox asking for a token: %d, want 401", c.status)
	}
	dir := t.TempDir()
	if out := refuse(t, dir, "clone", "-q", withAuth(t, engEnv["BERTH_REPO"], "berth", engEnv["BERTH_GIT_TOKEN"]), "a"); !strings.Contains(out, "401") && !strings.Contains(out, "Authentication failed") {
		t.Errorf("the engineer sandbox's forge token still works: %s", out)
	}
	if out := refuse(t, dir, "clone", "-q", withAuth(t, agentEnv["BERTH_REPO"], "berth", agentEnv["BERTH_API_KEY"]), "b"); !strings.Contains(out, "401") && !strings.Contains(out, "Authentication failed") {
		t.Errorf("the agent sandbox's key still opens git: %s", out)
	}
	for id, want := range map[string]api.State{eng.ID: "expired", agent.ID: "terminated"} {
		sb, err := w.admin.Sandbox(ctx, id)
		if err != nil || sb.State != want || !strings.Contains(sb.Reason, "owner was disabled") {
			t.Errorf("sandbox %s: %s (%s), %v; want %s", id, sb.State, sb.Reason, err, want)
		}
	}
	if !w.drv.Has(sandbox.ID(eng.ID)) || w.drv.Has(sandbox.ID(agent.ID)) {
		t.Error("want the engineer sandbox's volume kept and the agent's machine removed")
	}
	if _, err := w.admin.EnableUser(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.owner.Whoami(ctx); err != nil {
		t.Errorf("an enabled user's key: %v", err)
	}
}

// TestGitLabTokenMode: an engineer sandbox of a token-mode class on GitLab
// gets a project access token (Developer, until midnight UTC after it
// ends), pushes with it, and the token is revoked when a refresh replaces
// it and when the sandbox ends (SPEC S9).
func TestGitLabTokenMode(t *testing.T) {
	var gl *forgetest.GitLab
	w := newWorld(t, withForge(func(t testing.TB) (forge.Forge, gateway.Mirrors) {
		gl = forgetest.NewGitLab(t, "deploy-token", "group/app")
		f, err := gitlab.New(gitlab.Config{URL: gl.URL(), Token: secret.New("deploy-token")}, gl.Client(), time.Now)
		if err != nil {
			t.Fatal(err)
		}
		return f, githttp.NewMirrors(t.TempDir(), f, 0, time.Now)
	}))
	ctx := t.Context()
	w.allowRepos(t, "group")
	file := "sandboxes:\n  - name: tokens\n    image: localhost/berth-sandbox:1\n    isolation: standard\n    purposes: [engineer]\n    git: token\n"
	if _, err := w.admin.ApplyClasses(ctx, "", strings.NewReader(file)); err != nil {
		t.Fatal(err)
	}
	sb, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "dev", Class: "tokens", Repo: gl.CloneURL("group/app"), SSHKeys: []string{sshKey}})
	if err != nil {
		t.Fatal(err)
	}
	env := w.envOf(t, sb.ID)
	if env["BERTH_REPO"] != gl.CloneURL("group/app") || env["BERTH_GIT_USERNAME"] != "oauth2" {
		t.Fatalf("token mode on GitLab: repo %q user %q", env["BERTH_REPO"], env["BERTH_GIT_USERNAME"])
	}
	minted := gl.Minted()
	if len(minted) != 1 || minted[0].AccessLevel != 30 {
		t.Fatalf("minted %+v, want one Developer token", minted)
	}
	if want := sb.ExpiresAt.UTC().AddDate(0, 0, 1).Format("2006-01-02"); minted[0].ExpiresAt != want {
		t.Errorf("token expires %s, want %s (midnight UTC after the sandbox ends)", minted[0].ExpiresAt, want)
	}
	dir := t.TempDir()
	run(t, dir, "git", "clone", "-q", withAuth(t, env["BERTH_REPO"], "oauth2", env["BERTH_GIT_TOKEN"]), "app")
	work := filepath.Join(dir, "app")
	run(t, work, "git", "checkout", "-q", "-b", "feature")
	run(t, work, "git", "commit", "-q", "--allow-empty", "-m", "feature")
	run(t, work, "git", "push", "-q", "origin", "feature")

	if c := credential(t, w.url, env["BERTH_API_KEY"]); c.status != http.StatusOK {
		t.Fatalf("refresh: %d %+v", c.status, c.err)
	}
	if revoked := gl.Revoked(); len(revoked) != 1 || revoked[0].ID != minted[0].ID {
		t.Errorf("after a refresh GitLab revoked %+v, want the first token", revoked)
	}
	if _, err := w.owner.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if revoked := gl.Revoked(); len(revoked) != 2 {
		t.Errorf("after terminate GitLab revoked %d tokens, want both", len(revoked))
	}
}

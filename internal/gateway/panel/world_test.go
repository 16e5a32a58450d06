package panel_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/forge/local"
	"berth.dev/berth/internal/gateway"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/inference/inferencetest"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/repository"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
	"berth.dev/berth/internal/usage"
	"berth.dev/berth/internal/workspace"
)

const sshKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGQ0n8q0dvGXmfhT3x7Jt0yq4xNn6JkJ3sJ8QmV4c2Xk ada@laptop"

// classes are the world's: two engineers may start, one too big for the
// quota the world sets, and one for agents only with fields the class
// editor does not show.
const classes = `sandboxes:
  - name: standard
    description: Two cores for everyday work
    image: localhost/berth-sandbox:latest
    isolation: standard
  - name: large
    description: Sixteen cores for builds
    image: localhost/berth-sandbox:latest
    isolation: standard
    cpu: "16"
    memory: 64Gi
  - name: agent
    description: Coding agents
    image: localhost/berth-sandbox:latest
    isolation: standard
    purposes: [agent]
    git: gateway
    contract: kelos
    setup_command: [make, deps]
`

// world is a gateway, panel included, on a real SQLite store and the fake
// driver (gateway tests build theirs the same way), with organisation
// acme's operator, administrator ada and members alice and bob, and sam of
// organisation other. acme's quota allows 8 cores a sandbox and repositories
// under acme.
type world struct {
	url       string
	st        *store.Store
	drv       *fake.Driver
	accounts  *account.Service
	sandboxes *sandbox.Service
	classes   *class.Service
	forks     *fake.Checkpointing // the driver when the world forks (forking); nil otherwise
	operator  account.Principal
	keys      map[string]string       // user name → API key
	users     map[string]account.User // user name → user
	offset    atomic.Int64            // the world's clock runs this far from the wall's
}

// now is the world's clock.
func (w *world) now() time.Time { return time.Now().Add(time.Duration(w.offset.Load())) }

// ago sets the world's clock d before the wall's.
func (w *world) ago(d time.Duration) { w.offset.Store(int64(-d)) }

type worldOption func(*worldConfig)

type worldConfig struct {
	driver  string
	metered bool
	prices  runner.Prices
	// previewDomain serves HTTP previews under it, through reach.
	previewDomain string
	// forking runs sandboxes on the fake driver that saves memory and
	// forks (fake.Checkpointing).
	forking bool
}

// forking makes a deployment whose engineer sandboxes can be forked.
func forking(c *worldConfig) { c.forking = true }

// noDriver makes a deployment that runs no sandboxes.
func noDriver(c *worldConfig) { c.driver = "" }

// metered joins runs to what the gateway metered of them (the store's
// records of their model calls), at the deployment's prices.
func metered(prices runner.Prices) worldOption {
	return func(c *worldConfig) { c.metered, c.prices = true, prices }
}

func newWorld(t testing.TB, opts ...worldOption) *world {
	t.Helper()
	cfg := worldConfig{driver: "fake"}
	for _, o := range opts {
		o(&cfg)
	}
	ctx := t.Context()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := store.Open(ctx, t.TempDir()+"/berth.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tmpl, err := class.ParseFile(strings.NewReader(classes))
	if err != nil {
		t.Fatal(err)
	}
	w := &world{st: st, drv: fake.New(), keys: map[string]string{}, users: map[string]account.User{}}
	var drv sandbox.Driver
	switch {
	case cfg.driver != "" && cfg.forking:
		w.forks = fake.NewCheckpointing(w.drv)
		drv = w.forks
	case cfg.driver != "":
		drv = w.drv
	}
	var classSvc *class.Service
	w.accounts = account.NewService(st, st, w.now, func(ctx context.Context, org string) error { return classSvc.Seed(ctx, org) }, st, log)
	// Agent sandboxes run claude-code on a checkout of the local forge's
	// acme/app; the fake driver "runs" the agent a test gives it.
	srv := httptest.NewUnstartedServer(nil)
	w.url = "http://" + srv.Listener.Addr().String()
	lf := local.New(t.TempDir(), w.url, st, time.Now)
	if _, err := lf.Import(ctx, "acme/app", seedRepo(t)); err != nil {
		t.Fatal(err)
	}
	logs := t.TempDir()
	models := inferencetest.Scripted(t, st, w.accounts, w.url)
	runOpts := []agentrun.Option{agentrun.WithModels(models)}
	if cfg.metered {
		runOpts = append(runOpts, agentrun.WithSessionMeter(st))
	}
	repos := repository.New(st, w.accounts, repository.Config{Forge: lf, PublicURL: w.url, Audit: st}, log, time.Now)
	svc := sandbox.NewService(st, drv, w.accounts, sandbox.Config{
		Driver: cfg.driver, Runtimes: map[sandbox.Tier]string{sandbox.TierStandard: ""}, Audit: st,
		Retention: 90 * 24 * time.Hour, Repositories: repos, PublicURL: w.url,
	}, log, w.now, sandbox.WithModelEnv(models))
	runs := agentrun.NewService(st, svc, drv, w.accounts, agentrun.Config{
		Driver: cfg.driver, PublicURL: w.url, Pushes: repos,
		Workspaces: workspace.New(t.TempDir(), os.Getuid(), lf, workspace.Local{Forge: lf}),
		Images:     map[string]string{"claude-code": "localhost/berth-agent-claude-code:latest", "opencode": "localhost/berth-agent-opencode:latest"},
		Model:      "claude-sonnet-4-5", LogDir: logs, Prices: cfg.prices,
	}, log, w.now, runOpts...)
	svc.SetRuns(runs)
	w.sandboxes = svc
	classSvc = class.NewService(st, w.accounts, nil, class.Config{Template: tmpl, Runtimes: map[class.Tier]string{class.TierStandard: ""},
		NoSandboxes: drv == nil}, log, w.now)
	w.classes = classSvc
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(runCtx, time.Hour) }()
	t.Cleanup(func() { cancel(); <-done })

	gwo := gateway.Options{Accounts: w.accounts, Sandboxes: svc, Classes: classSvc, Runs: runs, Log: log, Version: "test", Driver: cfg.driver, Now: w.now,
		Usage: usage.NewService(st, w.accounts, svc, 90*24*time.Hour, w.now)}
	if cfg.previewDomain != "" {
		gwo.Reach = reach.NewService(svc, st, reach.Config{Driver: cfg.driver, Reacher: w.drv, Audit: st}, log, w.now)
		svc.SetActivity(gwo.Reach)
		gwo.PreviewDomain = cfg.previewDomain
	}
	gw := gateway.New(gwo)
	t.Cleanup(gw.CloseTunnels)
	srv.Config.Handler = gw.Handler()
	srv.Start()
	t.Cleanup(srv.Close)

	_, _, op, opKey, err := w.accounts.Bootstrap(ctx, "acme", "default", "ops")
	if err != nil {
		t.Fatal(err)
	}
	w.operator = account.Principal{User: op}
	w.keys["ops"], w.users["ops"] = opKey.Secret.Reveal(), op
	if _, _, err := w.accounts.CreateOrganisation(ctx, w.operator, "other", ""); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct {
		org, name string
		role      account.Role
	}{{"acme", "ada", account.RoleAdmin}, {"acme", "alice", account.RoleMember}, {"acme", "bob", account.RoleMember}, {"other", "sam", account.RoleMember}} {
		usr, err := w.accounts.CreateUser(ctx, w.operator, u.org, u.name, "", u.role)
		if err != nil {
			t.Fatal(err)
		}
		k, err := w.accounts.CreateKey(ctx, w.operator, usr.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		w.keys[u.name], w.users[u.name] = k.Secret.Reveal(), usr
	}
	if err := w.accounts.SetGuardrail(ctx, w.operator, "acme", "", guardrail.Guardrail{
		MaxSandboxCPU: ptr(quantity.Millicores(8000)), AllowedRepos: []string{"acme"},
	}); err != nil {
		t.Fatal(err)
	}
	return w
}

func ptr[T any](v T) *T { return &v }

// seedRepo makes a git repository with one commit on main.
func seedRepo(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "init"}} {
		git(t, dir, args...)
	}
	return dir
}

func git(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("git %v: %v\n%s", args, err, out) // not Fatal: the fake agent calls it off the test's goroutine
	}
}

// agentRun runs an agent sandbox of user's to its end: the agent commits
// a file and prints the stream Claude Code printed doing it.
func (w *world) agentRun(t testing.TB, user, name string) sandbox.Sandbox {
	t.Helper()
	return w.agentRunOf(t, user, name, "claude-code", "claude-tool", nil)
}

// agentRunOf is agentRun with runner rn printing a captured stream; during
// is called as the agent runs (the gateway metering its calls).
func (w *world) agentRunOf(t testing.TB, user, name, rn, stream string, during func(sandbox.Spec)) sandbox.Sandbox {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "runner", "testdata", "streams", stream+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	w.drv.SetAgent(func(spec sandbox.Spec) ([]string, int) {
		if during != nil {
			during(spec)
		}
		if err := os.WriteFile(filepath.Join(spec.Run.Work, "f.txt"), []byte("hello\n"), 0o644); err != nil {
			t.Error(err)
		}
		git(t, spec.Run.Work, "add", "-A")
		git(t, spec.Run.Work, "commit", "-q", "-m", "add f.txt")
		return lines, 0
	})
	sb, err := w.sandboxes.Create(t.Context(), w.principal(user), sandbox.CreateRequest{Name: name, Purpose: "agent", Class: "standard",
		Repo: "acme/app", Branch: "main", Task: "write f.txt and commit it", Runner: rn})
	if err != nil {
		t.Fatalf("create agent sandbox %s: %v", name, err)
	}
	return w.wait(t, sb.ID, func(sb sandbox.Sandbox) bool { return !sb.Live() || sb.State == sandbox.StateFailed })
}

// wait polls a sandbox until done says it is as the test wants.
func (w *world) wait(t testing.TB, id sandbox.ID, done func(sandbox.Sandbox) bool) sandbox.Sandbox {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, err := w.st.GetSandbox(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if done(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s is still %s (%s)", got.Name, got.State, got.Reason)
		}
	}
}

// running waits until a sandbox runs.
func (w *world) running(t testing.TB, id sandbox.ID) sandbox.Sandbox {
	t.Helper()
	return w.wait(t, id, func(sb sandbox.Sandbox) bool { return sb.State == sandbox.StateRunning })
}

// principal is a user's principal, for calling the services directly.
func (w *world) principal(name string) account.Principal {
	return account.Principal{User: w.users[name]}
}

// create makes an engineer sandbox of user's through the service, as the
// API would.
func (w *world) create(t testing.TB, user, name string) sandbox.Sandbox {
	t.Helper()
	sb, err := w.sandboxes.Create(t.Context(), w.principal(user), sandbox.CreateRequest{Name: name, Class: "standard", SSHKeys: []string{sshKey}})
	if err != nil {
		t.Fatalf("create %s for %s: %v", name, user, err)
	}
	return sb
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so a test sees each answer.
type browser struct {
	t    testing.TB
	base string
	c    *http.Client
}

func (w *world) browser(t testing.TB) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: w.url, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// page is an answer, its body read.
type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) get(path string) page {
	b.t.Helper()
	res, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	return read(b.t, res)
}

func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	res, err := b.c.PostForm(b.base+path, form)
	if err != nil {
		b.t.Fatal(err)
	}
	return read(b.t, res)
}

func read(t testing.TB, res *http.Response) page {
	t.Helper()
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return page{status: res.StatusCode, header: res.Header, body: string(body)}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the form token a page carries.
func (p page) csrf(t testing.TB) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no form token on the page:\n%s", p.body)
	}
	return m[1]
}

// signIn signs the browser in with key and returns the token of its forms.
func (b *browser) signIn(key string) string {
	b.t.Helper()
	form := b.get("/sign-in")
	res := b.post("/sign-in", url.Values{"csrf": {form.csrf(b.t)}, "key": {key}})
	if res.status != http.StatusSeeOther {
		b.t.Fatalf("sign in: status %d, want 303\n%s", res.status, res.body)
	}
	return b.get("/quotas").csrf(b.t)
}

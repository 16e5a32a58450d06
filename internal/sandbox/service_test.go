package sandbox_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/fakeclock"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge/local"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/repository"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/sandbox/sandboxtest"
	"berth.dev/berth/internal/store"
)

const testKey = sandboxtest.Key

const classFile = sandboxtest.ClassFile

// env is the sandbox tests' world (sandboxtest) and the sandbox service in
// it.
type env struct {
	st       *store.Store
	path     string // the store's SQLite file
	drv      *fake.Driver
	local    *local.Forge
	repos    *repository.Service // over local
	accounts *account.Service
	svc      *sandbox.Service
	reach    *reach.Service // the way in, svc's idle clock
	classes  *class.Service
	classCfg class.Config // the class service's
	cfg      sandbox.Config
	opts     []sandbox.Option // the service's
	clock    *fakeclock.Clock
	w        *sandboxtest.World

	operator, admin, alice, bob, stranger account.Principal
	acme, other                           account.Organisation
}

type option func(*sandbox.Config)

func noForge(c *sandbox.Config) { c.Repositories = nil }

func newEnv(t *testing.T, opts ...option) *env {
	t.Helper()
	return newEnvOn(t, nil, opts...)
}

// newEnvOn is newEnv with a store opened with storeOpts.
func newEnvOn(t *testing.T, storeOpts []store.Option, opts ...option) *env {
	t.Helper()
	e := &env{}
	w := sandboxtest.New(t, func(ctx context.Context, org string) error { return e.classes.Seed(ctx, org) }, storeOpts...)
	e.w, e.st, e.path, e.drv, e.local, e.repos, e.accounts, e.clock = w, w.Store, w.Path, w.Driver, w.Forge, w.Repos, w.Accounts, w.Clock
	cfg := w.Config(t)
	for _, o := range opts {
		o(&cfg)
	}
	e.cfg = cfg
	e.svc = sandbox.NewService(e.st, e.drv, e.accounts, cfg, w.Log, e.clock.Now, e.opts...)
	e.reach = e.wayIn(e.svc, nil)
	e.classCfg = w.ClassConfig(t, cfg)
	e.classes = class.NewService(e.st, e.accounts, nil, e.classCfg, w.Log, e.clock.Now)
	w.People(t)
	e.operator, e.admin, e.alice, e.bob, e.stranger, e.acme, e.other = w.Operator, w.Admin, w.Alice, w.Bob, w.Stranger, w.Acme, w.Other
	return e
}

// wayIn is the way in to svc's sandboxes, its idle clock, holding what
// it serves through holds (nil: a gateway alone), as the composition root
// wires them.
func (e *env) wayIn(svc *sandbox.Service, holds reach.Holds) *reach.Service {
	r := reach.NewService(svc, e.st, reach.Config{Driver: e.cfg.Driver, Reacher: e.drv, Holds: holds, Audit: e.st}, e.w.Log, e.clock.Now)
	svc.SetActivity(r)
	return r
}

// run starts the service's background work for the test's life. The
// returned func stops it early, as a gateway that goes down.
func (e *env) run(t *testing.T) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.svc.Run(ctx, time.Hour)
	}()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return stop
}

func (e *env) engineer(t *testing.T, p account.Principal, name string) sandbox.Sandbox {
	t.Helper()
	sb, err := e.svc.Create(t.Context(), p, sandbox.CreateRequest{Name: name, Class: "standard", SSHKeys: []string{testKey}})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return sb
}

// waitState polls until the sandbox is in state want.
func (e *env) waitState(t *testing.T, id sandbox.ID, want sandbox.State) sandbox.Sandbox {
	t.Helper()
	return e.within(t, id, want, 10*time.Second)
}

// within polls the row until the sandbox is in state want, failing the
// test when d passes first.
func (e *env) within(t *testing.T, id sandbox.ID, want sandbox.State, d time.Duration) sandbox.Sandbox {
	t.Helper()
	return e.w.Within(t, id, want, d)
}

func TestCreateRunsAndHandsOverTheEnvironment(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	sb, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{
		Name: "dev", Class: "standard", SSHKeys: []string{testKey}, Env: map[string]string{"EDITOR": "vim"},
		Repo: "acme/app", Branch: "main",
	})
	if err != nil {
		t.Fatal(err)
	}
	if sb.State != sandbox.StateStarting || !strings.HasPrefix(string(sb.ID), "sbx_") {
		t.Fatalf("created %s in state %s, want an sbx_ id in state starting", sb.ID, sb.State)
	}
	if want := e.clock.Now().Add(4 * time.Hour); !sb.ExpiresAt.Equal(want) {
		t.Errorf("expires %v, want the class's default 4h: %v", sb.ExpiresAt, want)
	}
	e.waitState(t, sb.ID, sandbox.StateRunning)

	env := e.drv.Env(sb.ID)
	for k, want := range map[string]string{
		"BERTH_SANDBOX_ID": string(sb.ID), "BERTH_SANDBOX_NAME": "dev", "BERTH_SANDBOX_CLASS": "standard",
		"BERTH_SANDBOX_PURPOSE": "engineer", "BERTH_AUTHORIZED_KEYS": testKey, "BERTH_BASE_URL": "http://gateway.test:8080",
		"OPENAI_BASE_URL": "http://gateway.test:8080/v1", "BERTH_REPO": "http://gateway.test:8080/git/acme/app.git", "BERTH_BRANCH": "main",
		"BERTH_GIT_MODE": "gateway", "BERTH_GIT_CREDENTIAL_URL": "http://gateway.test:8080/sandbox/v1/git-credential",
		"BERTH_GIT_AUTHOR_NAME": "alice@acme.example", "BERTH_GIT_AUTHOR_EMAIL": "alice@acme.example", "EDITOR": "vim",
		"BERTH_SANDBOX_EXPIRES": sb.ExpiresAt.UTC().Format(time.RFC3339),
	} {
		if env[k] != want {
			t.Errorf("sandbox env %s = %q, want %q", k, env[k], want)
		}
	}
	if _, ok := env["BERTH_SESSION"]; ok {
		t.Error("an engineer sandbox got a session header (S3: not set)")
	}
	// The sandbox's key is its own, acts for its owner, and is scoped.
	p, err := e.accounts.Authenticate(t.Context(), env["BERTH_API_KEY"])
	if err != nil {
		t.Fatalf("the sandbox's key does not authenticate: %v", err)
	}
	if p.User.ID != e.alice.User.ID || p.Sandbox != string(sb.ID) {
		t.Errorf("sandbox key acts as %s for sandbox %q, want alice for %s", p.User.Name, p.Sandbox, sb.ID)
	}
	if _, err := e.svc.Create(t.Context(), p, sandbox.CreateRequest{Name: "child", Class: "standard", SSHKeys: []string{testKey}}); !errors.Is(err, fault.Forbidden) {
		t.Errorf("a sandbox key created a sandbox: err = %v, want fault.Forbidden", err)
	}
}

func TestAgentSandboxGetsASession(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	sb, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "fix", Purpose: "agent", Repo: "acme/app", Task: "fix it", Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Class != "agent" {
		t.Errorf("class %s, want agent: the only class for agents is chosen when none is named", sb.Class)
	}
	e.waitState(t, sb.ID, sandbox.StateRunning)
	env := e.drv.Env(sb.ID)
	if env["BERTH_SESSION"] != string(sb.ID) || env["ANTHROPIC_CUSTOM_HEADERS"] != "X-Berth-Session: "+string(sb.ID) {
		t.Errorf("agent env: session %q, headers %q", env["BERTH_SESSION"], env["ANTHROPIC_CUSTOM_HEADERS"])
	}
	if task, ok := env["BERTH_TASK"]; ok {
		t.Errorf("agent env: BERTH_TASK %q; the task is in no machine's environment", task)
	}
	// Gemini CLI reads its extra headers as "Name: value, Name: value".
	if got := env["GEMINI_CLI_CUSTOM_HEADERS"]; got != "X-Berth-Session: "+string(sb.ID) {
		t.Errorf("GEMINI_CLI_CUSTOM_HEADERS %q, want the session header", got)
	}
	if _, err := e.svc.Suspend(t.Context(), e.alice, "fix"); !errors.Is(err, fault.Conflict) {
		t.Errorf("suspend agent sandbox: err = %v, want fault.Conflict", err)
	}
}

func TestCreateRefusesBadRequests(t *testing.T) {
	e := newEnv(t)
	ok := sandbox.CreateRequest{Name: "dev", Class: "standard", SSHKeys: []string{testKey}}
	with := func(f func(*sandbox.CreateRequest)) sandbox.CreateRequest {
		r := ok
		f(&r)
		return r
	}
	tests := []struct {
		name    string
		who     account.Principal
		req     sandbox.CreateRequest
		want    error
		field   string
		message string
	}{
		{"bad name", e.alice, with(func(r *sandbox.CreateRequest) { r.Name = "Dev_1" }), fault.Invalid, "name", "lowercase"},
		{"long name", e.alice, with(func(r *sandbox.CreateRequest) { r.Name = strings.Repeat("a", 41) }), fault.Invalid, "name", "40"},
		{"ttl 0", e.alice, with(func(r *sandbox.CreateRequest) { r.TTL = "0s" }), fault.Invalid, "ttl", "more than 0"},
		{"ttl under the minimum", e.alice, with(func(r *sandbox.CreateRequest) { r.TTL = "1m" }), fault.Invalid, "ttl", "minimum"},
		{"ttl not a duration", e.alice, with(func(r *sandbox.CreateRequest) { r.TTL = "soon" }), fault.Invalid, "ttl", "duration"},
		{"unknown class", e.alice, with(func(r *sandbox.CreateRequest) { r.Class = "huge" }), fault.Invalid, "class", "no class"},
		{"class for agents only", e.alice, with(func(r *sandbox.CreateRequest) { r.Class = "agent" }), fault.Invalid, "class", "not for engineer"},
		{"no class and several fit", e.alice, with(func(r *sandbox.CreateRequest) { r.Class = "" }), fault.Invalid, "class", "this organisation has 3 engineer classes (big, gpu, standard); name one with --class"},
		{"BERTH_ variable", e.alice, with(func(r *sandbox.CreateRequest) { r.Env = map[string]string{"BERTH_X": "1"} }), fault.Invalid, "env.BERTH_X", "gateway's"},
		{"bad variable name", e.alice, with(func(r *sandbox.CreateRequest) { r.Env = map[string]string{"A-B": "1"} }), fault.Invalid, "env.A-B", "not an environment variable"},
		{"engineer without a key", e.alice, with(func(r *sandbox.CreateRequest) { r.SSHKeys = nil }), fault.Invalid, "ssh_keys", "ssh public key"},
		{"not an ssh key", e.alice, with(func(r *sandbox.CreateRequest) { r.SSHKeys = []string{"hello"} }), fault.Invalid, "ssh_keys[0]", "not an ssh public key"},
		{"agent without a task", e.alice, sandbox.CreateRequest{Name: "a", Purpose: "agent", Repo: "acme/app"}, fault.Invalid, "repo", "--task"},
		{"unknown runner", e.alice, sandbox.CreateRequest{Name: "a", Purpose: "agent", Repo: "acme/app", Task: "t", Runner: "vim"}, fault.Invalid, "runner", "not a runner"},
		{"unknown purpose", e.alice, with(func(r *sandbox.CreateRequest) { r.Purpose = "robot" }), fault.Invalid, "purpose", "not a purpose"},
		{"unmapped tier", e.alice, with(func(r *sandbox.CreateRequest) { r.Class = "gpu" }), fault.Unavailable, "", "BERTH_SANDBOX_RUNTIME_VM"},
		{"member chooses a project", e.alice, with(func(r *sandbox.CreateRequest) { r.Project = "ml" }), fault.Forbidden, "", "only an administrator"},
		{"administrator names another organisation's project", e.admin, with(func(r *sandbox.CreateRequest) { r.Project = "elsewhere" }), fault.Invalid, "project", "no project"},
	}
	if _, err := e.accounts.CreateProject(t.Context(), e.admin, "acme", "ml"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.accounts.CreateProject(t.Context(), e.operator, "other", "elsewhere"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.svc.Create(t.Context(), tt.who, tt.req)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Create = %v, want %v", err, tt.want)
			}
			var ie *fault.Error
			if tt.field != "" && (!errors.As(err, &ie) || ie.Field != tt.field) {
				t.Errorf("Create = %v, want the field %q named", err, tt.field)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("Create = %q, want it to say %q", err, tt.message)
			}
		})
	}
	if got, _, _ := e.svc.List(t.Context(), e.operator, sandbox.ListOptions{All: true}); len(got) != 0 {
		t.Fatalf("refused creates left %d sandboxes behind", len(got))
	}
}

func TestCreateWithoutForgeOrDriver(t *testing.T) {
	e := newEnv(t, noForge)
	_, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "a", Purpose: "agent", Repo: "acme/app", Task: "t"})
	if !errors.Is(err, fault.Unavailable) || !strings.Contains(err.Error(), "BERTH_SANDBOX_GIT_FORGE") {
		t.Errorf("repository without a forge: err = %v, want fault.Unavailable naming BERTH_SANDBOX_GIT_FORGE", err)
	}
	nodrv := sandbox.NewService(e.st, nil, e.accounts, sandbox.Config{}, slog.New(slog.DiscardHandler), e.clock.Now)
	_, err = nodrv.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "dev", Class: "standard", SSHKeys: []string{testKey}})
	if !errors.Is(err, fault.Unavailable) || !strings.Contains(err.Error(), "BERTH_SANDBOX_DRIVER") {
		t.Errorf("no driver: err = %v, want fault.Unavailable naming BERTH_SANDBOX_DRIVER", err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestGuardrailsCutAndRefuse(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	// Class max_ttl is 24h: 48h is cut to it.
	sb, err := e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "long", Class: "standard", SSHKeys: []string{testKey}, TTL: "48h"})
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.ExpiresAt.Sub(e.clock.Now()); got != 24*time.Hour {
		t.Errorf("ttl 48h on a 24h class: lifetime %v, want 24h", got)
	}
	if err := e.accounts.SetGuardrail(ctx, e.admin, "acme", "", guardrail.Guardrail{
		MaxSandboxTTL: ptr(2 * time.Hour), MaxSandboxCPU: ptr(quantity.Millicores(8000)), MaxSandboxMemory: ptr(int64(32768)),
		AllowedRepos: []string{"acme"}, // written whole: keep what the operator set
	}); err != nil {
		t.Fatal(err)
	}
	sb, err = e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "cut", Class: "standard", SSHKeys: []string{testKey}})
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.ExpiresAt.Sub(e.clock.Now()); got != 2*time.Hour {
		t.Errorf("class default 4h under a 2h guardrail: lifetime %v, want 2h", got)
	}
	_, err = e.svc.Create(ctx, e.alice, sandbox.CreateRequest{Name: "huge", Class: "big", SSHKeys: []string{testKey}})
	if !errors.Is(err, fault.Exceeded) || !strings.Contains(err.Error(), "max_sandbox_cpu") {
		t.Errorf("16 cores under an 8-core ceiling: err = %v, want fault.Exceeded naming max_sandbox_cpu", err)
	}
}

// TestLiveCountsCountWhatMaxSandboxesCounts: the organisation's live
// sandboxes, in all and by project, for anybody in it; a terminated one no
// longer counts; another organisation's caller learns nothing.
func TestLiveCountsCountWhatMaxSandboxesCounts(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.engineer(t, e.alice, "one")
	e.engineer(t, e.bob, "two")
	gone := e.engineer(t, e.bob, "gone")
	if _, err := e.svc.Terminate(ctx, e.bob, string(gone.ID)); err != nil {
		t.Fatal(err)
	}
	prj, err := e.accounts.DefaultProject(ctx, e.acme.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.svc.LiveCounts(ctx, e.alice, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Org != 2 || got.Projects[prj.ID] != 2 || len(got.Projects) != 1 {
		t.Errorf("LiveCounts(alice) = %+v, want 2 in acme, 2 in its default project", got)
	}
	if _, err := e.svc.LiveCounts(ctx, e.stranger, "acme"); !errors.Is(err, fault.NotFound) {
		t.Errorf("LiveCounts(another organisation's member, acme) err = %v, want not found", err)
	}
}

func TestRoleIsForAgentsOnly(t *testing.T) {
	e := newEnv(t)
	for _, tt := range []struct {
		name string
		req  sandbox.CreateRequest
	}{
		{"engineer reviewer", sandbox.CreateRequest{Name: "e1", Class: "standard", SSHKeys: []string{testKey}, Role: "reviewer"}},
		{"engineer author", sandbox.CreateRequest{Name: "e2", Class: "standard", SSHKeys: []string{testKey}, Role: "author"}},
		{"unknown role", sandbox.CreateRequest{Name: "a1", Purpose: "agent", Repo: "acme/app", Task: "t", Role: "approver"}},
	} {
		_, err := e.svc.Create(t.Context(), e.alice, tt.req)
		var inv *fault.Error
		if !errors.As(err, &inv) || inv.Field != "role" {
			t.Errorf("%s: err = %v, want invalid role", tt.name, err)
		}
	}
	sb, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "a2", Purpose: "agent", Repo: "acme/app", Task: "t", Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := e.st.GetSandbox(t.Context(), sb.ID); got.Role != sandbox.RoleAuthor {
		t.Errorf("an agent sandbox without a role has %q, want author", got.Role)
	}
	dev := e.engineer(t, e.alice, "dev")
	if got, _ := e.st.GetSandbox(t.Context(), dev.ID); got.Role != "" {
		t.Errorf("an engineer sandbox has role %q, want none", got.Role)
	}
}

// The gateway's own key (the panel terminal's CA) is added after the
// owner's keys for an engineer sandbox, and for that sandbox's id.
func TestGatewayKeyJoinsTheAuthorizedKeys(t *testing.T) {
	e := newEnv(t, func(c *sandbox.Config) {
		c.GatewayKey = func(id sandbox.ID) string {
			return "cert-authority,principals=\"t-" + string(id) + "\" ssh-ed25519 AAAA gw"
		}
	})
	e.run(t)
	sb, err := e.svc.Create(t.Context(), e.alice, sandbox.CreateRequest{Name: "dev", Class: "standard", SSHKeys: []string{testKey}})
	if err != nil {
		t.Fatal(err)
	}
	e.waitState(t, sb.ID, sandbox.StateRunning)
	want := testKey + "\ncert-authority,principals=\"t-" + string(sb.ID) + "\" ssh-ed25519 AAAA gw"
	if got := e.drv.Env(sb.ID)["BERTH_AUTHORIZED_KEYS"]; got != want {
		t.Errorf("BERTH_AUTHORIZED_KEYS = %q, want %q", got, want)
	}
	if got, _ := e.svc.Get(t.Context(), e.alice, string(sb.ID)); !slices.Equal(got.SSHKeys, []string{testKey}) {
		t.Errorf("the sandbox's own keys became %q: the gateway's is not the owner's", got.SSHKeys)
	}
}

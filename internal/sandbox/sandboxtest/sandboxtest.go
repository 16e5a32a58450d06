// Package sandboxtest is a world for the tests of the sandbox service and
// of what it drives (agent runs): a real store in a temporary directory,
// the real account service, the fake driver on a test clock, and a local
// forge holding acme/app, with an operator, an administrator and two
// members of organisation acme, and a member of organisation other.
package sandboxtest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/driver/fake"
	"berth.dev/berth/internal/fakeclock"
	"berth.dev/berth/internal/forge/local"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/repository"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/store"
)

// Key is an ssh public key an engineer sandbox may take.
const Key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGQ0n8q0dvGXmfhT3x7Jt0yq4xNn6JkJ3sJ8QmV4c2Xk alice@laptop"

// ClassFile is the classes every organisation of the world starts with.
const ClassFile = `sandboxes:
  - name: standard
    image: localhost/berth-sandbox:1
    isolation: standard
    cpu: "2"
    memory: 4Gi
    default_ttl: 4h
    max_ttl: 24h
    purposes: [engineer]
  - name: agent
    image: localhost/berth-agent:1
    isolation: standard
    default_ttl: 1h
    max_ttl: 2h
    purposes: [agent]
  - name: big
    image: localhost/berth-sandbox:1
    isolation: standard
    cpu: "16"
    memory: 64Gi
    purposes: [engineer]
  - name: gpu
    image: localhost/berth-sandbox:1
    isolation: vm
    purposes: [engineer]
`

// World is what the services of a test run on.
type World struct {
	Store    *store.Store
	Path     string // the store's SQLite file
	Driver   *fake.Driver
	Forge    *local.Forge
	Repos    *repository.Service // over Forge
	Accounts *account.Service
	Clock    *fakeclock.Clock
	Log      *slog.Logger

	Operator, Admin, Alice, Bob, Stranger account.Principal
	Acme, Other                           account.Organisation
}

// New makes the world's store, clock, driver, forge and account service;
// a new organisation's classes are seeded by seed, which the caller's
// class service answers (Seed). People calls in the people.
func New(t *testing.T, seed func(ctx context.Context, org string) error, storeOpts ...store.Option) *World {
	t.Helper()
	ctx := t.Context()
	path := t.TempDir() + "/berth.db"
	st, err := store.Open(ctx, path, storeOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w := &World{Store: st, Path: path, Driver: fake.New(), Clock: fakeclock.New(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)),
		Log: slog.New(slog.NewTextHandler(t.Output(), nil))}
	w.Driver.SetClock(w.Clock.Now) // machines exit on the test's clock
	w.Forge = local.New(t.TempDir(), "http://gateway.test:8080", st, w.Clock.Now)
	if _, err := w.Forge.Import(ctx, "acme/app", Repo(t)); err != nil {
		t.Fatal(err)
	}
	w.Accounts = account.NewService(st, st, w.Clock.Now, seed, st, w.Log)
	w.Repos = repository.New(st, w.Accounts, repository.Config{Forge: w.Forge, PublicURL: "http://gateway.test:8080", Audit: st}, w.Log, w.Clock.Now)
	return w
}

// Config is the sandbox service's configuration in the world: the fake
// driver at the standard tier, the repositories of the local forge, the
// gateway at gateway.test:8080, audited in the store.
func (w *World) Config(t *testing.T) sandbox.Config {
	t.Helper()
	return sandbox.Config{
		Driver:       "fake",
		Runtimes:     map[sandbox.Tier]string{sandbox.TierStandard: ""},
		Repositories: w.Repos,
		PublicURL:    "http://gateway.test:8080",
		Audit:        w.Store,
	}
}

// ClassConfig is the class service's configuration in the world: the
// classes of ClassFile as every organisation's template, at the runtimes
// of the sandbox service's cfg.
func (w *World) ClassConfig(t *testing.T, cfg sandbox.Config) class.Config {
	t.Helper()
	classes, err := class.ParseFile(strings.NewReader(ClassFile))
	if err != nil {
		t.Fatal(err)
	}
	return class.Config{Template: classes, Runtimes: cfg.Runtimes}
}

// People makes the organisations and their people: the operator, acme's
// administrator ada, its members alice and bob, and other's member sam.
// acme's sandboxes may work on acme's repositories.
func (w *World) People(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	org, _, op, _, err := w.Accounts.Bootstrap(ctx, "acme", "default", "ops")
	if err != nil {
		t.Fatal(err)
	}
	w.Acme = org
	w.Operator = account.Principal{User: op}
	mk := func(orgRef, name string, role account.Role) account.Principal {
		u, err := w.Accounts.CreateUser(ctx, w.Operator, orgRef, name, "", role)
		if err != nil {
			t.Fatal(err)
		}
		return account.Principal{User: u}
	}
	w.Admin = mk("acme", "ada", account.RoleAdmin)
	w.Alice = mk("acme", "alice@acme.example", account.RoleMember)
	w.Bob = mk("acme", "bob", account.RoleMember)
	w.Other, _, err = w.Accounts.CreateOrganisation(ctx, w.Operator, "other", "")
	if err != nil {
		t.Fatal(err)
	}
	w.Stranger = mk("other", "sam", account.RoleMember)
	if err := w.Accounts.SetGuardrail(ctx, w.Operator, "acme", "", guardrail.Guardrail{AllowedRepos: []string{"acme"}}); err != nil {
		t.Fatal(err)
	}
}

// Repo makes a git repository with one commit on main and returns its path.
func Repo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return dir
}

// Within polls the row until the sandbox is in state want, failing the
// test when d passes first.
func (w *World) Within(t *testing.T, id sandbox.ID, want sandbox.State, d time.Duration) sandbox.Sandbox {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		sb, err := w.Store.GetSandbox(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if sb.State == want {
			return sb
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s (%s) is %s (%s) %s later, want %s", sb.Name, id, sb.State, sb.Reason, d, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// KelosImage is the image of the kelos class (KelosClass).
const KelosImage = "localhost/kelos-claude-code:1"

// KelosClass gives acme a class "kelos" whose image implements the Kelos
// interface (SPEC S13.6), with a setup command.
func (w *World) KelosClass(t *testing.T) {
	t.Helper()
	c, err := class.Parse(class.Spec{Name: "kelos", Image: KelosImage, Isolation: "standard",
		Purposes: []string{"agent"}, Contract: "kelos", SetupCommand: []string{"sh", "-c", "make deps"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Store.PutClasses(t.Context(), w.Acme.ID, []class.Class{c}); err != nil {
		t.Fatal(err)
	}
}

// Task is a multi-line task of exactly n bytes, with quotes, a shell
// variable and a multi-byte character on every line, ending in a
// character no tool trims.
func Task(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "step %d: greet \"é\" and leave $HOME alone\n", i)
	}
	s := b.String()[:n-1]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + strings.Repeat(".", n-len(s))
}

// Run starts svc's background work for the test's life.
func Run(t *testing.T, svc *sandbox.Service) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.Run(ctx, time.Hour)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// Engineer creates p's engineer sandbox name of class standard with Key.
func Engineer(t *testing.T, svc *sandbox.Service, p account.Principal, name string) sandbox.Sandbox {
	t.Helper()
	sb, err := svc.Create(t.Context(), p, sandbox.CreateRequest{Name: name, Class: "standard", SSHKeys: []string{Key}})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return sb
}

// Details lists the details of the audit log's entries of a sandbox with
// action, oldest first.
func (w *World) Details(t *testing.T, id sandbox.ID, action string) []string {
	t.Helper()
	events, _, err := w.Store.ListAudit(t.Context(), audit.Filter{Sandbox: string(id)}, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range events {
		if ev.Action == action {
			out = append(out, ev.Detail)
		}
	}
	return out
}

package class_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/store"
)

// templateFile is the deployment's sandboxes file in these tests: what
// every new organisation starts with.
const templateFile = `sandboxes:
  - {name: dev, image: localhost/berth-sandbox:1, isolation: standard, purposes: [engineer]}
  - {name: agent, image: localhost/berth-agent:1, isolation: standard, default_ttl: 1h, max_ttl: 2h, purposes: [agent]}
  - {name: gpu, image: localhost/berth-sandbox:1, isolation: vm}
`

// env is a real store in a temporary directory and the real account and
// class services, with an operator, an administrator and a member of
// organisation "acme".
type env struct {
	st                      *store.Store
	accounts                *account.Service
	svc                     *class.Service
	pools                   *pools
	operator, admin, member account.Principal
	acme                    account.Organisation
}

// pools counts the syncs the class service asks for.
type pools struct {
	mu    sync.Mutex
	syncs int
}

func (p *pools) SyncPools(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncs++
	return nil
}

func (p *pools) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.syncs
}

// newEnv makes the env on a deployment that maps the standard tier only.
func newEnv(t *testing.T, edit ...func(*class.Config)) *env {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, t.TempDir()+"/berth.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	template, err := class.ParseFile(strings.NewReader(templateFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg := class.Config{Template: template, AllowedImages: []string{"ghcr.io/acme/"}, Runtimes: map[class.Tier]string{class.TierStandard: ""}}
	for _, f := range edit {
		f(&cfg)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	e := &env{st: st, pools: &pools{}}
	e.accounts = account.NewService(st, st, time.Now, func(ctx context.Context, org string) error { return e.svc.Seed(ctx, org) }, st, log)
	e.svc = class.NewService(st, e.accounts, e.pools, cfg, log, time.Now)
	org, _, op, _, err := e.accounts.Bootstrap(ctx, "acme", "default", "ops")
	if err != nil {
		t.Fatal(err)
	}
	e.acme, e.operator = org, account.Principal{User: op}
	mk := func(name string, role account.Role) account.Principal {
		u, err := e.accounts.CreateUser(ctx, e.operator, "acme", name, "", role)
		if err != nil {
			t.Fatal(err)
		}
		return account.Principal{User: u}
	}
	e.admin, e.member = mk("ada", account.RoleAdmin), mk("mel", account.RoleMember)
	return e
}

// names lists the classes' names.
func names(t *testing.T, e *env, p account.Principal) []string {
	t.Helper()
	got, _, err := e.svc.List(t.Context(), p, "", paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range got {
		out = append(out, c.Name)
	}
	return out
}

// TestNewOrganisationsGetTheTemplate: an organisation starts with its own
// copies of the sandboxes file's classes; changing one of them changes
// no other organisation's.
func TestNewOrganisationsGetTheTemplate(t *testing.T) {
	e := newEnv(t)
	if got, want := names(t, e, e.member), []string{"agent", "dev", "gpu"}; !slices.Equal(got, want) {
		t.Fatalf("acme's classes: %v; want the template's %v", got, want)
	}
	if _, _, err := e.accounts.CreateOrganisation(t.Context(), e.operator, "globex", ""); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Delete(t.Context(), e.admin, "", "gpu"); err != nil {
		t.Fatal(err)
	}
	got, _, err := e.svc.List(t.Context(), e.operator, "globex", paging.Request{})
	if err != nil || len(got) != 3 {
		t.Errorf("globex's classes after acme deleted one: %v, %v; want the template's three", got, err)
	}
}

// TestListSaysWhatCanStart: each class says whether the caller could
// start one now, and why not: a tier the deployment does not map, a
// class larger than the quota, a deployment without sandboxes.
func TestListSaysWhatCanStart(t *testing.T) {
	e := newEnv(t)
	one := quantity.Millicores(1000)
	if err := e.accounts.SetGuardrail(t.Context(), e.operator, "acme", "", guardrail.Guardrail{MaxSandboxCPU: &one}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Apply(t.Context(), e.admin, "", strings.NewReader("sandboxes:\n  - {name: small, image: localhost/berth-sandbox:1, isolation: standard, cpu: 1}\n")); err != nil {
		t.Fatal(err)
	}
	got, _, err := e.svc.List(t.Context(), e.member, "", paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"small": "",
		"dev":   "max_sandbox_cpu", // 2 cores by default, past the quota's 1
		"gpu":   "tier vm is not mapped (BERTH_SANDBOX_RUNTIME_VM)",
	}
	for _, c := range got {
		reason, ok := want[c.Name]
		if !ok {
			continue
		}
		if c.Startable != (reason == "") || !strings.Contains(c.Reason, reason) {
			t.Errorf("class %s: startable %v, reason %q; want %q", c.Name, c.Startable, c.Reason, reason)
		}
	}

	none := newEnv(t, func(c *class.Config) { c.NoSandboxes = true })
	got, _, err = none.svc.List(t.Context(), none.member, "", paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got {
		if c.Startable || c.Reason != "this deployment runs no sandboxes" {
			t.Errorf("class %s on a deployment without sandboxes: startable %v, reason %q", c.Name, c.Startable, c.Reason)
		}
	}
}

// TestApplyAndDelete: only an organisation's administrators (and
// operators) write its classes; an administrator only with images the
// image rule allows; a tier the deployment does not map is a warning; the
// pools follow every change.
func TestApplyAndDelete(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	file := "sandboxes:\n  - {name: dev, image: ghcr.io/acme/dev:2, isolation: standard}\n  - {name: big, image: localhost/berth-sandbox:1, isolation: vm}\n"
	if _, err := e.svc.Apply(ctx, e.member, "", strings.NewReader(file)); !errors.Is(err, fault.Forbidden) {
		t.Errorf("a member applies: %v; want forbidden", err)
	}
	res, err := e.svc.Apply(ctx, e.admin, "", strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Created, []string{"big"}) || !slices.Equal(res.Updated, []string{"dev"}) ||
		len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "BERTH_SANDBOX_RUNTIME_VM") {
		t.Errorf("apply: %+v; want big created, dev updated, a warning for the vm tier", res)
	}
	evil := "sandboxes:\n  - {name: dev, image: evil.example/miner:1}\n"
	if _, err := e.svc.Apply(ctx, e.admin, "", strings.NewReader(evil)); !errors.Is(err, fault.Forbidden) || !strings.Contains(err.Error(), "evil.example/miner:1") {
		t.Errorf("an administrator sets an image outside the rule: %v; want forbidden naming it", err)
	}
	if _, err := e.svc.Apply(ctx, e.operator, "acme", strings.NewReader(evil)); err != nil {
		t.Errorf("an operator sets it: %v", err)
	}
	if err := e.svc.Delete(ctx, e.member, "", "big"); !errors.Is(err, fault.Forbidden) {
		t.Errorf("a member deletes: %v; want forbidden", err)
	}
	if err := e.svc.Delete(ctx, e.admin, "", "big"); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Delete(ctx, e.admin, "", "big"); !errors.Is(err, fault.NotFound) {
		t.Errorf("deleting it again: %v; want not found", err)
	}
	if got := e.pools.count(); got != 3 {
		t.Errorf("the pools were synced %d times; want once a change (two applies, a delete)", got)
	}
}

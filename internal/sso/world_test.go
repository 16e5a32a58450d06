package sso_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/idp"
	"berth.dev/berth/internal/oidctest"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/secret"
	"berth.dev/berth/internal/sso"
	"berth.dev/berth/internal/store"
)

// callback is berth's redirect URI at the provider; never requested:
// oidctest.Authorize stops there, as the browser would land on the panel.
const callback = "http://127.0.0.1:1/sign-in/sso/callback"

// world is the real provider (ory/hydra, with the test's login app), a
// real store (SQLite), the account service, and the sign-in service under
// test, with two organisations: acme (the bootstrap's, its operator ops)
// and other.
type world struct {
	hydra    *oidctest.Provider
	st       *store.Store
	accounts *account.Service
	svc      *sso.Service
	provider *idp.Provider
	op       account.Principal
	ends     *endings
	cfg      sso.Config
}

// endings records what the service asked the sandboxes to end (package
// sandbox's EndOwnerBecause; the e2e tests end real ones).
type endings struct {
	mu     sync.Mutex
	owners []string
	whys   []string
}

func (e *endings) EndOwnerBecause(_ context.Context, actor, why, owner string) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if actor != "" {
		return 0, errors.New("the identity provider's cut-off is berth's own doing: actor must be \"\"")
	}
	e.owners, e.whys = append(e.owners, owner), append(e.whys, why)
	return 1, nil
}

func (e *endings) of(owner string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, o := range e.owners {
		if o == owner {
			n++
		}
	}
	return n
}

// people of the provider: ada administers acme (platform), bob is a member
// (engineering), carol is in both acme and other, otto is an operator by
// the deployment's own group, eve is refused at login, nora has no group
// berth maps.
func people() []oidctest.User {
	return []oidctest.User{
		{Subject: "ada", Email: "ada@example.test", Name: "Ada", Groups: []string{"platform", "engineering"}},
		{Subject: "bob", Email: "bob@example.test", Groups: []string{"engineering"}},
		{Subject: "carol", Email: "carol@example.test", Groups: []string{"engineering", "research"}},
		{Subject: "otto", Email: "otto@example.test", Groups: []string{"berth-operators"}},
		{Subject: "eve", Email: "eve@example.test", Refuse: true},
		{Subject: "nora", Email: "nora@example.test", Groups: []string{"sales"}},
	}
}

func newWorld(t *testing.T, opts ...func(*sso.Config)) *world {
	t.Helper()
	ctx := t.Context()
	h := oidctest.Start(t)
	if err := h.CreateClient(ctx, oidctest.Client{ID: "berth", Secret: "secret-of-berth", RedirectURIs: []string{callback}}); err != nil {
		t.Fatal(err)
	}
	for _, u := range people() {
		h.AddUser(u)
	}
	p, err := idp.New(ctx, providerConfig(h, "secret-of-berth"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, t.TempDir()+"/berth.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	accounts := account.NewService(st, st, time.Now, nil, st, nil)
	_, _, opUser, opKey, err := accounts.Bootstrap(ctx, "acme", "default", "ops")
	if err != nil {
		t.Fatal(err)
	}
	op, err := accounts.Authenticate(ctx, opKey.Secret.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	_ = opUser
	if _, _, err := accounts.CreateOrganisation(ctx, op, "other", ""); err != nil {
		t.Fatal(err)
	}
	w := &world{hydra: h, st: st, accounts: accounts, provider: p, op: op, ends: &endings{}}
	w.cfg = sso.Config{Provider: p, ClientSecret: secret.New("secret-of-berth"), Operators: []string{"berth-operators"}, Start: "/sign-in/sso/cli"}
	for _, o := range opts {
		o(&w.cfg)
	}
	if w.svc, err = sso.New(w.cfg, st, w.ends, st, nil, nil); err != nil {
		t.Fatal(err)
	}
	w.mapping(t, "acme", []string{"engineering"}, []string{"platform"})
	w.mapping(t, "other", []string{"research"}, nil)
	return w
}

// scopes are what the deployment asks for: the groups, and a refresh
// token.
var scopes = []string{"openid", "email", "profile", "groups", "offline_access"}

func providerConfig(h *oidctest.Provider, clientSecret string) idp.Config {
	return idp.Config{Issuer: h.Issuer, ClientID: "berth", ClientSecret: secret.New(clientSecret), RedirectURL: callback, Scopes: scopes}
}

func (w *world) mapping(t *testing.T, org string, members, admins []string) {
	t.Helper()
	if _, err := w.svc.SetMapping(t.Context(), w.op, org, members, admins); err != nil {
		t.Fatal(err)
	}
}

// signIn plays a browser signing in to the panel as subject, asking for
// org ("" any): the sign-in begins, the browser goes through the
// provider and comes back with the cookie it was given.
func (w *world) signIn(t *testing.T, subject, org string) (sso.Outcome, error) {
	t.Helper()
	return w.finish(t, subject, org, nil, "")
}

// finish runs a sign-in (cli nil: the panel's) as subject; a cookie other
// than "" is sent instead of the one the browser was given.
func (w *world) finish(t *testing.T, subject, org string, cli *sso.CLI, cookie string) (sso.Outcome, error) {
	t.Helper()
	ctx := t.Context()
	w.hydra.SignInAs(subject)
	to, ck, err := w.svc.Begin(ctx, "/sandboxes", org, cli)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := oidctest.Authorize(ctx, to, callback)
	if err != nil {
		t.Fatal(err)
	}
	if cookie == "" {
		cookie = ck.Reveal()
	}
	return w.svc.Finish(ctx, cb.Query(), cookie)
}

// cliLogin is berth login --sso as subject: the sign-in with a challenge,
// the code read off the redirect to the CLI's listener, traded with the
// verifier.
func (w *world) cliLogin(t *testing.T, subject string) (account.User, account.NewKeyResult, error) {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	out, err := w.finish(t, subject, "", &sso.CLI{Port: 43123, Challenge: challenge(verifier), State: "cli-state"}, "")
	if err != nil {
		return account.User{}, account.NewKeyResult{}, err
	}
	code := codeOf(t, out.Redirect, 43123, "cli-state")
	u, _, k, err := w.svc.Exchange(t.Context(), code, verifier, "laptop")
	return u, k, err
}

func challenge(verifier string) string {
	s := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(s[:])
}

// codeOf reads the code off a redirect to the CLI's listener on port,
// which must hand back the CLI's state.
func codeOf(t *testing.T, redirect string, port int, state string) string {
	t.Helper()
	u, err := url.Parse(redirect)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "http" || u.Host != "127.0.0.1:"+strconv.Itoa(port) || u.Path != "/callback" {
		t.Fatalf("the CLI's sign-in went to %s, not its listener on port %d", redirect, port)
	}
	if u.Query().Get("state") != state || u.Query().Get("code") == "" {
		t.Fatalf("the CLI's callback %s: want its state and a code", redirect)
	}
	return u.Query().Get("code")
}

// user finds a user of org by name.
func (w *world) user(t *testing.T, org, name string) account.User {
	t.Helper()
	us, _, err := w.accounts.Users(t.Context(), w.op, org, paging.Request{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		if u.Name == name {
			return u
		}
	}
	t.Fatalf("no user %s in %s", name, org)
	return account.User{}
}

// events are the audit log's entries of action (every one's).
func (w *world) events(t *testing.T, action string) []audit.Event {
	t.Helper()
	all, _, err := w.st.ListAudit(t.Context(), audit.Filter{}, paging.Request{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(all, func(e audit.Event) bool { return e.Action != action })
}

// has reports whether one of events has target and a detail holding
// every one of words.
func has(events []audit.Event, outcome, target string, words ...string) bool {
	return slices.ContainsFunc(events, func(e audit.Event) bool {
		if e.Target != target || (outcome != "" && e.Outcome != outcome) {
			return false
		}
		for _, w := range words {
			if !strings.Contains(e.Detail, w) {
				return false
			}
		}
		return true
	})
}

// works reports whether key still authenticates.
func (w *world) works(t *testing.T, key account.NewKeyResult) bool {
	t.Helper()
	_, err := w.accounts.Authenticate(t.Context(), key.Secret.Reveal())
	return err == nil
}

package gateway_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/idp"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/secret"
	"berth.dev/berth/internal/sso"
)

// The matrix's callers who signed in through the organisation's identity
// provider (issue 20): alice's key and panel session from signing in
// (cSSO), and dora's, cut off by the provider since (cCut). Both are made
// as people make them, through the gateway's pages and API, never by
// writing rows.

// The provider's people and groups. acme's mapping (set by the operator
// over the API) makes both groups members of acme.
const (
	aliceSubject = "00u-alice"
	doraSubject  = "00u-dora"
	ssoMapping   = `{"members":["acme-people","acme-contractors"],"administrators":["acme-admins"]}`
	// cliPort is where berth login --sso's loopback listener would wait.
	cliPort = "49152"
)

// withSSO gives the world the stand-in provider, as p.
func withSSO(p **standIn) func(*worldConfig) {
	return func(c *worldConfig) {
		c.emails = map[string]string{"alice": "alice@acme.test"}
		c.sso = func(w *world, sc *sso.Config) {
			*p = newStandIn(w.url + "/sign-in/sso/callback")
			sc.Provider, sc.ClientSecret, sc.Start = *p, secret.New("the matrix's client secret"), "/sign-in/sso/cli"
			// Every live session is due whenever the matrix asks for a
			// refresh (RefreshDue): the world runs no refresh loop.
			sc.RefreshEvery = time.Nanosecond
		}
	}
}

// signInThroughIdP makes the two callers who signed in through the
// provider. alice's identity carries her verified email, so her first
// sign-in links the user alice; dora is made at her first sign-in. Then
// the provider stops listing dora's group, and the refresh cuts her off.
func (m *matrix) signInThroughIdP(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	m.idp.person(idp.Identity{Subject: aliceSubject, Email: "alice@acme.test", EmailVerified: true, Username: "alice", Groups: []string{"acme-people"}})
	m.idp.person(idp.Identity{Subject: doraSubject, Email: "dora@acme.test", EmailVerified: true, Username: "dora", Groups: []string{"acme-contractors"}})
	if st, _, body := m.call(t, m.client, "PUT", "/api/v1/orgs/acme/sso", m.opKey, ssoMapping); st != http.StatusOK {
		t.Fatalf("set acme's mapping: %d %s", st, body)
	}
	before := len(m.acmeUsers(t))
	m.keys[cSSO] = m.ssoKey(t, cSSO, aliceSubject)
	alice, err := m.accounts.User(ctx, m.users["alice"].ID)
	if err != nil {
		t.Fatal(err)
	}
	if alice.Issuer != m.idp.Issuer() || alice.Subject != aliceSubject {
		t.Fatalf("alice's sign-in did not link her user: issuer %q, subject %q", alice.Issuer, alice.Subject)
	}
	if p := m.principal(t, m.keys[cSSO]); p.User.ID != alice.ID {
		t.Fatalf("alice's key from signing in is %s's", p.User.Name)
	}
	if after := len(m.acmeUsers(t)); after != before {
		t.Fatalf("alice's sign-in made a user: acme has %d, had %d", after, before)
	}

	m.keys[cCut] = m.ssoKey(t, cCut, doraSubject)
	dora := m.principal(t, m.keys[cCut]).User
	if dora.Name != "dora@acme.test" || dora.Role != account.RoleMember || dora.Subject != doraSubject {
		t.Fatalf("dora's first sign-in made %+v, want the member dora@acme.test (named by her email) linked to %s", dora, doraSubject)
	}
	m.users["dora"] = dora
	b := m.ssoSignIn(t, cCut, doraSubject)
	m.browsers[cCut], m.sessionKeys[cCut] = b, b.key

	m.idp.setGroups(doraSubject)
	if _, err := m.sso.RefreshDue(ctx); err != nil {
		t.Fatal(err)
	}
	if dora, err = m.accounts.User(ctx, dora.ID); err != nil {
		t.Fatal(err)
	}
	if !dora.Disabled || !dora.DisabledByIdP {
		t.Fatalf("after the provider dropped her group, dora is disabled %t, by the provider %t", dora.Disabled, dora.DisabledByIdP)
	}
	for _, k := range []string{m.keys[cCut], b.key} {
		if _, err := m.accounts.Authenticate(ctx, k); err == nil {
			t.Fatal("a key of dora's still works after she was cut off")
		}
	}
	// The refresh left alice, whose group the provider still lists, in.
	m.principal(t, m.keys[cSSO])
}

func (m *matrix) acmeUsers(t *testing.T) []account.User {
	t.Helper()
	us, _, err := m.accounts.Users(t.Context(), m.principal(t, m.opKey), "acme", paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	return us
}

// ssoKey gets a key of subject's as berth login --sso does: its browser
// (c's) opens the panel's CLI sign-in with the loopback port, the PKCE
// challenge and a state of the CLI's, is sent to the provider and back to
// the panel's callback, which sends it on to the loopback listener with a
// one-time code; the CLI trades the code with its verifier for a key.
// The trade is sent from the world's own address: the code exchange is
// limited per client address, and each caller's own requests are the
// table's rows'.
func (m *matrix) ssoKey(t *testing.T, c caller, subject string) string {
	t.Helper()
	verifier, state := rand.Text()+rand.Text(), "cli-"+rand.Text()
	b := m.newBrowser(t, c)
	q := url.Values{"port": {cliPort}, "challenge": {s256(verifier)}, "state": {state}}
	st, h, body := m.get(t, b, "/sign-in/sso/cli?"+q.Encode())
	if st != http.StatusSeeOther {
		t.Fatalf("the CLI's sign-in page: %d\n%s", st, body)
	}
	back := m.idp.authorize(t, h.Get("Location"), subject)
	st, h, body = m.get(t, b, back.RequestURI())
	if st != http.StatusSeeOther {
		t.Fatalf("the callback of the CLI's sign-in: %d\n%s", st, body)
	}
	to, err := url.Parse(h.Get("Location"))
	if err != nil || to.Scheme != "http" || to.Host != "127.0.0.1:"+cliPort || to.Path != "/callback" || to.Query().Get("state") != state || to.Query().Get("code") == "" {
		t.Fatalf("the callback sent the browser to %q, not the CLI's listener with a code and its state", h.Get("Location"))
	}
	req, _ := json.Marshal(api.SSOToken{Code: to.Query().Get("code"), Verifier: verifier, KeyName: "matrix"})
	st, _, body = m.call(t, m.client, "POST", api.SSOTokenPath, "", string(req))
	if st != http.StatusCreated {
		t.Fatalf("trading the CLI's code: %d %s", st, body)
	}
	var e api.Enrollment
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Key.Secret == "" {
		t.Fatalf("trading the CLI's code: %v\n%s", err, body)
	}
	return e.Key.Secret
}

// ssoSignIn signs a new browser of c's in to the panel through the
// provider as subject: the panel's sign-in button, the provider, the
// callback's page, which sets the session and goes on to the next page.
func (m *matrix) ssoSignIn(t *testing.T, c caller, subject string) *browser {
	t.Helper()
	b := m.newBrowser(t, c)
	st, h, body := m.get(t, b, "/sign-in/sso?next=%2Fquotas")
	if st != http.StatusSeeOther {
		t.Fatalf("the panel's sign-in through the provider: %d\n%s", st, body)
	}
	back := m.idp.authorize(t, h.Get("Location"), subject)
	if st, _, body = m.get(t, b, back.RequestURI()); st != http.StatusOK || !strings.Contains(body, "url=/quotas") {
		t.Fatalf("the callback of the panel's sign-in: %d, want 200 and a page going on to /quotas\n%s", st, body)
	}
	u, _ := url.Parse(m.url)
	for _, ck := range b.c.Jar.Cookies(u) {
		if ck.Name == "berth_session" {
			_, b.key, _ = strings.Cut(ck.Value, ".")
		}
	}
	if b.key == "" {
		t.Fatal("the callback of the panel's sign-in set no session")
	}
	if st, _, _ := m.get(t, b, "/quotas"); st != http.StatusOK {
		t.Fatalf("the quotas page after signing in through the provider: %d", st)
	}
	return b
}

// call sends body to path as method, with key as the bearer credential
// ("" none), from c.
func (m *matrix) call(t *testing.T, c *http.Client, method, path, key, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, m.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return m.do(t, c, req)
}

// The identity provider of the authorization matrix's world: where its
// sign-ins through the provider come from. The protocol itself (discovery,
// the token exchange, the ID token's checks) is package idp's, tested
// against a real provider (ory/hydra, internal/oidctest); this stand-in
// only hands the gateway the people the test names, but refuses what a
// real one refuses: a code it did not give or gave already, a state or a
// nonce not the code's, a verifier whose S256 is not the code's challenge.

// standIn is the stand-in provider (an sso.Provider).
type standIn struct {
	issuer   string
	client   string
	redirect string // berth's callback, as registered with the provider

	mu      sync.Mutex
	people  map[string]idp.Identity // by subject: who they are now
	codes   map[string]grant        // codes given and not yet used
	refresh map[string]string       // refresh token → subject
}

var _ sso.Provider = (*standIn)(nil)

// grant is what an authorization gave a code for.
type grant struct {
	state, nonce, challenge string
	subject                 string
}

func newStandIn(redirect string) *standIn {
	return &standIn{issuer: "https://idp.matrix.test", client: "berth", redirect: redirect,
		people: map[string]idp.Identity{}, codes: map[string]grant{}, refresh: map[string]string{}}
}

// person scripts who the provider says subject is (issuer set here).
func (p *standIn) person(id idp.Identity) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id.Issuer = p.issuer
	p.people[id.Subject] = id
}

// setGroups changes the groups the provider lists for subject.
func (p *standIn) setGroups(subject string, groups ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.people[subject]
	id.Groups = groups
	p.people[subject] = id
}

func (p *standIn) Issuer() string { return p.issuer }

// ClientID is berth's client at the stand-in.
func (p *standIn) ClientID() string { return "berth" }

// authorizeURL is the provider's authorization endpoint.
func (p *standIn) authorizeURL() string { return p.issuer + "/authorize" }

// Start draws a fresh state, nonce and PKCE verifier, as package idp's
// does, and the URL of the provider's authorization endpoint for them.
func (p *standIn) Start() idp.Attempt {
	a := idp.Attempt{State: rand.Text(), Nonce: rand.Text(), Verifier: rand.Text() + rand.Text()}
	q := url.Values{"response_type": {"code"}, "client_id": {p.client}, "redirect_uri": {p.redirect}, "scope": {"openid email profile"},
		"state": {a.State}, "nonce": {a.Nonce}, "code_challenge": {s256(a.Verifier)}, "code_challenge_method": {"S256"}}
	a.URL = p.authorizeURL() + "?" + q.Encode()
	return a
}

func s256(verifier string) string {
	h := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// authorize is the person subject signing in at the provider's page the
// browser was sent to (to: the authorization URL): it returns where the
// provider sends the browser back, berth's callback with a new code and
// the state.
func (p *standIn) authorize(t *testing.T, to, subject string) *url.URL {
	t.Helper()
	u, err := url.Parse(to)
	if err != nil || u.Scheme+"://"+u.Host+u.Path != p.authorizeURL() {
		t.Fatalf("the browser was sent to %q, not the provider's authorization endpoint %s", to, p.authorizeURL())
	}
	q := u.Query()
	for name, want := range map[string]string{"response_type": "code", "client_id": p.client, "redirect_uri": p.redirect, "code_challenge_method": "S256"} {
		if q.Get(name) != want {
			t.Fatalf("the authorization request's %s is %q, want %q", name, q.Get(name), want)
		}
	}
	g := grant{state: q.Get("state"), nonce: q.Get("nonce"), challenge: q.Get("code_challenge"), subject: subject}
	if g.state == "" || g.nonce == "" || len(g.challenge) != 43 {
		t.Fatalf("the authorization request lacks its state, nonce or S256 challenge: %s", to)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.people[subject]; !ok {
		t.Fatalf("the provider knows no %s", subject)
	}
	code := rand.Text()
	p.codes[code] = g
	back, err := url.Parse(p.redirect)
	if err != nil {
		t.Fatal(err)
	}
	back.RawQuery = url.Values{"code": {code}, "state": {g.state}}.Encode()
	return back
}

// Finish trades the code the browser came back with, as the token
// endpoint would: once, with the attempt's state, nonce and verifier.
func (p *standIn) Finish(_ context.Context, a idp.Attempt, query url.Values) (idp.Identity, error) {
	if e := query.Get("error"); e != "" {
		return idp.Identity{}, fmt.Errorf("%w: the provider answered %s", idp.ErrRefused, e)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	code := query.Get("code")
	g, ok := p.codes[code]
	delete(p.codes, code) // a code is spent by any attempt to use it
	switch {
	case !ok:
		return idp.Identity{}, fmt.Errorf("%w: the code is unknown or used", idp.ErrRefused)
	case query.Get("state") != a.State || a.State != g.state:
		return idp.Identity{}, fmt.Errorf("%w: the state is not the code's", idp.ErrRefused)
	case a.Nonce != g.nonce:
		return idp.Identity{}, fmt.Errorf("%w: the ID token's nonce is not this sign-in's", idp.ErrRefused)
	case s256(a.Verifier) != g.challenge:
		return idp.Identity{}, fmt.Errorf("%w: the verifier is not the challenge's", idp.ErrRefused)
	}
	id := p.people[g.subject]
	id.Groups = slices.Clone(id.Groups)
	token := rand.Text()
	p.refresh[token] = g.subject
	id.Refresh = secret.New(token)
	return id, nil
}

// Refresh answers with who the person is now (their groups as the
// provider lists them now), the refresh token unchanged; a token it did
// not give is refused.
func (p *standIn) Refresh(_ context.Context, token string) (idp.Refreshed, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	subject, ok := p.refresh[token]
	if !ok {
		return idp.Refreshed{}, fmt.Errorf("%w: invalid_grant", idp.ErrRevoked)
	}
	id := p.people[subject]
	id.Groups = slices.Clone(id.Groups)
	id.Refresh = secret.New(token)
	return idp.Refreshed{Identity: &id, Refresh: id.Refresh}, nil
}

// TestStandInRefuses checks the stand-in refuses what a real provider
// does, so the matrix's sign-ins prove what they seem to.
func TestStandInRefuses(t *testing.T) {
	p := newStandIn("http://127.0.0.1:1/sign-in/sso/callback")
	p.person(idp.Identity{Subject: "dora", Email: "dora@acme.test", EmailVerified: true, Groups: []string{"acme-people"}})
	ctx := t.Context()
	// started is an attempt the browser was sent to the provider for, and
	// the query it came back with.
	started := func() (idp.Attempt, url.Values) {
		a := p.Start()
		return a, p.authorize(t, a.URL, "dora").Query()
	}
	other := p.Start()
	for _, c := range []struct {
		name   string
		change func(a *idp.Attempt, q url.Values)
	}{
		{"an unknown code", func(_ *idp.Attempt, q url.Values) { q.Set("code", "NOSUCHCODE") }},
		{"another attempt's state", func(a *idp.Attempt, q url.Values) { a.State = other.State; q.Set("state", other.State) }},
		{"another attempt's nonce", func(a *idp.Attempt, _ url.Values) { a.Nonce = other.Nonce }},
		{"another attempt's verifier", func(a *idp.Attempt, _ url.Values) { a.Verifier = other.Verifier }},
		{"the provider's error", func(_ *idp.Attempt, q url.Values) { q.Set("error", "access_denied") }},
	} {
		a, q := started()
		c.change(&a, q)
		if _, err := p.Finish(ctx, a, q); !errors.Is(err, idp.ErrRefused) {
			t.Errorf("%s: %v, want it refused", c.name, err)
		}
	}
	a, q := started()
	id, err := p.Finish(ctx, a, q)
	if err != nil || id.Subject != "dora" || id.Issuer != p.Issuer() || id.Refresh.Reveal() == "" {
		t.Fatalf("a good sign-in: %+v, %v", id, err)
	}
	if _, err := p.Finish(ctx, a, q); !errors.Is(err, idp.ErrRefused) {
		t.Errorf("a code used again: %v, want it refused", err)
	}
	p.setGroups("dora")
	r, err := p.Refresh(ctx, id.Refresh.Reveal())
	if err != nil || r.Identity == nil || len(r.Identity.Groups) != 0 {
		t.Errorf("a refresh after her group was taken away: %+v, %v", r, err)
	}
	if _, err := p.Refresh(ctx, "NOSUCHTOKEN"); !errors.Is(err, idp.ErrRevoked) {
		t.Errorf("an unknown refresh token: %v, want it revoked", err)
	}
}

// Package oidctest runs a real OpenID Connect provider, ory/hydra v2, on
// loopback for berth's sign-in tests, with a login and consent app of the
// test that signs in whichever scripted user the test names. The app is
// also hydra's token hook: a refresh reads the user again, as a real IdP
// (Keycloak, Okta) does, so a test changes a person at the provider
// (SetGroups, SetRefused, AddUser, RevokeSessions) and sees the next
// refresh follow.
//
// The binary comes from scripts/build-hydra (BERTH_TEST_HYDRA); tests skip
// without it. Each Start runs `hydra serve all --dev` with DSN=memory (the
// schema is migrated at start-up, nothing outlives the process) on two
// free loopback ports, its issuer plain http (allowed by --dev). What was
// learnt about hydra v2.3.0 (flags, variables, what it does not support:
// no device authorization grant) is in docs/hydra.md.
package oidctest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvHydra names the hydra binary, as scripts/build-hydra prints it.
const EnvHydra = "BERTH_TEST_HYDRA"

// User is a person the login app signs in: its Subject is the ID token's
// sub; Email, Name, Username and Groups become the ID token's email, name,
// preferred_username and groups claims. A user with Refuse set is refused
// at login (access_denied), and their refreshes too, as an IdP refuses a
// disabled account.
//
// A refresh reads the user again (the token hook, login.go): a change made
// with AddUser, SetGroups or SetRefused shows in the next refreshed ID
// token, or refuses it.
type User struct {
	Subject  string
	Email    string
	Name     string
	Username string
	Groups   []string
	Refuse   bool
}

// Provider is a running hydra with its login and consent app.
type Provider struct {
	// Issuer is the provider's issuer URL, as the discovery document and
	// the ID tokens' iss say it (no trailing slash).
	Issuer string
	// Admin is the base URL of hydra's admin API.
	Admin string
	// Log is hydra's log file (a failed test prints its tail).
	Log string

	login  *httptest.Server
	client *http.Client
	stop   func() // stops hydra, once

	mu      sync.Mutex
	users   map[string]User // by subject
	current string          // the subject a login without login_hint gets
}

// Option changes how Start runs hydra.
type Option func(*config)

type config struct {
	env []string
}

// WithEnv adds hydra configuration as environment variables ("KEY=value",
// e.g. TTL_ID_TOKEN=2s or LOG_LEVEL=debug); see docs/hydra.md.
func WithEnv(kv ...string) Option {
	return func(c *config) { c.env = append(c.env, kv...) }
}

// Binary returns BERTH_TEST_HYDRA's binary, or skips the test without it.
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(EnvHydra)
	if bin == "" {
		t.Skipf("%s not set (BERTH_TEST_HYDRA=$(scripts/build-hydra))", EnvHydra)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v", EnvHydra, err)
	}
	return bin
}

// Start runs hydra and the login app until the test ends, and returns when
// hydra answers /health/ready on both ports. It skips without
// BERTH_TEST_HYDRA.
func Start(t testing.TB, opts ...Option) *Provider {
	t.Helper()
	bin := Binary(t)
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	p := &Provider{
		users:  map[string]User{},
		client: &http.Client{Timeout: 30 * time.Second},
	}
	p.login = httptest.NewServer(p.loginApp())
	t.Cleanup(p.login.Close)

	dir := t.TempDir()
	// The ports are picked free and handed to hydra, which cannot say which
	// port it bound; another process may take one in between, so a start
	// that fails is tried again on new ports.
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		p.Log = filepath.Join(dir, "hydra-"+strconv.Itoa(attempt)+".log")
		if err = p.run(t, bin, cfg); err == nil {
			log := p.Log
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("hydra's log (%s), its end:\n%s", log, tail(log))
				}
			})
			return p
		}
	}
	t.Fatalf("hydra did not start: %v\n%s", err, tail(p.Log))
	return nil
}

// run starts hydra once and waits for it to be ready; t.Cleanup stops it.
func (p *Provider) run(t testing.TB, bin string, cfg config) error {
	public, err := freePort()
	if err != nil {
		return err
	}
	admin, err := freePort()
	if err != nil {
		return err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	p.Issuer = "http://127.0.0.1:" + strconv.Itoa(public)
	p.Admin = "http://127.0.0.1:" + strconv.Itoa(admin)
	log, err := os.Create(p.Log)
	if err != nil {
		return err
	}
	defer log.Close()

	cmd := exec.Command(bin, "serve", "all", "--dev", "--sqa-opt-out")
	cmd.Dir = filepath.Dir(p.Log)
	cmd.Stdout, cmd.Stderr = log, log
	// The token hook is always on: a refresh re-reads the user (login.go).
	// Discovery lists the scopes a real IdP's does, so a client that reads
	// scopes_supported finds groups there.
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Dir(p.Log),
		"DSN=memory",
		"SECRETS_SYSTEM=" + hex.EncodeToString(secret),
		"URLS_SELF_ISSUER=" + p.Issuer,
		"URLS_LOGIN=" + p.login.URL + "/login",
		"URLS_CONSENT=" + p.login.URL + "/consent",
		"URLS_ERROR=" + p.login.URL + "/error",
		"OAUTH2_TOKEN_HOOK_URL=" + p.login.URL + "/token-hook",
		"WEBFINGER_OIDC_DISCOVERY_SUPPORTED_SCOPE=" + strings.Join(SupportedScopes, ","),
		"WEBFINGER_OIDC_DISCOVERY_SUPPORTED_CLAIMS=email,email_verified,name,preferred_username,groups",
		"SERVE_PUBLIC_HOST=127.0.0.1",
		"SERVE_PUBLIC_PORT=" + strconv.Itoa(public),
		"SERVE_ADMIN_HOST=127.0.0.1",
		"SERVE_ADMIN_PORT=" + strconv.Itoa(admin),
		"SQA_OPT_OUT=true",
	}, cfg.env...)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.ready(ctx, p.Admin) && p.ready(ctx, p.Issuer) {
			p.stop = sync.OnceFunc(stop)
			t.Cleanup(p.stop)
			return nil
		}
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("hydra exited: %v", err)
		case <-ctx.Done():
			stop()
			return fmt.Errorf("hydra not ready after 60s")
		case <-tick.C:
		}
	}
}

func (p *Provider) ready(ctx context.Context, base string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health/ready", nil)
	if err != nil {
		return false
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// SupportedScopes are the scopes the discovery document lists beside
// hydra's own (openid, offline_access, offline), as a real IdP's lists
// its groups scope. WithEnv("WEBFINGER_OIDC_DISCOVERY_SUPPORTED_SCOPE=…")
// lists others instead.
var SupportedScopes = []string{"email", "profile", "groups"}

// Stop stops hydra before the test ends (it is stopped then anyway): its
// ports refuse connections from then on, as a provider that is down.
func (p *Provider) Stop() { p.stop() }

// AddUser makes u known to the login app; the first one added is who a
// login without a login_hint signs in, until SignInAs says otherwise.
// Adding a subject again replaces it (new groups, or Refuse).
func (p *Provider) AddUser(u User) {
	p.mu.Lock()
	defer p.mu.Unlock()
	u.Groups = slices.Clone(u.Groups)
	p.users[u.Subject] = u
	if p.current == "" {
		p.current = u.Subject
	}
}

// SetGroups changes subject's groups at the provider, as an administrator
// of the IdP would: the next refresh's ID token lists them. It panics for
// a subject not added (a mistake of the test's).
func (p *Provider) SetGroups(subject string, groups ...string) {
	p.update("SetGroups", subject, func(u *User) { u.Groups = slices.Clone(groups) })
}

// SetRefused disables (true) or enables subject at the provider: a
// disabled user's logins are refused, and so is the next refresh of any
// of their grants (access_denied). It panics for a subject not added.
func (p *Provider) SetRefused(subject string, refused bool) {
	p.update("SetRefused", subject, func(u *User) { u.Refuse = refused })
}

func (p *Provider) update(op, subject string, change func(*User)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	u, ok := p.users[subject]
	if !ok {
		panic(fmt.Sprintf("oidctest: %s: no user %q (AddUser first)", op, subject))
	}
	change(&u)
	p.users[subject] = u
}

// lookup is the current record of subject.
func (p *Provider) lookup(subject string) (User, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	u, ok := p.users[subject]
	return u, ok
}

// SignInAs makes subject the one a login without a login_hint signs in
// (what a browser test that cannot pass a hint gets).
func (p *Provider) SignInAs(subject string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.current = subject
}

func (p *Provider) user(hint string) (User, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if u, ok := p.users[hint]; ok && hint != "" {
		return u, true
	}
	u, ok := p.users[p.current]
	return u, ok
}

// Client is an OAuth2 client registered with the provider. A Public
// client has no secret (token_endpoint_auth_method none; PKCE is its
// proof), as a CLI's is.
type Client struct {
	ID           string
	Secret       string
	RedirectURIs []string
	// GrantTypes defaults to authorization_code and refresh_token (hydra
	// v2.3.0 has no device authorization grant).
	GrantTypes []string
	// Scope defaults to "openid offline_access email profile groups".
	Scope  string
	Public bool
	// AuthMethod is how a client with a secret authenticates at the
	// token endpoint: "" is client_secret_basic (the Authorization
	// header), or client_secret_post (the form). hydra takes the secret
	// only the way the client was registered (invalid_client otherwise).
	AuthMethod string
}

// CreateClient registers c through the admin API.
func (p *Provider) CreateClient(ctx context.Context, c Client) error {
	if len(c.GrantTypes) == 0 {
		c.GrantTypes = []string{"authorization_code", "refresh_token"}
	}
	if c.Scope == "" {
		c.Scope = "openid offline_access email profile groups"
	}
	body := map[string]any{
		"client_id":      c.ID,
		"redirect_uris":  c.RedirectURIs,
		"grant_types":    c.GrantTypes,
		"response_types": []string{"code"},
		"scope":          c.Scope,
	}
	if c.Public {
		body["token_endpoint_auth_method"] = "none"
	} else {
		if c.AuthMethod == "" {
			c.AuthMethod = "client_secret_basic"
		}
		body["client_secret"] = c.Secret
		body["token_endpoint_auth_method"] = c.AuthMethod
	}
	return p.admin(ctx, http.MethodPost, "/admin/clients", nil, body, nil)
}

// RevokeSessions ends subject's login and consent sessions at the
// provider and revokes the tokens issued under them, so a refresh fails
// (what an IdP does when an account is disabled).
func (p *Provider) RevokeSessions(ctx context.Context, subject string) error {
	q := url.Values{"subject": {subject}, "all": {"true"}}
	if err := p.admin(ctx, http.MethodDelete, "/admin/oauth2/auth/sessions/consent", q, nil, nil); err != nil {
		return err
	}
	return p.admin(ctx, http.MethodDelete, "/admin/oauth2/auth/sessions/login", url.Values{"subject": {subject}}, nil, nil)
}

// RotateSigningKey adds a new RS256 key to the set hydra signs ID tokens
// with (hydra.openid.id-token) and returns its kid: tokens from then on
// carry it, and the JWKS lists it beside the older keys.
func (p *Provider) RotateSigningKey(ctx context.Context) (string, error) {
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	if err := p.admin(ctx, http.MethodPost, "/admin/keys/hydra.openid.id-token", nil,
		map[string]string{"alg": "RS256", "use": "sig", "kid": ""}, &set); err != nil {
		return "", err
	}
	if len(set.Keys) != 1 {
		return "", fmt.Errorf("hydra made %d keys, want 1", len(set.Keys))
	}
	return set.Keys[0].Kid, nil
}

// admin calls hydra's admin API; a status past 299 is an error with the
// body's message.
func (p *Provider) admin(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	u := p.Admin + path
	if q != nil {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode > 299 {
		return fmt.Errorf("hydra %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// freePort returns a loopback port nothing listens on at the moment.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail is the end of a log file, for a failure message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// errNoUser is the login app's answer when the test added no user.
var errNoUser = errors.New("oidctest: no user added (AddUser)")

// hint is the login_hint of a login request, if the client passed one.
func hint(lr loginRequest) string {
	return strings.TrimSpace(lr.OIDCContext.LoginHint)
}

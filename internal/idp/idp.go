// Package idp signs people in with the organisation's identity provider
// (OpenID Connect): discovery, the authorization code flow with state,
// nonce and PKCE for the panel, the device authorization grant for the
// CLI, and the ID token's checks (signature by the provider's published
// keys, followed as it rotates them; issuer; audience; expiry with a
// bounded clock skew; nonce). What it returns is who the provider says
// the person is; which organisation and role that makes is Mapping's.
// Refresh asks the provider again later with the sign-in's refresh token,
// and says whether the provider refused the person (ErrRevoked) or only
// failed to answer.
//
// A token that fails a check is refused with an error saying which, for
// the gateway's log: the browser is told only that the sign-in failed.
package idp

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"berth.dev/berth/internal/secret"
)

// DefaultScopes are asked for when the deployment names none, and
// OfferedScopes too when the provider's discovery document lists them in
// scopes_supported: a provider may refuse a scope it does not know (GitLab
// does), and one that lists none is sent only DefaultScopes.
var (
	DefaultScopes = []string{gooidc.ScopeOpenID, "email", "profile"}
	OfferedScopes = []string{"groups", gooidc.ScopeOfflineAccess}
)

// MaxSkew is how far the provider's clock may be from ours.
const MaxSkew = time.Minute

// Config is a deployment's provider.
type Config struct {
	// Issuer is the provider's issuer URL: discovery reads
	// Issuer/.well-known/openid-configuration, and every ID token must
	// name it exactly.
	Issuer string
	// ClientID and ClientSecret are berth's client at the provider; the
	// ID token's audience must hold ClientID.
	ClientID     string
	ClientSecret secret.Secret
	// Scopes are asked for at sign-in (openid first); nil: DefaultScopes
	// and those of OfferedScopes the provider lists. offline_access is
	// what makes most providers (hydra among them) give a refresh token.
	Scopes []string
	// RedirectURL is where the provider sends the browser back: the
	// panel's callback.
	RedirectURL string
	// GroupsClaim names the ID token's claim that lists the person's
	// groups; "" is "groups".
	GroupsClaim string
}

// Identity is who the provider says signed in.
type Identity struct {
	Issuer, Subject string
	Email           string
	EmailVerified   bool
	Name            string
	// Username is the preferred_username claim, when the provider sends one.
	Username string
	Groups   []string
	// Expiry is the ID token's.
	Expiry time.Time
	// Refresh is the provider's refresh token, when it gave one: how
	// berth asks it again later whether the person may still come in.
	Refresh secret.Secret
}

// Provider is one identity provider, discovered.
type Provider struct {
	cfg Config
	// header and params are berth's client, its secret sent in the
	// Authorization header or in the form; oauth is the one that worked
	// last (header at first). See token.
	header, params *oauth2.Config
	oauth          atomic.Pointer[oauth2.Config]
	verifier       *gooidc.IDTokenVerifier
	device         bool // the provider publishes a device authorization endpoint
	http           *http.Client
}

// New discovers the provider (its endpoints and its keys' address) with
// hc (nil: a client with a 10 s timeout). now is the clock ID tokens are
// checked against (nil: time.Now).
func New(ctx context.Context, cfg Config, hc *http.Client, now func() time.Time) (*Provider, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	if now == nil {
		now = time.Now
	}
	ctx = gooidc.ClientContext(ctx, hc)
	p, err := gooidc.NewProvider(ctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("identity provider %s: discovery: %w", cfg.Issuer, err)
	}
	var extra struct {
		Device string   `json:"device_authorization_endpoint"`
		Scopes []string `json:"scopes_supported"`
	}
	if err := p.Claims(&extra); err != nil {
		return nil, fmt.Errorf("identity provider %s: discovery: %w", cfg.Issuer, err)
	}
	scopes := cfg.Scopes
	if scopes == nil {
		scopes = slices.Clone(DefaultScopes)
		for _, s := range OfferedScopes {
			if slices.Contains(extra.Scopes, s) {
				scopes = append(scopes, s)
			}
		}
	}
	client := func(style oauth2.AuthStyle) *oauth2.Config {
		ep := p.Endpoint()
		ep.DeviceAuthURL = extra.Device
		ep.AuthStyle = style
		return &oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret.Reveal(),
			Endpoint: ep, RedirectURL: cfg.RedirectURL, Scopes: scopes}
	}
	pr := &Provider{
		cfg:    cfg,
		header: client(oauth2.AuthStyleInHeader),
		params: client(oauth2.AuthStyleInParams),
		// Skew: go-oidc allows none past expiry; the clock handed to it
		// runs MaxSkew behind, so a token is good until MaxSkew after
		// its exp. Issued-at in the future is go-oidc's own check.
		verifier: p.Verifier(&gooidc.Config{ClientID: cfg.ClientID, Now: func() time.Time { return now().Add(-MaxSkew) }}),
		device:   extra.Device != "",
		http:     hc,
	}
	pr.oauth.Store(pr.header)
	return pr, nil
}

// token makes a request of the token endpoint with berth's client as it
// authenticated last (the secret in the Authorization header at first,
// which RFC 6749 has every provider accept); one the provider refuses as
// invalid_client is made once more the other way, which is remembered if
// it works: some providers (hydra among them) take a client's secret only
// the way it was registered. x/oauth2's own probe is not used: it tries
// again after any error, so a refresh the provider refused
// (invalid_grant) came back as the second try's invalid_client.
func (p *Provider) token(ctx context.Context, do func(*oauth2.Config) (*oauth2.Token, error)) (*oauth2.Token, error) {
	do = retried(ctx, do)
	c := p.oauth.Load()
	tok, err := do(c)
	if errorCode(err) != "invalid_client" {
		return tok, err
	}
	other := p.params
	if c == p.params {
		other = p.header
	}
	if tok, err2 := do(other); errorCode(err2) != "invalid_client" {
		if err2 == nil {
			p.oauth.Store(other)
		}
		return tok, err2
	}
	return nil, err
}

// retryWaits are the waits before each new try of a token request the
// provider failed on its own side.
var retryWaits = []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second}

// retried is do tried again, after each of retryWaits, while the provider
// answers that it failed itself (a 5xx, server_error,
// temporarily_unavailable), as a provider's database does under
// concurrent requests (hydra's: "Unable to serialize access due to a
// concurrent update"): such a request changed nothing there, so its code
// or refresh token is still good, and a person is not turned away for
// the provider's trouble.
func retried(ctx context.Context, do func(*oauth2.Config) (*oauth2.Token, error)) func(*oauth2.Config) (*oauth2.Token, error) {
	return func(c *oauth2.Config) (*oauth2.Token, error) {
		tok, err := do(c)
		for _, wait := range retryWaits {
			if !providerFailed(err) {
				break
			}
			select {
			case <-ctx.Done():
				return nil, err
			case <-time.After(wait):
			}
			tok, err = do(c)
		}
		return tok, err
	}
}

// providerFailed reports whether the token endpoint's answer says the
// provider failed on its side.
func providerFailed(err error) bool {
	re, ok := errors.AsType[*oauth2.RetrieveError](err)
	if !ok {
		return false
	}
	return re.ErrorCode == "server_error" || re.ErrorCode == "temporarily_unavailable" || (re.Response != nil && re.Response.StatusCode >= 500)
}

// errorCode is the OAuth 2.0 error code of the token endpoint's answer
// (RFC 6749 section 5.2), "" for any other error.
func errorCode(err error) string {
	if re, ok := errors.AsType[*oauth2.RetrieveError](err); ok {
		return re.ErrorCode
	}
	return ""
}

func (c Config) check() error {
	var errs []error
	u, err := url.Parse(c.Issuer)
	switch {
	case c.Issuer == "":
		errs = append(errs, errors.New("the issuer URL is required"))
	case err != nil || u.Host == "" || (u.Scheme != "https" && !loopback(u.Hostname())):
		errs = append(errs, fmt.Errorf("issuer %q: an https URL (http only on this machine's loopback)", c.Issuer))
	}
	if c.ClientID == "" {
		errs = append(errs, errors.New("the client id is required"))
	}
	if len(c.Scopes) > 0 && !slices.Contains(c.Scopes, gooidc.ScopeOpenID) {
		errs = append(errs, errors.New("scopes: openid is required"))
	}
	return errors.Join(errs...)
}

func loopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// Issuer is the provider's issuer URL.
func (p *Provider) Issuer() string { return p.cfg.Issuer }

// ClientID is berth's client id at the provider.
func (p *Provider) ClientID() string { return p.cfg.ClientID }

// Attempt is one sign-in under way: what the browser's session keeps
// between sending it to the provider and its return.
type Attempt struct {
	State, Nonce, Verifier string
	// URL is where to send the browser.
	URL string
}

// Start begins a sign-in: a fresh state, nonce and PKCE verifier, and
// the provider's URL for them.
func (p *Provider) Start() Attempt {
	a := Attempt{State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier()}
	a.URL = p.oauth.Load().AuthCodeURL(a.State, gooidc.Nonce(a.Nonce), oauth2.S256ChallengeOption(a.Verifier))
	return a
}

// ErrRefused is a sign-in the provider's answer does not allow: a state
// that is not the attempt's, an error from the provider, a token that
// fails a check. Its message says which, for the log.
var ErrRefused = errors.New("sign-in refused")

// Finish ends the sign-in the browser came back from with state and
// code (or the provider's error): the code is exchanged with the PKCE
// verifier, and the ID token checked, its nonce the attempt's.
func (p *Provider) Finish(ctx context.Context, a Attempt, query url.Values) (Identity, error) {
	if e := query.Get("error"); e != "" {
		return Identity{}, fmt.Errorf("%w: the provider answered %s: %s", ErrRefused, e, query.Get("error_description"))
	}
	if query.Get("state") == "" || query.Get("state") != a.State {
		return Identity{}, fmt.Errorf("%w: the state is not this sign-in's", ErrRefused)
	}
	ctx = gooidc.ClientContext(ctx, p.http)
	tok, err := p.token(ctx, func(c *oauth2.Config) (*oauth2.Token, error) {
		return c.Exchange(ctx, query.Get("code"), oauth2.VerifierOption(a.Verifier))
	})
	if err != nil {
		return Identity{}, fmt.Errorf("%w: exchanging the code: %v", ErrRefused, err)
	}
	return p.fromToken(ctx, tok, a.Nonce)
}

// Device is a device authorization under way: the person opens
// VerificationURI and types UserCode (or opens the complete URI).
type Device = oauth2.DeviceAuthResponse

// StartDevice begins a device authorization grant (berth login --sso),
// when the provider has one.
func (p *Provider) StartDevice(ctx context.Context) (*Device, error) {
	if !p.device {
		return nil, fmt.Errorf("identity provider %s has no device authorization endpoint", p.cfg.Issuer)
	}
	return p.oauth.Load().DeviceAuth(gooidc.ClientContext(ctx, p.http))
}

// FinishDevice polls until the person has approved (or the grant
// expires) and checks the ID token; a device grant carries no nonce.
func (p *Provider) FinishDevice(ctx context.Context, d *Device) (Identity, error) {
	ctx = gooidc.ClientContext(ctx, p.http)
	tok, err := p.token(ctx, func(c *oauth2.Config) (*oauth2.Token, error) { return c.DeviceAccessToken(ctx, d) })
	if err != nil {
		return Identity{}, fmt.Errorf("%w: the device grant: %v", ErrRefused, err)
	}
	return p.fromToken(ctx, tok, "")
}

func (p *Provider) fromToken(ctx context.Context, tok *oauth2.Token, nonce string) (Identity, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, fmt.Errorf("%w: the provider's answer has no ID token", ErrRefused)
	}
	id, err := p.Verify(ctx, raw, nonce)
	if err != nil {
		return Identity{}, err
	}
	id.Refresh = secret.New(tok.RefreshToken)
	return id, nil
}

// Refreshed is what a refresh at the provider gave.
type Refreshed struct {
	// Identity is who the new ID token says signed in, checked as at
	// sign-in but for the nonce; nil when the provider sent no ID token
	// (OpenID Connect allows it): the refresh alone says the person may
	// still come in.
	Identity *Identity
	// Refresh is the refresh token to use next time: a new one when the
	// provider rotates them, else the one refreshed with.
	Refresh secret.Secret
}

// ErrRevoked is a refresh the provider refused because of the grant or
// the person, answered with a 4xx status and one of two error codes:
//   - invalid_grant (RFC 6749 section 5.2; 400): the refresh token is
//     revoked (hydra: the person's consent sessions were revoked, or a
//     rotated token was used again, which revokes its successors too),
//     expired, unknown, or issued to another client; OAuth 2.0 has no
//     other code for a person the provider no longer lets in;
//   - access_denied (hydra; 403): the provider's token hook refused the
//     person (hydra answers nothing else with it at the token endpoint).
//
// Any other failure says nothing of the person and never disables
// anyone: the provider unreachable or answering 5xx (server_error, also
// hydra's answer when its token hook fails), berth's client refused
// (invalid_client: a wrong secret; unauthorized_client: a client not
// allowed the refresh_token grant), or anything else.
var ErrRevoked = errors.New("the identity provider refused the refresh")

// Refresh asks the provider again with a refresh token, and checks the ID
// token it answers with.
func (p *Provider) Refresh(ctx context.Context, refreshToken string) (Refreshed, error) {
	ctx = gooidc.ClientContext(ctx, p.http)
	tok, err := p.token(ctx, func(c *oauth2.Config) (*oauth2.Token, error) {
		return c.TokenSource(ctx, &oauth2.Token{RefreshToken: refreshToken}).Token()
	})
	if re, ok := errors.AsType[*oauth2.RetrieveError](err); ok && revoked(re) {
		return Refreshed{}, fmt.Errorf("%w: %s: %s", ErrRevoked, re.ErrorCode, re.ErrorDescription)
	}
	if err != nil {
		return Refreshed{}, fmt.Errorf("identity provider %s: refresh: %w", p.cfg.Issuer, err)
	}
	out := Refreshed{Refresh: secret.New(refreshToken)}
	if tok.RefreshToken != "" {
		out.Refresh = secret.New(tok.RefreshToken)
	}
	if raw, _ := tok.Extra("id_token").(string); raw != "" {
		id, err := p.Verify(ctx, raw, "")
		if err != nil {
			return Refreshed{}, err
		}
		id.Refresh = out.Refresh
		out.Identity = &id
	}
	return out, nil
}

// revoked says whether the token endpoint's refusal is ErrRevoked's.
func revoked(re *oauth2.RetrieveError) bool {
	if re.Response == nil || re.Response.StatusCode < 400 || re.Response.StatusCode > 499 {
		return false
	}
	return re.ErrorCode == "invalid_grant" || re.ErrorCode == "access_denied"
}

// Verify checks a raw ID token: its signature by one of the provider's
// keys (fetched again when a token names a key not seen before, so a
// rotation is followed), its issuer, that its audience holds berth's
// client, its expiry, and its nonce when nonce is not "".
func (p *Provider) Verify(ctx context.Context, raw, nonce string) (Identity, error) {
	t, err := p.verifier.Verify(gooidc.ClientContext(ctx, p.http), raw)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: the ID token: %v", ErrRefused, err)
	}
	var c struct {
		Nonce         string `json:"nonce"`
		Email         string `json:"email"`
		EmailVerified *bool  `json:"email_verified"`
		Name          string `json:"name"`
		Username      string `json:"preferred_username"`
	}
	if err := t.Claims(&c); err != nil {
		return Identity{}, fmt.Errorf("%w: the ID token's claims: %v", ErrRefused, err)
	}
	if nonce != "" && c.Nonce != nonce {
		return Identity{}, fmt.Errorf("%w: the ID token's nonce is not this sign-in's", ErrRefused)
	}
	groups, err := p.groups(t)
	if err != nil {
		return Identity{}, err
	}
	return Identity{Issuer: t.Issuer, Subject: t.Subject, Email: c.Email, EmailVerified: c.EmailVerified != nil && *c.EmailVerified,
		Name: c.Name, Username: c.Username, Groups: groups, Expiry: t.Expiry}, nil
}

// MaxGroups bounds the groups read from a token.
const MaxGroups = 256

// groups reads the groups claim: a list of strings, or one string.
func (p *Provider) groups(t *gooidc.IDToken) ([]string, error) {
	name := p.cfg.GroupsClaim
	if name == "" {
		name = "groups"
	}
	var all map[string]any
	if err := t.Claims(&all); err != nil {
		return nil, fmt.Errorf("%w: the ID token's claims: %v", ErrRefused, err)
	}
	switch v := all[name].(type) {
	case nil:
		return nil, nil
	case string:
		return []string{v}, nil
	case []any:
		if len(v) > MaxGroups {
			return nil, fmt.Errorf("%w: the ID token lists %d groups; at most %d are read", ErrRefused, len(v), MaxGroups)
		}
		out := make([]string, 0, len(v))
		for _, g := range v {
			s, ok := g.(string)
			if !ok {
				return nil, fmt.Errorf("%w: the ID token's %s claim holds a %T, not a group name", ErrRefused, name, g)
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("%w: the ID token's %s claim is a %T, not a list of groups", ErrRefused, name, v)
	}
}

// Role is what a mapping makes of a person in one organisation.
type Role string

// The roles a mapping gives. An operator is never made by an
// organisation's mapping: only the deployment's own setting names one.
const (
	RoleNone   Role = ""
	RoleMember Role = "member"
	RoleAdmin  Role = "admin"
)

// Mapping is one organisation's rule: the groups whose people are its
// members and its administrators.
type Mapping struct {
	Org            string
	Members        []string
	Administrators []string
}

// Role is the role id has in the mapping's organisation: administrator
// before member; RoleNone when no group of theirs is named.
func (m Mapping) Role(id Identity) Role {
	has := func(names []string) bool {
		return slices.ContainsFunc(id.Groups, func(g string) bool {
			return slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(strings.TrimSpace(n), g) })
		})
	}
	switch {
	case has(m.Administrators):
		return RoleAdmin
	case has(m.Members):
		return RoleMember
	}
	return RoleNone
}

package sso

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/idp"
	"berth.dev/berth/internal/secret"
)

// Service signs people in through the provider and keeps their access as
// the provider says. It exists on every gateway: without a provider
// (Config.Provider nil) it signs nobody in, but an organisation's mapping
// may still be read and set.
type Service struct {
	cfg       Config
	store     Store
	sandboxes Sandboxes // nil: a deployment without sandboxes
	rec       audit.Recorder
	log       *slog.Logger
	now       func() time.Time
	sealer    *sealer
	lead      func(ctx context.Context) (bool, error)
}

// Option changes a Service.
type Option func(*Service)

// WithLeader has only the replica lead says leads refresh sessions (one
// refresh token must not be spent twice by two replicas at once).
func WithLeader(lead func(ctx context.Context) (bool, error)) Option {
	return func(s *Service) { s.lead = lead }
}

// New returns the Service. sandboxes may be nil (no driver); now nil is
// time.Now; log nil discards.
func New(cfg Config, st Store, sandboxes Sandboxes, rec audit.Recorder, log *slog.Logger, now func() time.Time, opts ...Option) (*Service, error) {
	if cfg.KeyTTL == 0 {
		cfg.KeyTTL = DefaultKeyTTL
	}
	if cfg.RefreshEvery == 0 {
		cfg.RefreshEvery = DefaultRefreshEvery
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if rec == nil {
		rec = audit.Discard{}
	}
	s := &Service{cfg: cfg, store: st, sandboxes: sandboxes, rec: rec, log: log, now: now,
		lead: func(context.Context) (bool, error) { return true, nil }}
	if cfg.Provider != nil {
		sl, err := newSealer(cfg.ClientSecret)
		if err != nil {
			return nil, err
		}
		s.sealer = sl
	}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Enabled reports whether the gateway signs people in through a provider.
// A nil Service is one without a provider and without a store: it signs
// nobody in and keeps no mappings.
func (s *Service) Enabled() bool { return s != nil && s.cfg.Provider != nil }

// Issuer is the provider's issuer URL; "" without one.
func (s *Service) Issuer() string {
	if !s.Enabled() {
		return ""
	}
	return s.cfg.Provider.Issuer()
}

// CLIStart is the page berth login --sso opens; "" without a provider.
func (s *Service) CLIStart() string {
	if !s.Enabled() {
		return ""
	}
	return s.cfg.Start
}

// KeyTTL is how long a sign-in's key lasts.
func (s *Service) KeyTTL() time.Duration { return s.cfg.KeyTTL }

func (s *Service) record(ctx context.Context, e audit.Event) {
	audit.Record(ctx, s.rec, s.log, s.now, e)
}

// Refusal is a sign-in that did not come through. The browser (and the
// CLI) is told only Public; Reason, for the log and the audit, says which
// check failed.
type Refusal struct {
	Public string
	Reason string
}

func (r *Refusal) Error() string { return "sign-in refused: " + r.Reason }

func refuse(public, format string, args ...any) *Refusal {
	return &Refusal{Public: public, Reason: fmt.Sprintf(format, args...)}
}

// What the browser is told.
const (
	publicRestart  = "This sign-in is unknown, was used already or took too long: start again."
	publicBrowser  = "This sign-in was started in another browser (or its cookie was lost): start again from this one."
	publicProvider = "The identity provider did not sign you in."
	publicNoAccess = "Your account at the identity provider is not given access to berth: ask your administrator."
	publicDisabled = "Your berth account is disabled: ask your administrator."
	publicBusy     = "berth could not finish signing you in: try again."
)

// MaxState bounds the CLI's state, which berth hands back.
const MaxState = 256

// Begin starts a sign-in: for the panel (cli nil; next the page to go to
// after) or for berth login --sso. org, when not "", is the organisation
// asked for. It returns where to send the browser and the secret the
// browser keeps in a cookie until it comes back.
func (s *Service) Begin(ctx context.Context, next, org string, cli *CLI) (to string, cookie secret.Secret, err error) {
	if !s.Enabled() {
		return "", secret.Secret{}, fault.Errorf(fault.NotFound, "this gateway has no identity provider")
	}
	return s.begin(ctx, next, org, cli, nil)
}

func (s *Service) begin(ctx context.Context, next, org string, cli *CLI, device *DeviceRef) (to string, cookie secret.Secret, err error) {
	if err := account.CheckText("org", org, 100); err != nil {
		return "", secret.Secret{}, err
	}
	if cli != nil {
		if err := checkCLI(*cli); err != nil {
			return "", secret.Secret{}, err
		}
	}
	pa := s.cfg.Provider.Start()
	browser := rand.Text()
	now := s.now()
	a := Attempt{ID: digest(pa.State), Nonce: pa.Nonce, Verifier: pa.Verifier, Browser: sum(browser), Next: next, Org: org, CLI: cli, Device: device,
		CreatedAt: now, ExpiresAt: now.Add(AttemptTTL)}
	if err := s.store.CreateSSOAttempt(ctx, a); err != nil {
		return "", secret.Secret{}, fmt.Errorf("sign-in: %w", err)
	}
	return pa.URL, secret.New(browser), nil
}

func checkCLI(c CLI) error {
	if c.Port < 1024 || c.Port > 65535 {
		return fault.Field("port", "%d is not a port berth login listens on (1024-65535)", c.Port)
	}
	// The length first: Go's base64 decoding skips newlines.
	if b, err := base64.RawURLEncoding.DecodeString(c.Challenge); len(c.Challenge) != 43 || err != nil || len(b) != sha256.Size {
		return fault.Field("challenge", "must be the S256 PKCE challenge: 43 characters of base64url")
	}
	if c.State == "" || len(c.State) > MaxState {
		return fault.Field("state", "must be 1 to %d characters", MaxState)
	}
	for i := range len(c.State) {
		if c.State[i] <= ' ' || c.State[i] >= 0x7f {
			return fault.Field("state", "must be printable ASCII without spaces")
		}
	}
	return nil
}

// Outcome is a sign-in that came back from the provider.
type Outcome struct {
	// User and Org are who signed in, where.
	User account.User
	Org  account.Organisation
	// Key is the panel's new key and Next the page to go to (panel).
	Key  account.NewKeyResult
	Next string
	// Redirect is where to send the browser: the CLI's listener, with its
	// one-time code, or with the refusal (CLI).
	Redirect string
	// Choose lists the organisations the person may sign in to when
	// several, none asked for: the browser picks one and starts again,
	// with Next and CLI as they were.
	Choose []account.Organisation
	CLI    *CLI
	// Device is set when the sign-in was for berth login --sso --device:
	// approved (the CLI's next poll gets the key), or, with a refusal,
	// denied.
	Device *DeviceRef
}

// Finish ends the sign-in the browser came back from: the attempt its
// state names, started by this browser (cookie), the provider's answer
// checked (package idp), then the person let in (enter). A refusal is a
// *Refusal; for a CLI sign-in the Outcome's Redirect then carries it to
// the CLI.
func (s *Service) Finish(ctx context.Context, query url.Values, cookie string) (Outcome, error) {
	if !s.Enabled() {
		return Outcome{}, fault.Errorf(fault.NotFound, "this gateway has no identity provider")
	}
	a, err := s.store.TakeSSOAttempt(ctx, digest(query.Get("state")), s.now())
	if errors.Is(err, fault.NotFound) {
		return Outcome{}, s.refused(ctx, "", "", refuse(publicRestart, "the state is not a sign-in under way (unknown, used or expired)"))
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("sign-in: %w", err)
	}
	out := Outcome{Next: a.Next, CLI: a.CLI, Device: a.Device}
	fail := func(org, target string, r *Refusal) (Outcome, error) {
		if a.CLI != nil {
			out.Redirect = cliRedirect(*a.CLI, url.Values{"error": {"access_denied"}, "error_description": {r.Public}})
		}
		if a.Device != nil {
			// The CLI's next poll says so; a grant decided meanwhile stays.
			_ = s.store.DecideSSODevice(ctx, a.Device.ID, "", r.Public, Session{}, s.now())
		}
		return out, s.refused(ctx, org, target, r)
	}
	if subtle.ConstantTimeCompare(a.Browser, sum(cookie)) != 1 {
		return fail("", "", refuse(publicBrowser, "the browser that came back is not the one that started the sign-in (its cookie is missing or another's)"))
	}
	broken := func(err error) (Outcome, error) {
		if a.CLI != nil {
			out.Redirect = CLIFailed(*a.CLI, "server_error", publicBusy)
		}
		return out, fmt.Errorf("sign-in: %w", err)
	}
	id, err := s.cfg.Provider.Finish(ctx, idp.Attempt{State: query.Get("state"), Nonce: a.Nonce, Verifier: a.Verifier}, query)
	if err != nil {
		if errors.Is(err, idp.ErrRefused) {
			return fail("", "", refuse(publicProvider, "%v", err))
		}
		return broken(err)
	}
	client := ClientPanel
	if a.CLI != nil || a.Device != nil {
		client = ClientCLI
	}
	u, org, choose, err := s.enter(ctx, id, a.Org, client)
	if r, ok := errors.AsType[*Refusal](err); ok {
		return fail(org.ID, id.Subject, r)
	}
	if err != nil {
		return broken(err)
	}
	if len(choose) > 0 {
		out.Choose = choose
		return out, nil
	}
	out.User, out.Org = u, org
	sess := Session{Client: client, Issuer: id.Issuer, Subject: id.Subject, Refresh: s.sealer.seal(id.Refresh, id.Issuer, id.Subject)}
	if a.Device != nil {
		err := s.decideDevice(ctx, *a.Device, u, sess, "")
		if r, ok := errors.AsType[*Refusal](err); ok {
			return fail(org.ID, u.Name, r)
		}
		if err != nil {
			return broken(err)
		}
		return out, nil
	}
	if a.CLI != nil {
		code := rand.Text() + rand.Text()
		now := s.now()
		h := Handoff{ID: digest(code), User: u.ID, Challenge: a.CLI.Challenge, Session: sess, CreatedAt: now, ExpiresAt: now.Add(HandoffTTL)}
		if err := s.store.CreateSSOHandoff(ctx, h); err != nil {
			return fail(org.ID, u.Name, refuse(publicBusy, "the code for the CLI was not saved: %v", err))
		}
		out.Redirect = cliRedirect(*a.CLI, url.Values{"code": {code}})
		return out, nil
	}
	k, err := s.open(ctx, u, sess, "sso panel")
	if err != nil {
		return broken(err)
	}
	out.Key = k
	return out, nil
}

// CLIFailed is where to send the browser of a CLI sign-in that could not
// go on, so that berth login --sso ends saying msg instead of waiting:
// the CLI's listener with an error, or "" when the CLI's own request is
// not one berth sends browsers back to.
func CLIFailed(c CLI, code, msg string) string {
	if checkCLI(c) != nil {
		return ""
	}
	return cliRedirect(c, url.Values{"error": {code}, "error_description": {msg}})
}

// cliRedirect is the CLI listener's callback with q and the CLI's state.
func cliRedirect(c CLI, q url.Values) string {
	q.Set("state", c.State)
	return "http://127.0.0.1:" + strconv.Itoa(c.Port) + "/callback?" + q.Encode()
}

// refused records and logs a refused sign-in, and returns r.
func (s *Service) refused(ctx context.Context, org, target string, r *Refusal) error {
	s.log.WarnContext(ctx, "sign-in refused", "reason", r.Reason, "org", org, "subject", target)
	s.record(ctx, audit.Event{Org: org, Action: audit.SSOSignIn, Target: target, Outcome: audit.Refused, Detail: r.Reason})
	return r
}

// open mints a sign-in's key and opens its session, in one write.
func (s *Service) open(ctx context.Context, u account.User, sess Session, keyName string) (account.NewKeyResult, error) {
	now := s.now()
	k, sec := account.NewKey(u.ID, keyName, now)
	k.ExpiresAt = now.Add(s.cfg.KeyTTL)
	sess.ID, sess.User, sess.Key, sess.ClientID = account.NewID("sso"), u.ID, k.ID, s.cfg.Provider.ClientID()
	sess.CreatedAt, sess.ExpiresAt = now, k.ExpiresAt
	until := k.ExpiresAt.UTC().Format(time.RFC3339)
	events := []audit.Event{
		{At: now, Org: u.Org, Actor: u.ID, Action: audit.KeyCreate, Target: k.ID,
			Detail: fmt.Sprintf("a key of %s named %s, from signing in through the identity provider, until %s", u.Name, keyName, until)},
		{At: now, Org: u.Org, Actor: u.ID, Action: audit.SSOSignIn, Target: u.Name, Outcome: audit.OK,
			Detail: fmt.Sprintf("%s, as %s (%s at %s), key %s named %s until %s", sess.Client, u.Role, sess.Subject, sess.Issuer, k.ID, keyName, until)},
	}
	if err := s.store.CreateSSOSession(ctx, sess, k, events...); err != nil {
		return account.NewKeyResult{}, fmt.Errorf("sign-in: %w", err)
	}
	s.log.InfoContext(ctx, "signed in through the identity provider", "user", u.ID, "org", u.Org, "client", sess.Client, "key", k.ID)
	return account.NewKeyResult{Key: k, Secret: sec}, nil
}

// Exchange trades berth login --sso's one-time code, with the PKCE
// verifier only the CLI holds, for a key of the person's own. Every way
// it fails is fault.Unauthenticated; a code is spent by any attempt.
func (s *Service) Exchange(ctx context.Context, code, verifier, keyName string) (account.User, account.Organisation, account.NewKeyResult, error) {
	var none account.NewKeyResult
	if !s.Enabled() {
		return account.User{}, account.Organisation{}, none, fault.Errorf(fault.NotFound, "this gateway has no identity provider")
	}
	if keyName == "" {
		keyName = "sso"
	}
	if err := account.CheckText("key_name", keyName, account.MaxKeyName); err != nil {
		return account.User{}, account.Organisation{}, none, err
	}
	h, err := s.store.TakeSSOHandoff(ctx, digest(code), s.now())
	if errors.Is(err, fault.NotFound) {
		return account.User{}, account.Organisation{}, none, fault.Errorf(fault.Unauthenticated, "the sign-in code is unknown, used or expired: sign in again")
	}
	if err != nil {
		return account.User{}, account.Organisation{}, none, fmt.Errorf("sign-in: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(oauth2.S256ChallengeFromVerifier(verifier)), []byte(h.Challenge)) != 1 {
		s.record(ctx, audit.Event{Action: audit.SSOSignIn, Target: h.User, Outcome: audit.Refused,
			Detail: "cli: the verifier does not match the sign-in's challenge; the code is spent"})
		return account.User{}, account.Organisation{}, none, fault.Errorf(fault.Unauthenticated, "the verifier does not match the sign-in: sign in again")
	}
	return s.handOver(ctx, h.User, h.Session, keyName)
}

// handOver gives the CLI whose sign-in came back for user its key and
// opens its session, unless the user was disabled meanwhile.
func (s *Service) handOver(ctx context.Context, user string, sess Session, keyName string) (account.User, account.Organisation, account.NewKeyResult, error) {
	var none account.NewKeyResult
	u, err := s.store.GetUser(ctx, user)
	if err != nil {
		return account.User{}, account.Organisation{}, none, fmt.Errorf("sign-in: %w", err)
	}
	if u.Disabled {
		return account.User{}, account.Organisation{}, none, fault.Errorf(fault.Unauthenticated, "your berth account is disabled")
	}
	org, err := s.store.GetOrganisation(ctx, u.Org)
	if err != nil {
		return account.User{}, account.Organisation{}, none, fmt.Errorf("sign-in: %w", err)
	}
	sess.Client = ClientCLI
	k, err := s.open(ctx, u, sess, keyName)
	if err != nil {
		return account.User{}, account.Organisation{}, none, err
	}
	return u, org, k, nil
}

// SignOut ends the session that gave key keyID, revoking the key; a key
// no sign-in gave is left alone.
func (s *Service) SignOut(ctx context.Context, keyID string) error {
	if s == nil {
		return nil
	}
	sess, err := s.store.SSOSessionOfKey(ctx, keyID)
	if errors.Is(err, fault.NotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sign out: %w", err)
	}
	u, err := s.store.GetUser(ctx, sess.User)
	if err != nil {
		return fmt.Errorf("sign out: %w", err)
	}
	now := s.now()
	return s.store.EndSSOSession(ctx, sess.ID, now,
		audit.Event{At: now, Org: u.Org, Actor: u.ID, Action: audit.SSOSignOut, Target: u.Name, Detail: sess.Client + ": signed out; key " + sess.Key + " revoked"},
		audit.Event{At: now, Org: u.Org, Actor: u.ID, Action: audit.KeyRevoke, Target: sess.Key, Detail: "signed out of the " + sess.Client})
}

// MaxGroups bounds each list of a mapping, and MaxGroupName each name.
const (
	MaxGroups    = 64
	MaxGroupName = 256
)

// Mapping is an organisation's mapping, for its administrators and
// operators.
func (s *Service) Mapping(ctx context.Context, p account.Principal, orgRef string) (idp.Mapping, error) {
	org, err := s.orgOf(ctx, p, orgRef)
	if err != nil {
		return idp.Mapping{}, err
	}
	if !p.IsAdminOf(org.ID) {
		return idp.Mapping{}, fault.Errorf(fault.Forbidden, "the sign-in mapping of %s is for its administrators", org.Name)
	}
	return s.store.SSOMapping(ctx, org.ID)
}

// SetMapping replaces an organisation's mapping: it decides who of the
// provider's people come in, so only an operator sets it.
func (s *Service) SetMapping(ctx context.Context, p account.Principal, orgRef string, members, administrators []string) (idp.Mapping, error) {
	org, err := s.orgOf(ctx, p, orgRef)
	if err != nil {
		return idp.Mapping{}, err
	}
	if !p.IsOperator() {
		return idp.Mapping{}, fault.Errorf(fault.Forbidden, "the sign-in mapping decides who of the identity provider's people come in: only an operator sets it")
	}
	m := idp.Mapping{Org: org.ID}
	if m.Members, err = groupList("members", members); err != nil {
		return idp.Mapping{}, err
	}
	if m.Administrators, err = groupList("administrators", administrators); err != nil {
		return idp.Mapping{}, err
	}
	e := audit.Event{At: s.now(), Org: org.ID, Actor: p.User.ID, Action: audit.SSOMapping, Target: org.Name,
		Detail: fmt.Sprintf("members: %s; administrators: %s", words(m.Members), words(m.Administrators))}
	if err := s.store.SetSSOMapping(ctx, m, e); err != nil {
		return idp.Mapping{}, fmt.Errorf("set the sign-in mapping: %w", err)
	}
	return m, nil
}

func words(groups []string) string {
	if len(groups) == 0 {
		return "none"
	}
	return strings.Join(groups, ", ")
}

func groupList(field string, in []string) ([]string, error) {
	var out []string
	for _, g := range in {
		g = strings.TrimSpace(g)
		if g == "" {
			return nil, fault.Field(field, "holds an empty group name")
		}
		if err := account.CheckText(field, g, MaxGroupName); err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, g) }) {
			out = append(out, g)
		}
	}
	if len(out) > MaxGroups {
		return nil, fault.Field(field, "names %d groups; at most %d", len(out), MaxGroups)
	}
	return out, nil
}

// orgOf finds an organisation p belongs to (any, for an operator): others
// are not found.
func (s *Service) orgOf(ctx context.Context, p account.Principal, ref string) (account.Organisation, error) {
	if s == nil {
		return account.Organisation{}, fault.Errorf(fault.NotFound, "this gateway keeps no sign-in mappings")
	}
	if ref == "" {
		ref = p.User.Org
	}
	org, err := s.store.GetOrganisation(ctx, ref)
	if err != nil {
		return account.Organisation{}, err
	}
	if !p.InOrg(org.ID) {
		return account.Organisation{}, fault.Errorf(fault.NotFound, "organisation %s", ref)
	}
	return org, nil
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func sum(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// Package sso signs people in to berth through the deployment's identity
// provider (SPEC S1, S2, S6; issue 20): the panel's sign-in and berth login
// --sso, the users the provider's groups make (made at their first
// sign-in, their role and email kept current at every sign-in), the berth
// keys a sign-in gives (bounded lifetimes), and the refresh of each
// sign-in's session at the provider, which ends the access of a person
// the provider no longer lets in: they are disabled, their keys stop
// working, their agent sandboxes end and their engineer sandboxes expire
// with their repository credentials revoked (seed 004).
//
// The protocol (discovery, the code flow with state, nonce and PKCE, the
// ID token's checks) is package idp's; which organisation and role a
// person's groups give is an organisation's Mapping (idp.Mapping), set by
// an operator; operators themselves come only from the deployment's own
// setting (Config.Operators).
package sso

import (
	"context"
	"net/url"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/idp"
	"berth.dev/berth/internal/secret"
)

// Clients a session is opened for.
const (
	ClientPanel = "panel"
	ClientCLI   = "cli"
)

// Attempt is a sign-in under way, kept between sending the browser to the
// provider and its return. It is found by its state and used once.
type Attempt struct {
	// ID is the SHA-256 (hex) of the state sent to the provider.
	ID string
	// Nonce and Verifier are the provider attempt's (idp.Attempt).
	Nonce, Verifier string
	// Browser is the SHA-256 of the cookie the browser that started the
	// attempt was given: the callback must come from it.
	Browser []byte
	// Next is the panel page to go to after signing in ("" is /).
	Next string
	// Org is the organisation asked for (a name or id); "" is any.
	Org string
	// CLI is set when berth login --sso started the attempt: the loopback
	// port its listener waits on, the S256 PKCE challenge of the verifier
	// it holds, and its own state, handed back with the code.
	CLI *CLI
	// Device is set when the sign-in is for berth login --sso --device:
	// the device it approves, and the user code the person typed.
	Device    *DeviceRef
	CreatedAt time.Time
	ExpiresAt time.Time
}

// DeviceRef names a device grant from a sign-in.
type DeviceRef struct {
	ID       string // the device's ID
	UserCode string // as the person typed it, normalised
}

// Device is a device authorization grant under way (berth login --sso
// --device): RFC 8628's flow, played by berth itself rather than the
// provider, so it works with every provider. The CLI, which may run where
// no browser can reach it, polls with the device code; the person types
// the user code in a browser anywhere and signs in through the provider.
type Device struct {
	// ID is the SHA-256 (hex) of the device code, UserCode that of the
	// user code.
	ID, UserCode string
	KeyName      string // the key the CLI asked for
	Org          string // the organisation asked for; "" any
	Interval     time.Duration
	CreatedAt    time.Time
	ExpiresAt    time.Time
	PolledAt     time.Time // the CLI's last poll; zero: none yet
	// User is who signed in for it ("" not yet); Denied why the sign-in
	// was refused; Session what the next poll opens (issuer, subject,
	// sealed refresh token).
	User    string
	Denied  string
	Session Session
}

// CLI is what berth login --sso asked of a sign-in.
type CLI struct {
	Port      int
	Challenge string
	State     string
}

// Handoff is a CLI sign-in that has come back from the provider: a
// one-time code handed to the CLI's loopback listener, traded with the
// PKCE verifier for a key (Exchange). It is found by the code and used
// once.
type Handoff struct {
	// ID is the SHA-256 (hex) of the code.
	ID        string
	User      string
	Challenge string
	// Session is what the trade opens: issuer, subject and the sealed
	// refresh token (its ID, key and times are set then).
	Session   Session
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Session is one sign-in's hold on the provider: the berth key it gave,
// and the refresh token berth asks the provider again with.
type Session struct {
	ID     string // "sso_…"
	User   string
	Key    string // the key the sign-in gave
	Client string // ClientPanel or ClientCLI
	// ClientID is berth's client id at the provider when the session
	// was opened: its refresh token is that client's.
	ClientID string
	Issuer   string
	// Subject is the person at the provider.
	Subject string
	// Refresh is the provider's refresh token, sealed (seal.go); nil when
	// the provider gave none: the session then ends with its key.
	Refresh     []byte
	CreatedAt   time.Time
	RefreshedAt time.Time
	ExpiresAt   time.Time // its key's expiry
	EndedAt     time.Time // zero: live
}

// Store is what the service needs from the database. Each write that
// takes events appends them in its transaction (SPEC S17).
type Store interface {
	// SSOMapping is an organisation's mapping, with no groups when none
	// is set; SSOMappings every organisation's that has groups.
	SSOMapping(ctx context.Context, org string) (idp.Mapping, error)
	SSOMappings(ctx context.Context) ([]idp.Mapping, error)
	SetSSOMapping(ctx context.Context, m idp.Mapping, events ...audit.Event) error

	GetOrganisation(ctx context.Context, ref string) (account.Organisation, error)
	// FirstOrganisation is the oldest organisation (the bootstrap's).
	FirstOrganisation(ctx context.Context) (account.Organisation, error)
	GetUser(ctx context.Context, id string) (account.User, error)
	// IdentityUsers are the users, of any organisation, linked to the
	// person issuer and subject name.
	IdentityUsers(ctx context.Context, issuer, subject string) ([]account.User, error)
	// FindUser finds a user of org by id or name (fault.NotFound).
	FindUser(ctx context.Context, org, ref string) (account.User, error)
	// UnlinkedUserByEmail finds a user of org with that email (compared
	// without case) who is linked to nobody at the provider
	// (fault.NotFound).
	UnlinkedUserByEmail(ctx context.Context, org, email string) (account.User, error)
	// CreateUser writes a new user, its Issuer and Subject included.
	CreateUser(ctx context.Context, u account.User, events ...audit.Event) error
	// UpdateSignedIn writes what a sign-in says of an existing user: its
	// Issuer and Subject, Email, Role, Disabled and DisabledByIdP.
	UpdateSignedIn(ctx context.Context, u account.User, events ...audit.Event) error
	SetUserDisabled(ctx context.Context, id string, disabled, byIdP bool, events ...audit.Event) error

	CreateSSOAttempt(ctx context.Context, a Attempt) error
	// TakeSSOAttempt deletes and returns the attempt id names, unless it
	// expired by at: fault.NotFound then, or when there is none.
	TakeSSOAttempt(ctx context.Context, id string, at time.Time) (Attempt, error)
	CreateSSOHandoff(ctx context.Context, h Handoff) error
	// TakeSSOHandoff is TakeSSOAttempt for handoffs.
	TakeSSOHandoff(ctx context.Context, id string, at time.Time) (Handoff, error)

	CreateSSODevice(ctx context.Context, d Device) error
	// SSODeviceByUserCode is the device whose user code hashes to
	// userCode, not yet signed in for nor expired at at (fault.NotFound).
	SSODeviceByUserCode(ctx context.Context, userCode string, at time.Time) (Device, error)
	// DecideSSODevice records who signed in for device id (user and the
	// session's issuer, subject and refresh), or why not (denied), unless
	// it is decided or expired at at: fault.NotFound then.
	DecideSSODevice(ctx context.Context, id, user, denied string, session Session, at time.Time) error
	// PollSSODevice returns device id as it was and records a poll at at
	// (fault.NotFound for an unknown one).
	PollSSODevice(ctx context.Context, id string, at time.Time) (Device, error)
	// TakeSSODevice deletes and returns device id once it has a user
	// (fault.NotFound otherwise, or when another took it).
	TakeSSODevice(ctx context.Context, id string) (Device, error)

	// CreateSSOSession writes the session and its key in one transaction.
	CreateSSOSession(ctx context.Context, s Session, k account.Key, events ...audit.Event) error
	// SSOSessionOfKey is the session that gave key id (fault.NotFound).
	SSOSessionOfKey(ctx context.Context, keyID string) (Session, error)
	// DueSSOSessions are at most limit sessions to refresh: live at now
	// (not ended, not expired, their key not revoked, their user not
	// disabled), with a refresh token, last refreshed (or made) before
	// before; the longest waiting first.
	DueSSOSessions(ctx context.Context, now, before time.Time, limit int) ([]Session, error)
	// RefreshedSSOSession records a refresh at at and the provider's
	// refresh token now (sealed).
	RefreshedSSOSession(ctx context.Context, id string, refresh []byte, at time.Time, events ...audit.Event) error
	// EndSSOSession ends a session and revokes its key, at at, unless it
	// has ended already (then nothing is written, events neither).
	EndSSOSession(ctx context.Context, id string, at time.Time, events ...audit.Event) error
	// EndUserSSOSessions ends every live session of a user and revokes
	// their keys, with the events events makes of each session it ended.
	EndUserSSOSessions(ctx context.Context, user string, at time.Time, events func(Session) []audit.Event) (int, error)
	// ForgetSSO deletes the attempts, handoffs and devices that expired
	// before before, and the sessions that ended or expired before it.
	ForgetSSO(ctx context.Context, before time.Time) error
}

// Provider is the identity provider, as package idp speaks to it.
type Provider interface {
	Issuer() string
	// ClientID is berth's client id at the provider.
	ClientID() string
	Start() idp.Attempt
	Finish(ctx context.Context, a idp.Attempt, query url.Values) (idp.Identity, error)
	Refresh(ctx context.Context, refreshToken string) (idp.Refreshed, error)
}

// Sandboxes ends what a person whose access ended may still run (package
// sandbox's Service): agent sandboxes terminate, engineer sandboxes
// expire, repository credentials are revoked. actor "" is berth itself.
type Sandboxes interface {
	EndOwnerBecause(ctx context.Context, actor, why, owner string) (int, error)
}

// Config is a deployment's sign-in.
type Config struct {
	Provider Provider
	// ClientSecret is berth's client secret at the provider: refresh
	// tokens are sealed under a key drawn from it.
	ClientSecret secret.Secret
	// KeyTTL is how long a sign-in's key lasts (default DefaultKeyTTL);
	// signing in again gives a new one.
	KeyTTL time.Duration
	// RefreshEvery is how often each live session is refreshed at the
	// provider (default DefaultRefreshEvery).
	RefreshEvery time.Duration
	// Operators are the groups whose people are operators (the
	// deployment's own setting, never an organisation's).
	Operators []string
	// Start is the panel page that begins a CLI sign-in (api.SSO's
	// CLIStart), for the CLI to open.
	Start string
}

// DevicePage is the panel's page where a person types a device grant's
// user code.
const DevicePage = "/sign-in/sso/device"

// Defaults.
const (
	DefaultKeyTTL       = 12 * time.Hour
	DefaultRefreshEvery = 5 * time.Minute
	// AttemptTTL is how long a sign-in may take at the provider;
	// HandoffTTL how long the CLI has to trade its code.
	AttemptTTL = 10 * time.Minute
	HandoffTTL = 2 * time.Minute
	// DeviceTTL is how long a device grant waits for its sign-in, and
	// DeviceInterval how often the CLI may poll (RFC 8628's default).
	DeviceTTL      = 10 * time.Minute
	DeviceInterval = 5 * time.Second
)

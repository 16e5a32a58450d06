package sso

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/secret"
)

// userCodeAlphabet is what user codes are drawn from: consonants only, no
// vowels (no words) and none easily misread (RFC 8628 §6.1's example).
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

// UserCodeLen is how many letters a user code has (shown as XXXX-XXXX):
// 20^8, about 34 bits, for ten minutes, behind a limit per address.
const UserCodeLen = 8

// DeviceStart is a device grant just begun: what the CLI shows and polls
// with.
type DeviceStart struct {
	// DeviceCode is the CLI's secret to poll with.
	DeviceCode secret.Secret
	// UserCode is what the person types in the panel, as XXXX-XXXX.
	UserCode  string
	ExpiresAt time.Time
	Interval  time.Duration
}

// NormalUserCode is a typed user code as berth keeps it: letters only,
// upper case (dashes, spaces and case as the person typed them ignored);
// "" when it cannot be one.
func NormalUserCode(typed string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(typed) {
		switch {
		case r == '-' || r == ' ':
		case strings.ContainsRune(userCodeAlphabet, r):
			b.WriteRune(r)
		default:
			return ""
		}
	}
	if b.Len() != UserCodeLen {
		return ""
	}
	return b.String()
}

// ShowUserCode is a normal user code as people read it: XXXX-XXXX.
func ShowUserCode(code string) string {
	if len(code) != UserCodeLen {
		return code
	}
	return code[:4] + "-" + code[4:]
}

func newUserCode() string {
	b := make([]byte, UserCodeLen)
	for i := range b {
		// rand.Text's own way: a byte modulo a small alphabet is biased;
		// reject the top of the range.
		for {
			var one [1]byte
			rand.Read(one[:])
			if int(one[0]) < 256-256%len(userCodeAlphabet) {
				b[i] = userCodeAlphabet[int(one[0])%len(userCodeAlphabet)]
				break
			}
		}
	}
	return string(b)
}

// StartDevice begins berth login --sso --device: a device code for the
// CLI to poll with and a user code for the person to type in the panel
// (/sign-in/sso/device), wherever their browser is.
func (s *Service) StartDevice(ctx context.Context, keyName, org string) (DeviceStart, error) {
	if !s.Enabled() {
		return DeviceStart{}, fault.Errorf(fault.NotFound, "this gateway has no identity provider")
	}
	if keyName == "" {
		keyName = "sso"
	}
	if err := account.CheckText("key_name", keyName, account.MaxKeyName); err != nil {
		return DeviceStart{}, err
	}
	if err := account.CheckText("org", org, 100); err != nil {
		return DeviceStart{}, err
	}
	now := s.now()
	for range 3 { // a user code already in use is drawn again
		code, user := rand.Text()+rand.Text(), newUserCode()
		d := Device{ID: digest(code), UserCode: digest(user), KeyName: keyName, Org: org, Interval: DeviceInterval,
			CreatedAt: now, ExpiresAt: now.Add(DeviceTTL)}
		err := s.store.CreateSSODevice(ctx, d)
		if errors.Is(err, fault.Conflict) {
			continue
		}
		if err != nil {
			return DeviceStart{}, fmt.Errorf("device sign-in: %w", err)
		}
		return DeviceStart{DeviceCode: secret.New(code), UserCode: ShowUserCode(user), ExpiresAt: d.ExpiresAt, Interval: d.Interval}, nil
	}
	return DeviceStart{}, errors.New("device sign-in: no free user code")
}

// BeginDevice starts the sign-in that approves the device grant whose
// user code the person typed (after confirming it is the one their
// terminal shows); org "" is the one the CLI asked for. It is Begin for a
// device: where to send the browser, and its cookie.
func (s *Service) BeginDevice(ctx context.Context, userCode, org string) (to string, cookie secret.Secret, err error) {
	if !s.Enabled() {
		return "", secret.Secret{}, fault.Errorf(fault.NotFound, "this gateway has no identity provider")
	}
	code := NormalUserCode(userCode)
	if code == "" {
		return "", secret.Secret{}, fault.Field("code", "is not a code berth login --sso --device shows (%d letters, as XXXX-XXXX)", UserCodeLen)
	}
	d, err := s.store.SSODeviceByUserCode(ctx, digest(code), s.now())
	if errors.Is(err, fault.NotFound) {
		return "", secret.Secret{}, fault.Field("code", "%s is unknown, used or expired: start berth login --sso --device again", ShowUserCode(code))
	}
	if err != nil {
		return "", secret.Secret{}, fmt.Errorf("device sign-in: %w", err)
	}
	if org == "" {
		org = d.Org
	}
	return s.begin(ctx, "", org, nil, &DeviceRef{ID: d.ID, UserCode: code})
}

// ErrPending is a poll before anybody signed in for the device grant;
// ErrSlowDown one sooner than its interval after the last (RFC 8628
// §3.5): the CLI waits longer.
var (
	ErrPending  = errors.New("authorization_pending")
	ErrSlowDown = errors.New("slow_down")
)

// PollDevice is the CLI's poll with its device code: ErrPending until
// somebody signed in for it, ErrSlowDown when it polls too often, then,
// once, the key of whoever signed in. A grant unknown, expired, denied
// or taken is fault.Unauthenticated.
func (s *Service) PollDevice(ctx context.Context, deviceCode string) (account.User, account.Organisation, account.NewKeyResult, error) {
	var none account.NewKeyResult
	if !s.Enabled() {
		return account.User{}, account.Organisation{}, none, fault.Errorf(fault.NotFound, "this gateway has no identity provider")
	}
	now := s.now()
	d, err := s.store.PollSSODevice(ctx, digest(deviceCode), now)
	switch {
	case errors.Is(err, fault.NotFound):
		return account.User{}, account.Organisation{}, none, fault.Errorf(fault.Unauthenticated, "the device code is unknown or was used: start berth login --sso --device again")
	case err != nil:
		return account.User{}, account.Organisation{}, none, fmt.Errorf("device sign-in: %w", err)
	case d.Denied != "":
		return account.User{}, account.Organisation{}, none, fault.Errorf(fault.Unauthenticated, "the sign-in was refused: %s", d.Denied)
	case !d.ExpiresAt.After(now):
		return account.User{}, account.Organisation{}, none, fault.Errorf(fault.Unauthenticated, "the device code expired: start berth login --sso --device again")
	case d.User == "" && !d.PolledAt.IsZero() && now.Sub(d.PolledAt) < d.Interval:
		return account.User{}, account.Organisation{}, none, ErrSlowDown
	case d.User == "":
		return account.User{}, account.Organisation{}, none, ErrPending
	}
	if d, err = s.store.TakeSSODevice(ctx, d.ID); errors.Is(err, fault.NotFound) {
		return account.User{}, account.Organisation{}, none, fault.Errorf(fault.Unauthenticated, "the device code was used")
	} else if err != nil {
		return account.User{}, account.Organisation{}, none, fmt.Errorf("device sign-in: %w", err)
	}
	return s.handOver(ctx, d.User, d.Session, d.KeyName)
}

// decideDevice ends a device's sign-in: approved for u with the session
// a poll opens, or denied saying why; a grant that expired meanwhile is
// a refusal.
func (s *Service) decideDevice(ctx context.Context, ref DeviceRef, u account.User, sess Session, denied string) error {
	err := s.store.DecideSSODevice(ctx, ref.ID, u.ID, denied, sess, s.now())
	if errors.Is(err, fault.NotFound) {
		return refuse("The code "+ShowUserCode(ref.UserCode)+" expired or was used meanwhile: start berth login --sso --device again.",
			"the device grant was decided or expired before its sign-in came back")
	}
	if err != nil {
		return err
	}
	if denied == "" {
		s.record(ctx, audit.Event{Org: u.Org, Actor: u.ID, Action: audit.SSOSignIn, Target: u.Name, Outcome: audit.OK,
			Detail: fmt.Sprintf("cli (device code %s): approved in a browser as %s; the CLI's next poll gets the key", ShowUserCode(ref.UserCode), sess.Subject)})
	}
	return nil
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"berth.dev/berth/internal/api"
)

// deviceSlowDown is what a poll answered 429 adds to the interval from
// then on (RFC 8628 §3.5's slow_down), in the grant's seconds.
const deviceSlowDown = 5

// loginSSODevice is "berth login --sso --device", for a terminal no
// browser can reach back (an ssh session): a device authorization grant
// (RFC 8628's flow) the gateway plays itself. The gateway gives a user
// code and the address of its page; the person opens that page in a
// browser anywhere, types the code and signs in through the provider,
// while berth polls with the device code, which only it holds, until the
// gateway hands over the key, which is saved as berth login --sso saves
// one. Nothing listens here and no browser is opened.
func (g *globals) loginSSODevice(ctx context.Context, s ssoTarget, o ssoLogin) error {
	d, err := s.c.StartSSODevice(ctx, api.StartSSODevice{KeyName: o.keyName, Org: o.org})
	if ae, ok := errors.AsType[*api.Error](err); ok && ae.Code == api.CodeNotFound {
		return fmt.Errorf("login to %s: the gateway does not sign people in with a code (it may be older than berth login --sso --device); sign in where a browser can reach this machine: berth login --sso", s.base)
	}
	if err != nil {
		return fmt.Errorf("login to %s: %w", s.base, err)
	}
	page, complete, err := devicePages(s.base, d)
	if err != nil {
		return fmt.Errorf("login to %s: the gateway's answer to berth login --sso --device: %w", s.base, err)
	}

	// A second of the grant's: Env.ssoSecond, in tests, shortens it.
	second := time.Second
	if g.env.ssoSecond > 0 {
		second = g.env.ssoSecond
	}
	interval := time.Duration(d.Interval) * second
	if d.Interval <= 0 {
		interval = 5 * second // RFC 8628 §3.2's default
	}
	expires := time.Duration(d.ExpiresIn) * second
	end := time.Now().Add(expires)

	code := printable(d.UserCode)
	fmt.Fprintf(g.env.Stderr, "To sign in to %s through %s, open this address in a browser on any machine:\n\n  %s\n\nand enter the code:\n\n  %s\n\n",
		s.base, printable(through(s.info)), page, code)
	if complete != "" {
		fmt.Fprintf(g.env.Stderr, "Or open this address, which holds the code:\n\n  %s\n\n", complete)
	}
	fmt.Fprintf(g.env.Stderr, "Sign in only if the page shows the code %s.\nWaiting for you to sign in (at most %s; Ctrl-C stops)...\n", code, short(expires))

	for {
		left := time.Until(end)
		if left <= 0 {
			return fmt.Errorf("login to %s: nobody signed in with the code %s within %s, and it has expired; nothing was saved: run berth login --sso --device again",
				s.base, code, short(expires))
		}
		wait := time.NewTimer(min(interval, left))
		select {
		case <-ctx.Done():
			wait.Stop()
			return ctx.Err()
		case <-wait.C:
		}
		if left <= interval {
			continue // expired while waiting: said above
		}
		e, err := s.c.PollSSODevice(ctx, d.DeviceCode)
		if err == nil {
			return g.saveSSOKey(s.base, s.path, e, "berth login --sso --device")
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		ae, ok := errors.AsType[*api.Error](err)
		switch {
		case !ok:
			return fmt.Errorf("login to %s: %w; nothing was saved", s.base, err)
		case ae.Code == api.CodePending, ae.Code == api.CodeBusy:
			// Nobody has signed in yet; or the gateway was too busy to say,
			// which changes nothing: ask again after the interval.
		case ae.Code == api.CodeRateLimited:
			interval += deviceSlowDown * second
		case ae.Code == api.CodeUnauthenticated:
			return fmt.Errorf("login to %s: the gateway refused the sign-in: %s; nothing was saved", s.base, ae.Message)
		default:
			return fmt.Errorf("login to %s: %w; nothing was saved", s.base, err)
		}
	}
}

// devicePages checks a device grant the gateway began and returns the
// address to type its user code at, and the one that holds the code ("" if
// the gateway gave none), both made absolute against base.
func devicePages(base string, d api.SSODevice) (page, complete string, err error) {
	switch {
	case d.DeviceCode == "":
		return "", "", errors.New("no device_code")
	case d.UserCode == "" || printable(d.UserCode) != d.UserCode:
		return "", "", fmt.Errorf("user_code %q is not a code to show", d.UserCode)
	case d.ExpiresIn <= 0:
		return "", "", fmt.Errorf("expires_in %d: the code expired already", d.ExpiresIn)
	}
	b, err := url.Parse(base)
	if err != nil {
		return "", "", err
	}
	abs := func(field, ref string) (string, error) {
		u, err := url.Parse(ref)
		if err != nil {
			return "", fmt.Errorf("%s %q: %w", field, ref, err)
		}
		u = b.ResolveReference(u)
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || printable(u.String()) != u.String() {
			return "", fmt.Errorf("%s %q is not an http(s) address", field, ref)
		}
		return u.String(), nil
	}
	if d.VerificationURI == "" {
		return "", "", errors.New("no verification_uri")
	}
	if page, err = abs("verification_uri", d.VerificationURI); err != nil {
		return "", "", err
	}
	if d.VerificationURIComplete != "" {
		if complete, err = abs("verification_uri_complete", d.VerificationURIComplete); err != nil {
			return "", "", err
		}
	}
	return page, complete, nil
}

// through names the identity provider a sign-in goes through.
func through(info api.SSO) string {
	if info.Issuer != "" {
		return info.Issuer
	}
	return "the identity provider"
}

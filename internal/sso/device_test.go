package sso_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/oidctest"
	"berth.dev/berth/internal/sso"
)

// approve plays the person at a browser anywhere: they type the user
// code, sign in through the provider as subject, and come back.
func (w *world) approve(t *testing.T, subject, userCode string) (sso.Outcome, error) {
	t.Helper()
	w.hydra.SignInAs(subject)
	to, ck, err := w.svc.BeginDevice(t.Context(), strings.ToLower(userCode), "")
	if err != nil {
		t.Fatal(err)
	}
	cb, err := oidctest.Authorize(t.Context(), to, callback)
	if err != nil {
		t.Fatal(err)
	}
	return w.svc.Finish(t.Context(), cb.Query(), ck.Reveal())
}

// TestDeviceSignIn: berth login --sso --device: the CLI polls with its
// device code, pending until the person has typed the user code in a
// browser and signed in through the provider; then, once, the key of
// whoever signed in; polls too close together are told to slow down.
func TestDeviceSignIn(t *testing.T) {
	w := newWorld(t)
	d, err := w.svc.StartDevice(t.Context(), "build-box", "")
	if err != nil {
		t.Fatal(err)
	}
	if sso.NormalUserCode(d.UserCode) == "" || len(d.UserCode) != sso.UserCodeLen+1 || d.Interval != sso.DeviceInterval ||
		time.Until(d.ExpiresAt) > sso.DeviceTTL || time.Until(d.ExpiresAt) < sso.DeviceTTL-time.Minute {
		t.Fatalf("the device grant: %+v", d)
	}
	if _, _, _, err := w.svc.PollDevice(t.Context(), d.DeviceCode.Reveal()); !errors.Is(err, sso.ErrPending) {
		t.Fatalf("the first poll: %v, want pending", err)
	}
	if _, _, _, err := w.svc.PollDevice(t.Context(), d.DeviceCode.Reveal()); !errors.Is(err, sso.ErrSlowDown) {
		t.Fatalf("a poll at once after it: %v, want slow_down", err)
	}
	out, err := w.approve(t, "bob", d.UserCode)
	if err != nil || out.Device == nil || out.User.Name != "bob@example.test" || out.Key.Secret.Reveal() != "" {
		t.Fatalf("bob approves: %v, %+v", err, out)
	}
	u, org, k, err := w.svc.PollDevice(t.Context(), d.DeviceCode.Reveal())
	if err != nil || u.Name != "bob@example.test" || org.Name != "acme" || k.Key.Name != "build-box" || !w.works(t, k) {
		t.Fatalf("the poll after: %v, %s of %s, key %+v", err, u.Name, org.Name, k.Key)
	}
	if _, _, _, err := w.svc.PollDevice(t.Context(), d.DeviceCode.Reveal()); !errors.Is(err, fault.Unauthenticated) {
		t.Errorf("a poll once the key was given: %v, want unauthenticated", err)
	}
	if _, _, err := w.svc.BeginDevice(t.Context(), d.UserCode, ""); !isField(err, "code") {
		t.Errorf("the user code again: %v, want a refusal naming code", err)
	}
	if !has(w.events(t, audit.SSOSignIn), audit.OK, "bob@example.test", "device code "+d.UserCode, "approved") ||
		!has(w.events(t, audit.SSOSignIn), audit.OK, "bob@example.test", "cli", "build-box") {
		t.Errorf("the device's sign-in is not in the audit log: %+v", w.events(t, audit.SSOSignIn))
	}
	// The key is a sign-in's: refreshed, and cut off with the person.
	w.hydra.SetGroups("bob", "sales")
	everyTime(&w.cfg)
	svc, err := sso.New(w.cfg, w.st, w.ends, w.st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RefreshDue(t.Context()); err != nil {
		t.Fatal(err)
	}
	if w.works(t, k) {
		t.Errorf("the device's key works after bob lost his group")
	}
}

// TestDeviceRefused: a device grant nobody may approve stays unusable: a
// person the mappings do not let in is refused in the browser and the
// CLI's poll says so; codes that are not berth's are refused by field.
func TestDeviceRefused(t *testing.T) {
	w := newWorld(t)
	d, err := w.svc.StartDevice(t.Context(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.approve(t, "nora", d.UserCode); !errors.As(err, new(*sso.Refusal)) {
		t.Fatalf("nora approves: %v, want a refusal", err)
	}
	if _, _, _, err := w.svc.PollDevice(t.Context(), d.DeviceCode.Reveal()); !errors.Is(err, fault.Unauthenticated) || !strings.Contains(err.Error(), "not given access") {
		t.Errorf("the poll after nora was refused: %v", err)
	}
	for _, code := range []string{"", "ABCD", "ABCD-EFGA", "BCDF-GHJK-L", "BCDF-GHJK"} {
		if _, _, err := w.svc.BeginDevice(t.Context(), code, ""); !isField(err, "code") {
			t.Errorf("code %q: %v, want a refusal naming code", code, err)
		}
	}
	if _, _, _, err := w.svc.PollDevice(t.Context(), "not-a-device-code"); !errors.Is(err, fault.Unauthenticated) {
		t.Errorf("an unknown device code: %v", err)
	}
	for _, bad := range []struct{ key, org string }{{strings.Repeat("k", 101), ""}, {"", "a\x00b"}} {
		if _, err := w.svc.StartDevice(t.Context(), bad.key, bad.org); !isField(err, "key_name") && !isField(err, "org") {
			t.Errorf("StartDevice(%q, %q): %v", bad.key, bad.org, err)
		}
	}
}

// TestUserCodes: what people type is read as berth writes it.
func TestUserCodes(t *testing.T) {
	for typed, want := range map[string]string{
		"BCDF-GHJK": "BCDFGHJK", "bcdf ghjk": "BCDFGHJK", "BCDFGHJK": "BCDFGHJK",
		"BCDF-GHJA": "", "BCDF-GHJ": "", "BCDF-GHJKL": "", "BCDF_GHJK": "",
	} {
		if got := sso.NormalUserCode(typed); got != want {
			t.Errorf("NormalUserCode(%q) = %q, want %q", typed, got, want)
		}
	}
}

func isField(err error, field string) bool {
	fe, ok := errors.AsType[*fault.Error](err)
	return ok && fe.Field == field
}

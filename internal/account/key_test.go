package account_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
)

func TestKeyRoundTrip(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	k, secret := account.NewKey("usr_1", "laptop", now)
	id, part, ok := account.ParseSecret(secret.Reveal())
	if !ok || id != k.ID {
		t.Fatalf("ParseSecret(%q) = %q, ok %v; want id %q", secret.Reveal(), id, ok, k.ID)
	}
	if !k.Matches(part) {
		t.Fatal("the key does not match its own secret")
	}
	if k.Matches(part + "x") {
		t.Fatal("the key matches a different secret")
	}
	if strings.Contains(string(k.Hash), part) {
		t.Fatal("the stored hash contains the secret")
	}
}

func TestSecretRedacts(t *testing.T) {
	_, secret := account.NewKey("usr_1", "", time.Now())
	for _, got := range []string{fmt.Sprint(secret), fmt.Sprintf("%v %s %#v", secret, secret, secret)} {
		if strings.Contains(got, secret.Reveal()) {
			t.Fatalf("formatting revealed the secret: %q", got)
		}
	}
}

func TestParseSecretRejects(t *testing.T) {
	for _, s := range []string{"", "berth_", "berth_short_x", "other_0123456789abcdef_SECRET", "berth_0123456789abcdef_"} {
		if _, _, ok := account.ParseSecret(s); ok {
			t.Errorf("ParseSecret(%q) accepted it", s)
		}
	}
}

func TestKeyLive(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	k, _ := account.NewSandboxKey("usr_1", "sbx_1", "prj_1", now.Add(time.Hour), now)
	if !k.Live(now) {
		t.Error("a fresh sandbox key is not live")
	}
	if k.Live(now.Add(time.Hour)) {
		t.Error("a sandbox key is live at its expiry")
	}
	k.RevokedAt = now
	if k.Live(now) {
		t.Error("a revoked key is live")
	}
}

// TestInvitationIsNotAKey: an invitation and a key never parse as each
// other, so neither can stand in for the other at any route.
func TestInvitationIsNotAKey(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	inv, invSecret := account.NewInvitation("usr_1", "usr_2", false, now, now.Add(time.Hour))
	_, keySecret := account.NewKey("usr_1", "", now)
	id, part, ok := account.ParseInvitation(invSecret.Reveal())
	if !ok || id != inv.ID || !inv.Matches(part) || inv.Matches(part+"x") {
		t.Fatalf("ParseInvitation(its own) = %q, ok %v; want %q, matching only its secret", id, ok, inv.ID)
	}
	if _, _, ok := account.ParseSecret(invSecret.Reveal()); ok {
		t.Error("an invitation parses as a key")
	}
	if _, _, ok := account.ParseInvitation(keySecret.Reveal()); ok {
		t.Error("a key parses as an invitation")
	}
	if !account.LooksLikeInvitation(invSecret.Reveal()) || account.LooksLikeInvitation(keySecret.Reveal()) {
		t.Error("LooksLikeInvitation tells them apart wrongly")
	}
}

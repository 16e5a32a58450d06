package account

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"strings"
	"time"

	"berth.dev/berth/internal/secret"
)

// keyPrefix starts every secret, so secret scanners can recognise one.
const keyPrefix = "berth_"

// Key is an API key as stored: its secret is kept only as a SHA-256.
type Key struct {
	ID        string
	User      string
	Name      string
	Sandbox   string // the sandbox this key was minted for; "" for a user's key
	Project   string // a sandbox key's project scope
	Hash      []byte
	CreatedAt time.Time
	ExpiresAt time.Time // zero: never
	RevokedAt time.Time // zero: live
}

// NewKey mints a key for user. The secret is returned once and never stored.
func NewKey(user, name string, now time.Time) (Key, secret.Secret) {
	idPart := strings.ToLower(rand.Text()[:16])
	value := rand.Text()
	k := Key{
		ID:        "key_" + idPart,
		User:      user,
		Name:      name,
		Hash:      hashSecret(value),
		CreatedAt: now,
	}
	return k, secret.New(keyPrefix + idPart + "_" + value)
}

// NewSandboxKey mints the key a sandbox gets at creation (SPEC S2): it acts
// for the sandbox's owner, is scoped to its project and expires with it.
func NewSandboxKey(owner, sandbox, project string, expires, now time.Time) (Key, secret.Secret) {
	k, s := NewKey(owner, "sandbox "+sandbox, now)
	k.Sandbox = sandbox
	k.Project = project
	k.ExpiresAt = expires
	return k, s
}

// ParseSecret splits a presented secret into the key id it names and the
// secret part. ok is false for anything not shaped like our keys.
func ParseSecret(token string) (id string, secret string, ok bool) {
	rest, found := strings.CutPrefix(token, keyPrefix)
	if !found {
		return "", "", false
	}
	idPart, secret, found := strings.Cut(rest, "_")
	if !found || len(idPart) != 16 || secret == "" {
		return "", "", false
	}
	return "key_" + idPart, secret, true
}

// Matches reports in constant time whether secret is this key's.
func (k Key) Matches(secret string) bool {
	return subtle.ConstantTimeCompare(k.Hash, hashSecret(secret)) == 1
}

// Live reports whether the key may be used at now.
func (k Key) Live(now time.Time) bool {
	if !k.RevokedAt.IsZero() {
		return false
	}
	return k.ExpiresAt.IsZero() || now.Before(k.ExpiresAt)
}

func hashSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

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
	idPart, value, whole := newToken(keyPrefix)
	k := Key{
		ID:        "key_" + idPart,
		User:      user,
		Name:      name,
		Hash:      hashSecret(value),
		CreatedAt: now,
	}
	return k, whole
}

// newToken makes a credential: prefix, a public id part, "_" and a random
// secret part, of which only a hash is ever stored.
func newToken(prefix string) (idPart, value string, whole secret.Secret) {
	idPart = strings.ToLower(rand.Text()[:16])
	value = rand.Text()
	return idPart, value, secret.New(prefix + idPart + "_" + value)
}

// parseToken splits what newToken made with prefix into idPrefix and the
// id part, and the secret part. ok is false for any other shape.
func parseToken(token, prefix, idPrefix string) (id, secret string, ok bool) {
	rest, found := strings.CutPrefix(token, prefix)
	if !found {
		return "", "", false
	}
	idPart, secret, found := strings.Cut(rest, "_")
	if !found || len(idPart) != 16 || secret == "" {
		return "", "", false
	}
	return idPrefix + idPart, secret, true
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
	return parseToken(token, keyPrefix, "key_")
}

// Matches reports in constant time whether secret is this key's.
func (k Key) Matches(secret string) bool { return hashMatches(k.Hash, secret) }

// Live reports whether the key may be used at now.
func (k Key) Live(now time.Time) bool {
	if !k.RevokedAt.IsZero() {
		return false
	}
	return k.ExpiresAt.IsZero() || now.Before(k.ExpiresAt)
}

// hashMatches reports in constant time whether hash is secret's.
func hashMatches(hash []byte, secret string) bool {
	return subtle.ConstantTimeCompare(hash, hashSecret(secret)) == 1
}

func hashSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

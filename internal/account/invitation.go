package account

import (
	"strings"
	"time"

	"berth.dev/berth/internal/secret"
)

// invitationPrefix starts every invitation. It is not a key's shape
// ("berth_" and a 16-character id), so an invitation never authenticates,
// and the CLI can tell one pasted where a key was asked for.
const invitationPrefix = "berth_inv_"

// Bounds of an invitation's life. An administrator hands it over by some
// channel of their own (chat, mail); three days covers a weekend, a week is
// the most an unused credential may wait for its person.
const (
	DefaultInvitationTTL = 72 * time.Hour
	MinInvitationTTL     = 5 * time.Minute
	MaxInvitationTTL     = 7 * 24 * time.Hour
)

// Invitation is how a person gets their first key without whoever added
// them ever holding it (SPEC S6: an administrator never gets inside a
// member's sandbox, so never holds a member's key). It is exchanged once,
// by `berth login --invitation`, for a key of the user it names. Only its
// SHA-256 is stored; the row stays after it is used, replaced or expired,
// so a second use can say when the first one was.
type Invitation struct {
	ID        string
	User      string
	CreatedBy string // the user who issued it
	// Recovery invitations are an operator's: they can be redeemed by a
	// user who already has keys. An administrator's invitation can be
	// redeemed only while the user has never had a key.
	Recovery     bool
	Hash         []byte
	CreatedAt    time.Time
	ExpiresAt    time.Time
	ReplacedAt   time.Time // zero: not replaced by a newer one
	RedeemedAt   time.Time // zero: not used
	RedeemedFrom string    // the client address it was used from
	Key          string    // the key it was exchanged for
}

// NewInvitation issues an invitation for user by issuer, live until
// expires. The secret is returned once and never stored.
func NewInvitation(user, issuer string, recovery bool, now, expires time.Time) (Invitation, secret.Secret) {
	idPart, value, whole := newToken(invitationPrefix)
	inv := Invitation{
		ID:        "inv_" + idPart,
		User:      user,
		CreatedBy: issuer,
		Recovery:  recovery,
		Hash:      hashSecret(value),
		CreatedAt: now,
		ExpiresAt: expires,
	}
	return inv, whole
}

// ParseInvitation splits a presented invitation into its id and secret
// part. ok is false for anything not shaped like one.
func ParseInvitation(token string) (id, secret string, ok bool) {
	return parseToken(token, invitationPrefix, "inv_")
}

// LooksLikeInvitation reports whether s has an invitation's prefix, for a
// CLI that was given one where it asked for a key.
func LooksLikeInvitation(s string) bool { return strings.HasPrefix(s, invitationPrefix) }

// Matches reports in constant time whether secret is this invitation's.
func (inv Invitation) Matches(secret string) bool { return hashMatches(inv.Hash, secret) }

// NewInvitationResult is an invitation just issued, its secret (shown once)
// and the user it is for.
type NewInvitationResult struct {
	Invitation Invitation
	User       User
	Secret     secret.Secret
}

// Enrollment is what redeeming an invitation gives: the user, their
// organisation and their new key, its secret shown once.
type Enrollment struct {
	User         User
	Organisation Organisation
	Key          NewKeyResult
	Invitation   Invitation
}

// Package account owns who is who (SPEC S1, S2, S6): organisations, their
// projects, users and their roles, API keys, and the rules of who may see or
// act on what. Keys are opaque: a public id and a random secret, of which
// only a SHA-256 is stored.
package account

import (
	"crypto/rand"
	"regexp"
	"strings"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/name"
)

// Role is what a user may do. Operators act across the deployment;
// administrators across their organisation; members on their own things.
type Role string

// The roles of SPEC S1.
const (
	RoleOperator Role = "operator"
	RoleAdmin    Role = "admin"
	RoleMember   Role = "member"
)

// ParseRole checks a role's name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleOperator, RoleAdmin, RoleMember:
		return r, nil
	case "":
		return RoleMember, nil
	}
	return "", fault.Field("role", "%q is not a role (operator, admin or member)", s)
}

// Organisation is a tenant.
type Organisation struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// Project belongs to one organisation; its oldest project is its default.
type Project struct {
	ID        string
	Org       string
	Name      string
	CreatedAt time.Time
}

// User belongs to one organisation with one role.
type User struct {
	ID        string
	Org       string
	Name      string
	Email     string
	Role      Role
	CreatedAt time.Time
	// Disabled users' keys, their sandboxes' included, stop working.
	Disabled bool
	// Project is the project (id) the user's new sandboxes and keys land
	// in, which only an administrator sets; "": the organisation's oldest.
	Project string
	// Issuer and Subject name the person at the deployment's identity
	// provider once they have signed in through it (package sso); "" for
	// a user made by hand who never has. One person is at most one user
	// of each organisation.
	Issuer, Subject string
	// DisabledByIdP is set when berth disabled the user because the
	// identity provider no longer lets them in (a refused refresh, a
	// group lost): a later sign-in the provider allows enables them
	// again. A user an administrator disabled stays disabled.
	DisabledByIdP bool
}

// CheckName reports whether s is a valid organisation or project name
// (package name has the rule), naming field when it is not.
func CheckName(field, s string) error {
	if err := name.Check(s); err != nil {
		return fault.Field(field, "%v", err)
	}
	return nil
}

var userNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._@+-]{0,63}$`)

// CheckUserName accepts a login or an email address.
func CheckUserName(s string) error {
	if !userNameRE.MatchString(s) {
		return fault.Field("name", "%q must be 1-64 lowercase letters, digits and . _ @ + -", s)
	}
	return nil
}

// The bounds of what a user and a key are given as free text: both are
// stored and shown in every list of them.
const (
	MaxEmail   = 254 // the longest address SMTP carries (RFC 5321)
	MaxKeyName = 100
)

// CheckText refuses free text (an email address, a key's name) longer
// than limit bytes or holding a control character.
func CheckText(field, s string, limit int) error {
	if len(s) > limit {
		return fault.Field(field, "is %d bytes; at most %d", len(s), limit)
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return fault.Field(field, "holds a control character")
		}
	}
	return nil
}

// NewID returns a fresh random id with the given prefix, such as "org".
func NewID(prefix string) string {
	return prefix + "_" + strings.ToLower(rand.Text()[:20])
}

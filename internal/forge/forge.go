// Package forge is where repositories live (SPEC S9, S17), as the domain
// sees it: the address forms a repository may be given in and how they
// normalise to HTTPS, branch names, the Forge interface the gateway mints
// repository credentials through, and the ref policy every push is checked
// against. The forges themselves are packages of their own below it:
// local (a directory of bare repositories on the gateway's host), github
// (App installation tokens) and gitlab (project access tokens), the last
// two over rest.
package forge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"berth.dev/berth/internal/secret"
)

// Errors.
var (
	// ErrOtherHost: the address names another host than the forge's.
	ErrOtherHost = errors.New("not this deployment's forge")
	// ErrBadAddress: the address is not a repository address.
	ErrBadAddress = errors.New("not a repository address")
	// ErrNoCredential: the forge gave no token (SPEC S9: 409 no_git_credential).
	ErrNoCredential = errors.New("the forge gives no credential for this repository")
)

// Repo is one repository on a forge.
type Repo struct {
	// Host is the forge's web host (github.com, gitlab.example.com); "" for
	// the local forge.
	Host string
	// Path is the repository's path on the forge without ".git":
	// owner/name, or group/subgroup/name on GitLab. allowed_repos entries
	// are matched against it.
	Path string
}

// String is how berth names the repository to people: host/path, or the
// path alone on the local forge.
func (r Repo) String() string {
	if r.Host == "" {
		return r.Path
	}
	return r.Host + "/" + r.Path
}

// Name is the repository's last path element: the directory a clone gets.
func (r Repo) Name() string { return r.Path[strings.LastIndexByte(r.Path, '/')+1:] }

// Token is a credential a forge minted for one repository.
type Token struct {
	// ID is the forge's handle to revoke it by; "" when it cannot be revoked
	// without the token itself (GitHub).
	ID string
	// Username is what git sends with it (x-access-token on GitHub, oauth2 on
	// GitLab).
	Username  string
	Secret    secret.Secret
	ExpiresAt time.Time
}

// Forge mints and revokes repository credentials. The gateway holds the
// deployment's own credential; what a Forge hands out is scoped to one
// repository, contents read and write, and short-lived.
type Forge interface {
	// Kind is local, github or gitlab.
	Kind() string
	// Host is the web host repository addresses must name; "" for local.
	Host() string
	// CloneURL is the HTTPS address git reaches the repository at.
	CloneURL(r Repo) string
	// Token mints a credential for r that lasts until about until (the
	// forge may cap it: GitHub gives one hour). ErrNoCredential when the
	// forge gives none; fault.NotFound when it has no such repository.
	Token(ctx context.Context, r Repo, until time.Time) (Token, error)
	// Revoke takes a credential back where the forge allows; where it
	// cannot (t.ID is ""), it returns nil.
	Revoke(ctx context.Context, t Token) error
}

// segmentOK reports whether s may be one element of a repository path.
func segmentOK(s string) bool {
	if s == "" || s == "." || s == ".." || strings.HasPrefix(s, "-") || len(s) > 100 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// CheckPath reports whether path is a repository path: one to eight
// elements of letters, digits, '-', '_' and '.', none of them "." or "..".
func CheckPath(path string) error {
	parts := strings.Split(path, "/")
	if len(parts) > 8 {
		return fmt.Errorf("%q has more than 8 path elements: %w", path, ErrBadAddress)
	}
	for _, p := range parts {
		if !segmentOK(p) {
			return fmt.Errorf("%q: path elements are letters, digits, '-', '_' and '.': %w", path, ErrBadAddress)
		}
	}
	return nil
}

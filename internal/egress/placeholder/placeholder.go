// Package placeholder is secrets by placeholder (issue 22): a project's
// credentials that never enter its sandboxes. An administrator stores a
// secret with the hosts it is for; it is sealed at rest with the
// deployment's key. An agent sandbox of the project gets, in the
// variable of the secret's name, a placeholder of its own; the gateway's
// egress proxy, for the secret's hosts only, terminates the sandbox's TLS
// and puts the value where the placeholder stands in the request's
// headers (inside HTTP Basic credentials too). A placeholder is derived
// from the sandbox and the secret's name, so the proxy needs no record of
// it, and it is worth nothing without that sandbox's key, which is
// revoked when the sandbox ends.
package placeholder

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/audit"
	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/secret"
)

// Limits of a secret.
const (
	MaxName  = 64       // bytes of its name, a variable's
	MaxValue = 16 << 10 // bytes of its value
	MaxHosts = 16       // hosts it is for
	// MaxSecrets bounds a project's secrets.
	MaxSecrets = 64
)

// Prefix begins every placeholder.
const Prefix = "berth-placeholder-"

// namePattern is a secret's name: an environment variable's.
var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Credential is a project's secret as administrators see it: never its value.
type Credential struct {
	Org, Project string
	Name         string
	Hosts        []string // rules as egress writes them (a name, *.domain; :port when not 443)
	CreatedAt    time.Time
	CreatedBy    string // the user who set it
}

// Sealed is a secret as it is kept: its value sealed with the
// deployment's key, bound to its project and name.
type Sealed struct {
	Credential
	Value []byte // nonce, then the AES-GCM ciphertext
}

// Store keeps projects' sealed secrets.
type Store interface {
	// PutSecret writes s, replacing its project's secret of its name; a
	// project with MaxSecrets others is fault.Conflict.
	PutSecret(ctx context.Context, s Sealed, e audit.Event) error
	// Secrets lists a project's secrets by name.
	Secrets(ctx context.Context, project string) ([]Sealed, error)
	// DeleteSecret removes one: fault.NotFound when there is none.
	DeleteSecret(ctx context.Context, project, name string, e audit.Event) error
}

// Key is the deployment's key for secrets: it seals their values and
// derives placeholders. Replicas share it.
type Key struct{ b []byte }

// KeySize is a key's size in bytes.
const KeySize = 32

// LoadKey reads the key from path (hex), making one there (0600) when
// there is none: the first start of a deployment.
func LoadKey(path string) (Key, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		k := make([]byte, KeySize)
		_, _ = rand.Read(k)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return Key{}, fmt.Errorf("secrets key: %w", err)
		}
		if err := os.WriteFile(path, []byte(hex.EncodeToString(k)+"\n"), 0o600); err != nil {
			return Key{}, fmt.Errorf("secrets key: %w", err)
		}
		return Key{b: k}, nil
	}
	if err != nil {
		return Key{}, fmt.Errorf("secrets key: %w", err)
	}
	k, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(k) != KeySize {
		return Key{}, fmt.Errorf("secrets key %s: want %d bytes in hex (%d hex digits)", path, KeySize, 2*KeySize)
	}
	return Key{b: k}, nil
}

// NewKey is a key of the given bytes, for tests.
func NewKey(b []byte) Key { return Key{b: slices.Clone(b)} }

// derive is a key of its own for one use, so the sealing key and the
// placeholders' never meet.
func (k Key) derive(use string) []byte {
	m := hmac.New(sha256.New, k.b)
	m.Write([]byte("berth secrets: " + use))
	return m.Sum(nil)
}

// Derive is a key of its own for another of the deployment's uses (the
// triggers' webhook secrets), apart from the sealing and placeholder
// keys.
func (k Key) Derive(use string) []byte { return k.derive("other: " + use) }

// aad binds a sealed value to its project and name: a value copied to
// another row does not open.
func aad(project, name string) []byte { return []byte(project + "\x00" + name) }

func (k Key) gcm() (cipher.AEAD, error) {
	block, err := aes.NewCipher(k.derive("seal"))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func (k Key) seal(project, name string, value secret.Secret) ([]byte, error) {
	g, err := k.gcm()
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, g.NonceSize())
	_, _ = rand.Read(nonce)
	return g.Seal(nonce, nonce, []byte(value.Reveal()), aad(project, name)), nil
}

func (k Key) open(s Sealed) (secret.Secret, error) {
	g, err := k.gcm()
	if err != nil {
		return secret.Secret{}, err
	}
	if len(s.Value) < g.NonceSize() {
		return secret.Secret{}, fmt.Errorf("secret %s of project %s: sealed value too short", s.Name, s.Project)
	}
	v, err := g.Open(nil, s.Value[:g.NonceSize()], s.Value[g.NonceSize():], aad(s.Project, s.Name))
	if err != nil {
		return secret.Secret{}, fmt.Errorf("secret %s of project %s does not open with this deployment's key (BERTH_SECRETS_KEY_FILE)", s.Name, s.Project)
	}
	return secret.New(string(v)), nil
}

// Placeholder is what sandbox's variable name holds in place of the
// secret's value.
func (k Key) Placeholder(sandbox, name string) string {
	m := hmac.New(sha256.New, k.derive("placeholder"))
	m.Write([]byte(sandbox + "\x00" + name))
	return Prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(m.Sum(nil))[:32])
}

// Service keeps projects' secrets for their administrators, hands
// sandboxes their placeholders and the proxy the values.
type Service struct {
	store    Store
	accounts *account.Service
	key      Key
	now      func() time.Time
	// reserved are variable names a secret may not take (the gateway's
	// own, the vendors' credentials).
	reserved func(name string) bool
	// authority is the certificate (PEM) the egress proxy's stand-ins are
	// signed by, which a sandbox with placeholders trusts.
	authority []byte
}

// NewService returns a Service; reserved says which names a secret may
// not take (nil: only BERTH_*); authority is the egress proxy's authority
// (PEM), which sandboxes with placeholders are told to trust.
func NewService(store Store, accounts *account.Service, key Key, now func() time.Time, reserved func(string) bool, authority []byte) *Service {
	if reserved == nil {
		reserved = func(string) bool { return false }
	}
	return &Service{store: store, accounts: accounts, key: key, now: now, reserved: reserved, authority: authority}
}

// scope resolves org and project for p, who must see the organisation
// (else not found); admin says p must administer it.
func (s *Service) scope(ctx context.Context, p account.Principal, orgRef, projectRef string, admin bool) (org, project string, err error) {
	if org, project, err = s.accounts.Scope(ctx, p, orgRef, projectRef); err != nil {
		return "", "", err
	}
	if admin && !p.IsAdminOf(org) {
		return "", "", fault.Errorf(fault.Forbidden, "only an administrator of the organisation sets and deletes its projects' secrets")
	}
	return org, project, nil
}

// CheckName says what is wrong with a secret's name.
func (s *Service) CheckName(name string) error {
	switch {
	case len(name) == 0 || len(name) > MaxName || !namePattern.MatchString(name):
		return fault.Field("name", "%q is not a variable's name: letters, digits and _, not starting with a digit, at most %d bytes", name, MaxName)
	case strings.HasPrefix(strings.ToUpper(name), "BERTH_"), s.reserved(name):
		return fault.Field("name", "%s is a variable berth sets itself", name)
	}
	return nil
}

// Set stores a project's secret, replacing one of its name; hosts are the
// hosts it is for (egress rules: a name or *.domain, :port when not 443).
func (s *Service) Set(ctx context.Context, p account.Principal, orgRef, projectRef, name string, hosts []string, value secret.Secret) (Credential, error) {
	org, project, err := s.scope(ctx, p, orgRef, projectRef, true)
	if err != nil {
		return Credential{}, err
	}
	if err := s.CheckName(name); err != nil {
		return Credential{}, err
	}
	if value.IsZero() || len(value.Reveal()) > MaxValue {
		return Credential{}, fault.Field("value", "a secret's value is 1 to %d bytes", MaxValue)
	}
	if strings.ContainsAny(value.Reveal(), "\r\n\x00") {
		return Credential{}, fault.Field("value", "a secret's value goes into a request header: no line breaks or NUL")
	}
	if len(hosts) == 0 || len(hosts) > MaxHosts {
		return Credential{}, fault.Field("hosts", "a secret is for 1 to %d hosts (--host)", MaxHosts)
	}
	var rules []string
	for _, h := range hosts {
		r, err := egress.ParseRule(h)
		if err != nil {
			return Credential{}, fault.Field("hosts", "%v", err)
		}
		if !r.IsName() {
			return Credential{}, fault.Field("hosts", "%s is an address: a secret is for hosts by name, whose certificate the proxy can stand in for", h)
		}
		if !slices.Contains(rules, r.String()) {
			rules = append(rules, r.String())
		}
	}
	sealed, err := s.key.seal(project, name, value)
	if err != nil {
		return Credential{}, err
	}
	sec := Credential{Org: org, Project: project, Name: name, Hosts: rules, CreatedAt: s.now().UTC(), CreatedBy: p.User.ID}
	e := audit.Event{At: sec.CreatedAt, Org: org, Actor: p.User.ID, Action: audit.SecretSet, Target: projectRef + "/" + name,
		Outcome: audit.OK, Detail: "for " + strings.Join(rules, ", ")}
	if err := s.store.PutSecret(ctx, Sealed{Credential: sec, Value: sealed}, e); err != nil {
		return Credential{}, err
	}
	return sec, nil
}

// List lists a project's secrets, without values, to whoever may see
// its organisation.
func (s *Service) List(ctx context.Context, p account.Principal, orgRef, projectRef string) ([]Credential, error) {
	_, project, err := s.scope(ctx, p, orgRef, projectRef, false)
	if err != nil {
		return nil, err
	}
	all, err := s.store.Secrets(ctx, project)
	if err != nil {
		return nil, err
	}
	out := make([]Credential, len(all))
	for i, x := range all {
		out[i] = x.Credential
	}
	return out, nil
}

// Delete removes a project's secret: the sandboxes' placeholders stop
// working at their next request.
func (s *Service) Delete(ctx context.Context, p account.Principal, orgRef, projectRef, name string) error {
	org, project, err := s.scope(ctx, p, orgRef, projectRef, true)
	if err != nil {
		return err
	}
	e := audit.Event{At: s.now().UTC(), Org: org, Actor: p.User.ID, Action: audit.SecretDelete, Target: projectRef + "/" + name, Outcome: audit.OK}
	return s.store.DeleteSecret(ctx, project, name, e)
}

// SandboxSecrets is what an agent sandbox gets of its project's secrets
// (sandbox.SecretEnv): each secret's name with its placeholder and, when
// there is any, BERTH_CA_CERTS, the authority to trust for their hosts.
func (s *Service) SandboxSecrets(ctx context.Context, sb sandbox.Sandbox) (map[string]string, error) {
	all, err := s.store.Secrets(ctx, sb.Project)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	env := make(map[string]string, len(all)+1)
	for _, x := range all {
		env[x.Name] = s.key.Placeholder(string(sb.ID), x.Name)
	}
	env["BERTH_CA_CERTS"] = string(s.authority)
	return env, nil
}

// Replacement is one secret as the proxy uses it for one sandbox: where
// the placeholder stands in a request to one of the hosts, the value
// goes.
type Replacement struct {
	Name        string
	Hosts       []egress.Rule
	Placeholder string
	Value       secret.Secret
}

// For is what the proxy replaces for a sandbox of project.
func (s *Service) For(ctx context.Context, sandbox, project string) ([]Replacement, error) {
	all, err := s.store.Secrets(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("secrets of project %s: %w", project, err)
	}
	out := make([]Replacement, 0, len(all))
	for _, x := range all {
		v, err := s.key.open(x)
		if err != nil {
			return nil, err
		}
		r := Replacement{Name: x.Name, Placeholder: s.key.Placeholder(sandbox, x.Name), Value: v}
		for _, h := range x.Hosts {
			rule, err := egress.ParseRule(h)
			if err != nil {
				return nil, fmt.Errorf("secret %s of project %s: %w", x.Name, project, err)
			}
			r.Hosts = append(r.Hosts, rule)
		}
		out = append(out, r)
	}
	return out, nil
}

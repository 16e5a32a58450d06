// Package secret holds a credential's value so that no way of printing,
// logging or marshalling it shows the value (SPEC S13, S14: credentials
// travel by name, never in logs): API keys' secrets, forge tokens and
// keys, model vendors' credentials. Only Reveal gives the value, to whoever
// must hand it over.
//
// It is a leaf with the standard library only, so the gateway's packages
// and berth-init, inside every sandbox image, use the same type.
package secret

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
)

// Redacted is what a Secret prints, logs and marshals as.
const Redacted = "[redacted]"

// Secret is a credential's value. The zero Secret holds none.
//
// The value sits behind a pointer: fmt prints an unexported field of a
// struct without calling its methods, and would show a string there; a
// pointer it prints as an address. Secrets compare with Equal, not ==.
type Secret struct{ v *string }

// New holds value; an empty value is the zero Secret.
func New(value string) Secret {
	if value == "" {
		return Secret{}
	}
	return Secret{v: &value}
}

// Reveal returns the value, for whoever must hand it over (an HTTP
// header, a process's environment, a one-time answer).
func (s Secret) Reveal() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}

// IsZero reports whether s holds no value.
func (s Secret) IsZero() bool { return s.v == nil }

// Equal reports whether s and o hold the same value, in constant time.
// go-cmp uses it, so structs holding secrets compare in tests.
func (s Secret) Equal(o Secret) bool {
	return subtle.ConstantTimeCompare([]byte(s.Reveal()), []byte(o.Reveal())) == 1
}

// String redacts the secret.
func (Secret) String() string { return Redacted }

// GoString redacts the secret (%#v).
func (Secret) GoString() string { return Redacted }

// Format redacts the secret under every verb of package fmt: %v, %+v,
// %#v, %s, %q, %x and the rest.
func (Secret) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		fmt.Fprintf(f, "%q", Redacted)
		return
	}
	fmt.Fprint(f, Redacted)
}

// LogValue redacts the secret under every log/slog handler: the JSON
// handler marshals a plain string type's value, the text handler prints
// it.
func (Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalText redacts the secret (encoding/xml, slog's text handler, YAML
// and map keys).
func (Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// MarshalJSON redacts the secret: a value bound for the wire is revealed
// into a plain string field on purpose.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

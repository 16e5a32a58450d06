package paging

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
)

// Cursor is what carries a list from one page to the next: which list it
// is, the filters its first page was read with (a later page keeps them
// whatever its request says) and where the last page ended.
type Cursor struct {
	List    string            `json:"l"`
	Filters map[string]string `json:"f,omitempty"`
	After   Key               `json:"k"`
}

// ErrBadCursor is a cursor that Open refuses: not one of ours, altered,
// or sealed under another secret (another caller's).
var ErrBadCursor = errors.New("not a cursor this gateway gave to this key")

// domain keeps a cursor's signature from being any other HMAC made under
// the same secret (the web panel signs its forms under the caller's key).
const domain = "berth-cursor/1\x00"

// Seal returns c as an opaque string: its JSON and an HMAC-SHA256 of it
// under secret, both base64url. The gateway's secret is the caller's own
// key, so a cursor works on every replica and after a restart, and only
// for the caller it was given to.
func Seal(secret string, c Cursor) string {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // strings and integers always marshal
	}
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(sign(secret, payload))
}

// Open checks s's signature under secret and returns the cursor it seals;
// anything else is ErrBadCursor.
func Open(secret, s string) (Cursor, error) {
	payload, sig, ok := strings.Cut(s, ".")
	if !ok {
		return Cursor{}, ErrBadCursor
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, sign(secret, payload)) {
		return Cursor{}, ErrBadCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return Cursor{}, ErrBadCursor
	}
	var c Cursor
	if err := json.Unmarshal(b, &c); err != nil {
		return Cursor{}, ErrBadCursor
	}
	return c, nil
}

func sign(secret, payload string) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(domain))
	mac.Write([]byte(payload))
	return mac.Sum(nil)
}

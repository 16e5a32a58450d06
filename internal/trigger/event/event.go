// Package event reads the deliveries that start berth's triggers: GitHub
// App webhooks, GitLab project webhooks, and berth's own generic webhooks
// signed with HMAC-SHA256. Each parser checks that the delivery came from
// the holder of the secret before it reads anything else, then turns it
// into one Event, or says it is nothing a trigger acts on (ErrIgnored).
//
// Everything a delivery says is untrusted input from the internet, and
// what it says ends up in an agent's task, so the parsers bound it:
//
//   - a body is at most MaxBody bytes (larger is fault.TooLarge on
//     "body") and its JSON nests at most 64 deep;
//   - delivery ids are at most 128 visible ASCII characters;
//   - Repo is a forge.CheckPath path of at least two elements, Host a
//     host[:port] from an http(s) URL, URL an http(s) URL of at most
//     2 KiB, Label and Author at most 255 bytes of text with no control
//     characters (refused otherwise: they are matched and compared, so
//     they are never rewritten);
//   - Title, Body and Comment are made valid UTF-8 and lose their control
//     characters (Body and Comment keep \n and \t; Title is one line),
//     then are cut at a rune boundary to MaxTitle and MaxText bytes with a
//     note saying so.
//
// A delivery that fails its signature or token wraps ErrSignature and is
// of kind fault.Unauthenticated (401); one that is well formed but about
// nothing a trigger acts on wraps ErrIgnored (answer 202, do nothing); one
// that is malformed or lacks what an Event needs is fault.Invalid, naming
// the field.
//
// Redelivery: a sender that delivers again sends the same Delivery id
// (GitHub's redeliver button, GitLab's retries through Idempotency-Key, a
// generic sender retrying with the same X-Berth-Delivery). The caller
// keeps the ids it has acted on, keyed by Source and Delivery, and acts
// once.
package event

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/forge"
)

// Source is where an event came from.
type Source string

// The sources.
const (
	SourceGitHub   Source = "github"
	SourceGitLab   Source = "gitlab"
	SourceWebhook  Source = "webhook"
	SourceSchedule Source = "schedule"
)

// Kind is what happened.
type Kind string

// The kinds.
const (
	// KindIssueLabeled: a label was added to an issue or a pull/merge
	// request; Label names it.
	KindIssueLabeled Kind = "issue_labeled"
	// KindComment: a comment was written on an issue or a pull/merge
	// request; Comment is its text.
	KindComment Kind = "comment"
	// KindWebhook: a generic webhook arrived; Payload is what it sent.
	KindWebhook Kind = "webhook"
	// KindSchedule: a schedule came due (made by the trigger package, not
	// read from a delivery).
	KindSchedule Kind = "schedule"
)

// Event is one delivery read and verified.
type Event struct {
	Source Source
	// Delivery is the sender's id for the delivery: X-GitHub-Delivery;
	// GitLab's Idempotency-Key, else X-Gitlab-Event-UUID; X-Berth-Delivery
	// for generic webhooks. A redelivery carries the same id.
	Delivery string
	Kind     Kind
	// Repo is the repository's path on its forge: owner/name,
	// group/sub/name ("" for generic webhooks).
	Repo string
	// Host is the forge's web host as its URLs name it (github.com,
	// gitlab.example.com:8443), from the repository's html_url or web_url.
	Host string
	// Label is the label just added (KindIssueLabeled), and Labels every
	// label the delivery added, Label first (GitLab adds several at once).
	Label  string
	Labels []string
	// Thread is the issue, or the pull/merge request, the event is about;
	// a comment on a pull request is on a ThreadChange.
	Thread forge.Thread
	// Title is the thread's title, or a generic webhook's "title".
	Title string
	// Body is the issue's or pull request's description, or a generic
	// webhook's "body".
	Body string
	// URL is the thread's web page.
	URL string
	// Comment is a comment's text (KindComment).
	Comment string
	// Review says the comment is a review's: on a pull (merge) request's
	// diff, or a review submitted with a body (GitHub), rather than on
	// its conversation.
	Review bool
	// Author is who acted: GitHub's sender.login, GitLab's user.username.
	Author string
	// Payload is the JSON object a generic webhook sent (numbers as
	// json.Number), for the task template; nil for the forges.
	Payload map[string]any
}

// Errors.
var (
	// ErrSignature: the delivery is not signed by the secret (or carries
	// the wrong token, or its timestamp is out of the window). Errors
	// wrapping it are fault.Unauthenticated: the caller answers 401.
	ErrSignature = errors.New("not signed by the webhook's secret")
	// ErrIgnored: a well-formed delivery of something no trigger acts on
	// (a ping, another event or action, a bot's comment, an edit). The
	// caller answers 202 and does nothing.
	ErrIgnored = errors.New("no trigger acts on it")
)

// Limits.
const (
	// MaxBody is the most of a delivery's body a parser takes. GitHub caps
	// its payloads at 25 MB, but the events triggers act on are a few KiB
	// plus their texts: on GitHub a body or comment is at most 65536
	// characters, so a delivery with two of them stays well under 1 MiB;
	// GitLab allows descriptions and notes of up to a million characters,
	// so only a delivery carrying several near that size (an edit's
	// previous and current description, say) passes 5 MiB, and is refused.
	// A caller reads at most MaxBody+1 bytes (io.LimitReader(r.Body,
	// event.MaxBody+1)) and hands them all over: the parser refuses more
	// than MaxBody as fault.TooLarge on "body", before it checks the
	// signature.
	MaxBody = 5 << 20
	// MaxTitle is the most of a title an Event keeps, in bytes.
	MaxTitle = 1 << 10
	// MaxText is the most of a body or a comment an Event keeps, in bytes.
	MaxText = 64 << 10

	maxDelivery = 128
	maxName     = 255 // Label, Author, Host
	maxURL      = 2 << 10
	maxDepth    = 64
)

// checkSize refuses a body over MaxBody.
func checkSize(body []byte) error {
	if len(body) > MaxBody {
		return &fault.Error{Kind: fault.TooLarge, Field: "body",
			Message: fmt.Sprintf("body: %d bytes, over the %d a delivery may have", len(body), MaxBody)}
	}
	return nil
}

// unauthenticated returns an error of kind Unauthenticated wrapping
// ErrSignature.
func unauthenticated(format string, args ...any) error {
	return fault.Errorf(fault.Unauthenticated, format+": %w", append(args, ErrSignature)...)
}

// ignored returns an error wrapping ErrIgnored.
func ignored(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrIgnored)...)
}

// checkHMAC checks that header holds "sha256=" and the hex HMAC-SHA256 of
// msg under secret.
func checkHMAC(name, header string, secret []byte, msg ...[]byte) error {
	if len(secret) == 0 {
		return unauthenticated("no secret is set, so no delivery is taken")
	}
	if header == "" {
		return unauthenticated("no %s header", name)
	}
	hexSum, ok := strings.CutPrefix(header, "sha256=")
	if !ok || len(hexSum) != 2*sha256.Size {
		return unauthenticated("%s is not sha256= and 64 hex digits", name)
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil {
		return unauthenticated("%s is not sha256= and 64 hex digits", name)
	}
	mac := hmac.New(sha256.New, secret)
	for _, m := range msg {
		mac.Write(m)
	}
	if !hmac.Equal(got, mac.Sum(nil)) {
		return unauthenticated("%s does not match the body", name)
	}
	return nil
}

// deliveryID reads a delivery id header: required, at most maxDelivery
// visible ASCII characters.
func deliveryID(h http.Header, name string) (string, error) {
	id := h.Get(name)
	if id == "" {
		return "", fault.Field(name, "missing")
	}
	if len(id) > maxDelivery {
		return "", fault.Field(name, "%d bytes, over %d", len(id), maxDelivery)
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return "", fault.Field(name, "%.40q: only visible ASCII characters", id)
		}
	}
	return id, nil
}

// checkDepth refuses JSON that nests deeper than maxDepth. It counts
// brackets outside strings and does not otherwise check the syntax (the
// decoder does that next).
func checkDepth(body []byte) error {
	depth, inString, escaped := 0, false, false
	for _, c := range body {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > maxDepth {
				return fault.Field("body", "JSON nested more than %d deep", maxDepth)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}

// notJSON says a body could not be decoded.
func notJSON(err error) error {
	return fault.Field("body", "not the JSON expected: %v", err)
}

// present reports whether a raw JSON field was sent with a value other
// than null.
func present(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// repoPath checks a repository path from a payload.
func repoPath(field, path string) (string, error) {
	if path == "" {
		return "", fault.Field(field, "missing")
	}
	if err := forge.CheckPath(path); err != nil || !strings.Contains(path, "/") {
		return "", fault.Field(field, "%.80q is not a repository path", path)
	}
	return path, nil
}

// webURL checks an http(s) URL from a payload.
func webURL(field, s string) (*url.URL, error) {
	if s == "" {
		return nil, fault.Field(field, "missing")
	}
	if len(s) > maxURL {
		return nil, fault.Field(field, "%d bytes, over %d", len(s), maxURL)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Hostname() == "" ||
		u.User != nil || len(u.Host) > maxName || strings.ContainsAny(s, " \t\r\n\\") {
		return nil, fault.Field(field, "%.80q is not an http(s) address", s)
	}
	if p := u.Port(); p != "" && strings.Trim(p, "0123456789") != "" {
		return nil, fault.Field(field, "%.80q is not an http(s) address", s)
	}
	return u, nil
}

// host returns the host[:port] of an http(s) URL from a payload, lower
// case.
func host(field, s string) (string, error) {
	u, err := webURL(field, s)
	if err != nil {
		return "", err
	}
	return strings.ToLower(u.Host), nil
}

// nameField checks a label or a user name: present, at most maxName bytes,
// valid UTF-8 with no control characters. Names are compared, so one
// that is not clean is refused, never cleaned into another name.
func nameField(field, s string) (string, error) {
	if s == "" {
		return "", fault.Field(field, "missing")
	}
	if len(s) > maxName {
		return "", fault.Field(field, "%d bytes, over %d", len(s), maxName)
	}
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r == utf8.RuneError || unicode.IsControl(r) }) {
		return "", fault.Field(field, "%.40q has characters a name may not have", s)
	}
	return s, nil
}

// title makes s a one-line text of at most MaxTitle bytes.
func title(s string) string {
	return cut(clean(s, false), MaxTitle, " […]")
}

// text makes s a text of at most MaxText bytes.
func text(s string) string {
	full := len(s)
	s = clean(s, true)
	if len(s) <= MaxText {
		return s
	}
	return cut(s, MaxText, fmt.Sprintf("\n\n[… cut by berth: the text was %d bytes]", full))
}

// blank reports whether s has no text once cleaned: only white space
// and control characters.
func blank(s string) bool {
	return strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) == ""
}

// clean returns s as valid UTF-8 without control characters; multiline
// keeps \n and \t, else they become spaces.
func clean(s string, multiline bool) string {
	ok := utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t'))
	})
	if ok {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '\n' || r == '\t':
			if multiline {
				b.WriteRune(r)
			} else {
				b.WriteByte(' ')
			}
		case unicode.IsControl(r):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// cut returns s if it fits in limit bytes, else as much of it as fits
// before note, cut at a rune boundary, and note.
func cut(s string, limit int, note string) string {
	if len(s) <= limit {
		return s
	}
	keep := limit - len(note)
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + note
}

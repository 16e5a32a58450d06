package panel

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	"berth.dev/berth/internal/secret"
)

// The panel's cookies. Each is HttpOnly and SameSite=Strict, and Secure
// when the request came over https.
const (
	// sessionCookie holds "<nonce>.<API key>" for a signed-in browser.
	sessionCookie = "berth_session"
	// signInCookie holds the token of the sign-in form, which has no
	// session to derive one from (double submit).
	signInCookie = "berth_sign_in"
	// flashCookie carries what a form did to the page it redirects to,
	// read once. A cookie, not the query string: a link cannot make the
	// panel say something.
	flashCookie = "berth_flash"
)

// signInLimit is the most the sign-in form's body holds: a key and a
// page to go back to.
const signInLimit = 64 << 10

// session is a signed-in browser: the API key it signed in with, and a
// nonce drawn at that sign-in.
type session struct {
	nonce string
	key   secret.Secret
}

func newSession(key string) session { return session{nonce: rand.Text(), key: secret.New(key)} }

func (s session) value() string { return s.nonce + "." + s.key.Reveal() }

func parseSession(v string) (session, bool) {
	nonce, key, ok := strings.Cut(v, ".")
	if !ok || nonce == "" || key == "" {
		return session{}, false
	}
	return session{nonce: nonce, key: secret.New(key)}, true
}

// csrf is the token every form of this session carries: a MAC of the
// nonce under the key, so only a page the panel rendered for this sign-in
// has it, and no state is kept (it survives a restart and works across
// gateways). It says nothing of the key.
func (s session) csrf() string {
	mac := hmac.New(sha256.New, []byte(s.key.Reveal()))
	mac.Write([]byte("berth panel form\x00" + s.nonce))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func (s session) checkCSRF(token string) bool {
	return token != "" && hmac.Equal([]byte(token), []byte(s.csrf()))
}

// newFormToken gives a form that has no session to derive its token from
// (the sign-in form, the device page's) a fresh one, kept in the cookie
// name for path as well (double submit): a post with another token did
// not come from the page.
func newFormToken(w http.ResponseWriter, r *http.Request, name, path string) string {
	token := rand.Text()
	setCookie(w, r, name, token, path, 0)
	return token
}

// formTokenOK reports whether a parsed form's token is the one its page
// was given in cookie name (newFormToken).
func formTokenOK(r *http.Request, name string) bool {
	ck, err := r.Cookie(name)
	return err == nil && ck.Value != "" && subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostForm.Get("csrf"))) == 1
}

// secure reports whether the browser reached the gateway over https,
// itself or through a proxy that says so.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func setCookie(w http.ResponseWriter, r *http.Request, name, value, path string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
}

func setFlash(w http.ResponseWriter, r *http.Request, msg string) {
	setCookie(w, r, flashCookie, base64.RawURLEncoding.EncodeToString([]byte(msg)), "/", 60)
}

// takeFlash reads the flash cookie and clears it.
func takeFlash(w http.ResponseWriter, r *http.Request) string {
	ck, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	setCookie(w, r, flashCookie, "", "/", -1)
	b, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil || len(b) > 500 {
		return ""
	}
	return string(b)
}

// signedIn authenticates the session's key exactly as the API does a
// bearer key; a sandbox's own key is refused, as on the control API. A
// browser that is not signed in is sent to the sign-in page.
func (p *Panel) signedIn(w http.ResponseWriter, r *http.Request) (caller, bool) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		p.toSignIn(w, r, "")
		return caller{}, false
	}
	sess, ok := parseSession(ck.Value)
	if !ok {
		p.toSignIn(w, r, "")
		return caller{}, false
	}
	pr, err := p.accounts.Authenticate(r.Context(), sess.key.Reveal())
	if err != nil {
		p.toSignIn(w, r, "Your key no longer works: sign in again.")
		return caller{}, false
	}
	if pr.Sandbox != "" {
		p.toSignIn(w, r, "A sandbox's own key cannot use the panel.")
		return caller{}, false
	}
	return caller{Principal: pr, sess: sess, flash: takeFlash(w, r)}, true
}

// toSignIn forgets the session and sends the browser to sign in, coming
// back here afterwards when it was reading a page.
func (p *Panel) toSignIn(w http.ResponseWriter, r *http.Request, msg string) {
	if _, err := r.Cookie(sessionCookie); err == nil {
		setCookie(w, r, sessionCookie, "", "/", -1)
	}
	if msg != "" {
		setFlash(w, r, msg)
	}
	to := "/sign-in"
	if r.Method == http.MethodGet && r.URL.Path != "/" {
		to += "?next=" + url.QueryEscape(r.URL.RequestURI())
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// signInPage is the body of the sign-in page: the identity provider's
// button when the gateway has one, the key form unless it is turned off.
type signInPage struct {
	Next      string
	Error     string
	SSO       bool
	SSOLink   string
	Issuer    string
	KeySignIn bool
}

// signInBody is the sign-in page's body, coming back to next, saying
// msg.
func (p *Panel) signInBody(next, msg string) signInPage {
	b := signInPage{Next: next, Error: msg, KeySignIn: p.keySignIn}
	if p.sso.Enabled() {
		b.SSO, b.Issuer, b.SSOLink = true, p.sso.Issuer(), ssoPath
		if next != "" {
			b.SSOLink += "?next=" + url.QueryEscape(next)
		}
	}
	return b
}

func (p *Panel) signInForm(w http.ResponseWriter, r *http.Request) {
	p.renderSignIn(w, r, http.StatusOK, p.signInBody(localPath(r.URL.Query().Get("next")), ""), takeFlash(w, r))
}

func (p *Panel) renderSignIn(w http.ResponseWriter, r *http.Request, status int, body signInPage, flash string) {
	token := newFormToken(w, r, signInCookie, "/sign-in")
	p.render(w, r, status, "signin", &view{Title: "Sign in", CSRF: token, Flash: flash, Body: body})
}

// signIn checks the key as every API call does and keeps it in the
// session cookie. The key is never logged, and never put in a page.
func (p *Panel) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, signInLimit)
	if err := r.ParseForm(); err != nil {
		status, body := p.formError(w, r, err)
		p.plainError(w, r, status, body.Message)
		return
	}
	next := localPath(r.PostForm.Get("next"))
	if !p.keySignIn {
		p.renderSignIn(w, r, http.StatusForbidden, p.signInBody(next,
			"Signing in with an API key is turned off on this gateway: sign in with your organisation's account."), "")
		return
	}
	if !formTokenOK(r, signInCookie) {
		p.renderSignIn(w, r, http.StatusForbidden, p.signInBody(next,
			"This form did not come from this panel, or it is stale (cookies must be on). Nothing was done: try again."), "")
		return
	}
	key := strings.TrimSpace(r.PostForm.Get("key"))
	pr, err := p.accounts.Authenticate(r.Context(), key)
	if err != nil {
		p.renderSignIn(w, r, http.StatusUnauthorized, p.signInBody(next,
			"That key is unknown, revoked or expired, or its user is disabled."), "")
		return
	}
	if pr.Sandbox != "" {
		p.renderSignIn(w, r, http.StatusForbidden, p.signInBody(next,
			"That is a sandbox's own key: sign in with your own (berth user key, or ask an administrator)."), "")
		return
	}
	setCookie(w, r, signInCookie, "", "/sign-in", -1)
	setCookie(w, r, sessionCookie, newSession(key).value(), "/", 0)
	if next == "" {
		next = "/"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signOut forgets the session; a key a sign-in through the identity
// provider gave is revoked with it (a key pasted in is the person's own
// and stays).
func (p *Panel) signOut(w http.ResponseWriter, r *http.Request, c caller) {
	if err := p.sso.SignOut(r.Context(), c.KeyID); err != nil {
		p.log.ErrorContext(r.Context(), "signing out: the sign-in's key was not revoked", "key", c.KeyID, "err", err)
	}
	setCookie(w, r, sessionCookie, "", "/", -1)
	setFlash(w, r, "Signed out.")
	http.Redirect(w, r, "/sign-in", http.StatusSeeOther)
}

// localPath keeps a next page only when it is a path of this gateway, so
// the sign-in form cannot send anybody elsewhere; anything else is "".
// Browsers read a Location more loosely than url.Parse: they drop tabs
// and newlines anywhere and spaces and control characters around it
// ("/\t/evil" is "//evil"), read a backslash as a slash, and resolve dot
// segments ("/.//evil"). So the address must be printable ASCII without a
// backslash, an absolute path with no scheme, host or userinfo, and its
// path, decoded and with dot segments resolved, must not start with "//"
// nor hold a backslash or a control character.
func localPath(s string) string {
	if !strings.HasPrefix(s, "/") || !printable(s) || strings.Contains(s, "\\") {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return ""
	}
	if !printable(u.Path) || strings.Contains(u.Path, "\\") || strings.HasPrefix(resolveDots(u.Path), "//") {
		return ""
	}
	return s
}

// printable reports whether s is printable ASCII: no control character,
// no space, nothing beyond 0x7e.
func printable(s string) bool {
	for i := range len(s) {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// resolveDots removes the dot segments of an absolute path as a browser
// does (RFC 3986 §5.2.4), keeping empty segments: "/a/..//b" is "//b".
func resolveDots(p string) string {
	var out []string
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		last := i == len(segs)-1
		switch seg {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, seg)
		}
	}
	return strings.Join(out, "/")
}

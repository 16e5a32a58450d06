package panel

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"berth.dev/berth/internal/sso"
)

// ssoCookie binds a sign-in through the identity provider to the browser
// that started it. SameSite=Lax, not Strict: it must come back on the
// provider's redirect to the callback, a navigation from another site.
const ssoCookie = "berth_sso"

// ssoPath is where the sign-in pages through the identity provider live;
// the cookie goes nowhere else.
const ssoPath = "/sign-in/sso"

func setSSOCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: ssoCookie, Value: value, Path: ssoPath, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure(r)})
}

// ssoStart sends the browser to the identity provider to sign in to the
// panel, coming back to next.
func (p *Panel) ssoStart(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p.ssoBegin(w, r, localPath(q.Get("next")), q.Get("org"), nil)
}

// ssoStartCLI is where berth login --sso sends the person's browser: the
// same sign-in, whose end hands the CLI's loopback listener a one-time
// code instead of signing the browser in.
func (p *Panel) ssoStartCLI(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	port, err := strconv.Atoi(q.Get("port"))
	if err != nil {
		port = 0 // refused by Begin, naming the field
	}
	p.ssoBegin(w, r, "", q.Get("org"), &sso.CLI{Port: port, Challenge: q.Get("challenge"), State: q.Get("state")})
}

func (p *Panel) ssoBegin(w http.ResponseWriter, r *http.Request, next, org string, cli *sso.CLI) {
	if !p.sso.Enabled() {
		p.plainError(w, r, http.StatusNotFound, "This gateway signs nobody in through an identity provider: sign in with a key.")
		return
	}
	to, cookie, err := p.sso.Begin(r.Context(), next, org, cli)
	if err != nil {
		status, body := p.status(w, r, err)
		if cli != nil {
			// berth login --sso waits for its listener to be told.
			if back := sso.CLIFailed(*cli, "invalid_request", "The sign-in could not start: "+body.Message); back != "" {
				http.Redirect(w, r, back, http.StatusSeeOther)
				return
			}
		}
		p.renderSignIn(w, r, status, p.signInBody(next, "The sign-in could not start: "+body.Message), "")
		return
	}
	setSSOCookie(w, r, cookie.Reveal(), int(sso.AttemptTTL.Seconds()))
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// signedInPage is the body of the page a sign-in through the provider
// ends on.
type signedInPage struct {
	Next string
	Name string
}

// deviceDonePage is the body of the page a device's sign-in ends on: who
// signed in, for the terminal that showed Code.
type deviceDonePage struct {
	Name string
	Code string
}

// choosePage is the body of the page that asks which organisation to sign
// in to.
type choosePage struct {
	Orgs []chooseOrg
}

type chooseOrg struct {
	Name string
	Link string
}

// ssoCallback is where the provider sends the browser back. The panel's
// sign-in ends on a page of this gateway that goes on to the next page:
// a redirect would not do, as a browser counts a chain of redirects begun
// at another site as that site's, and sends no SameSite=Strict cookie
// (the session's) on it. A CLI's sign-in ends at the CLI's listener.
func (p *Panel) ssoCallback(w http.ResponseWriter, r *http.Request) {
	var cookie string
	if ck, err := r.Cookie(ssoCookie); err == nil {
		cookie = ck.Value
		setSSOCookie(w, r, "", -1)
	}
	out, err := p.sso.Finish(r.Context(), r.URL.Query(), cookie)
	if out.Redirect != "" {
		http.Redirect(w, r, out.Redirect, http.StatusSeeOther)
		return
	}
	if refusal, ok := errors.AsType[*sso.Refusal](err); ok {
		p.renderSignIn(w, r, http.StatusForbidden, p.signInBody(out.Next, refusal.Public), "")
		return
	}
	if err != nil {
		status, _ := p.status(w, r, err)
		p.renderSignIn(w, r, status, p.signInBody(out.Next, "berth could not finish signing you in: try again."), "")
		return
	}
	if out.Device != nil && len(out.Choose) == 0 {
		p.render(w, r, http.StatusOK, "devicedone", &view{Title: "Signed in", Body: deviceDonePage{Name: out.User.Name, Code: sso.ShowUserCode(out.Device.UserCode)}})
		return
	}
	if len(out.Choose) > 0 {
		var body choosePage
		for _, o := range out.Choose {
			q := url.Values{"org": {o.Name}}
			link := ssoPath + "?"
			if out.Device != nil {
				link = sso.DevicePage + "?"
				q.Set("code", sso.ShowUserCode(out.Device.UserCode))
			} else if out.CLI != nil {
				link = ssoPath + "/cli?"
				q.Set("port", strconv.Itoa(out.CLI.Port))
				q.Set("challenge", out.CLI.Challenge)
				q.Set("state", out.CLI.State)
			} else if out.Next != "" {
				q.Set("next", out.Next)
			}
			body.Orgs = append(body.Orgs, chooseOrg{Name: o.Name, Link: link + q.Encode()})
		}
		p.render(w, r, http.StatusOK, "choose", &view{Title: "Choose an organisation", Body: body})
		return
	}
	setCookie(w, r, sessionCookie, newSession(out.Key.Secret.Reveal()).value(), "/", 0)
	next := out.Next
	if next == "" {
		next = "/"
	}
	p.render(w, r, http.StatusOK, "signedin", &view{Title: "Signed in", Refresh: next, Body: signedInPage{Next: next, Name: out.User.Name}})
}

// devicePage is the body of the page where a person types the code berth
// login --sso --device shows.
type devicePage struct {
	Code  string
	Org   string
	Error string
	Field string
}

// maxTypedCode bounds a code shown back in the device page (its input's
// maxlength): XXXX-XXXX with room for spaces.
const maxTypedCode = 20

// typedCode is a code as typed, to show back; "" when too long to be one.
func typedCode(s string) string {
	if len(s) > maxTypedCode {
		return ""
	}
	return s
}

// deviceCookie holds the device page's form token (double submit): the
// form must come from the page, so that a link alone, which an attacker
// who started a device grant could send, never approves it.
const deviceCookie = "berth_device"

// deviceForm is the page where the person types the code their terminal
// shows (prefilled from ?code=, which they must still confirm).
func (p *Panel) deviceForm(w http.ResponseWriter, r *http.Request) {
	if !p.sso.Enabled() {
		p.plainError(w, r, http.StatusNotFound, "This gateway signs nobody in through an identity provider.")
		return
	}
	q := r.URL.Query()
	p.renderDevice(w, r, http.StatusOK, devicePage{Code: typedCode(q.Get("code")), Org: q.Get("org")})
}

func (p *Panel) renderDevice(w http.ResponseWriter, r *http.Request, status int, body devicePage) {
	token := newFormToken(w, r, deviceCookie, sso.DevicePage)
	p.render(w, r, status, "device", &view{Title: "Sign in a terminal", CSRF: token, Body: body})
}

// deviceStart begins the sign-in that approves the code typed, once the
// form is shown to come from the device page.
func (p *Panel) deviceStart(w http.ResponseWriter, r *http.Request) {
	if !p.sso.Enabled() {
		p.plainError(w, r, http.StatusNotFound, "This gateway signs nobody in through an identity provider.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, signInLimit)
	if err := r.ParseForm(); err != nil {
		status, body := p.formError(w, r, err)
		p.plainError(w, r, status, body.Message)
		return
	}
	body := devicePage{Code: typedCode(r.PostForm.Get("code")), Org: r.PostForm.Get("org")}
	if !formTokenOK(r, deviceCookie) {
		body.Error = "This form did not come from this page, or it is stale (cookies must be on). Nothing was done: try again."
		p.renderDevice(w, r, http.StatusForbidden, body)
		return
	}
	to, cookie, err := p.sso.BeginDevice(r.Context(), body.Code, body.Org)
	if err != nil {
		status, e := p.status(w, r, err)
		body.Error, body.Field = e.Message, e.Field
		p.renderDevice(w, r, status, body)
		return
	}
	setCookie(w, r, deviceCookie, "", sso.DevicePage, -1)
	setSSOCookie(w, r, cookie.Reveal(), int(sso.AttemptTTL.Seconds()))
	// A page that goes on, not a redirect: the panel's pages allow forms
	// to go to this gateway alone (form-action 'self'), and a browser
	// holds a form's redirects to that too.
	p.render(w, r, http.StatusOK, "goto", &view{Title: "Signing in", Refresh: to, Body: to})
}

// Package panel is berth's web panel (issue 10): server-rendered HTML over
// the services the API calls, behind the same keys and the same rules.
// Sandboxes (SPEC S3, S13), classes (S4), quotas (S7) and usage (S8), each
// a page that works without JavaScript; a little embedded script keeps the
// pages that show live state current.
//
// The panel is an adapter like the gateway that mounts it: it reads forms,
// calls account, sandbox and usage services with the caller's principal,
// and renders what they answer. Who may see or do what is decided by those
// services, never here: a sandbox the caller may not see is not found, as
// in the API, because the service says so. Domain errors become statuses
// through the gateway's one mapper, handed in as Options.Status.
//
// Signing in takes an API key and keeps it in an HttpOnly, SameSite=Strict
// cookie (Secure on https), with a nonce per sign-in; every form carries a
// token derived from both, checked before anything is done.
package panel

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/agentrun"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/reach"
	"berth.dev/berth/internal/sandbox"
	"berth.dev/berth/internal/sso"
	"berth.dev/berth/internal/terminal"
	"berth.dev/berth/internal/usage"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Options configure a Panel. Every field is required unless it says not.
type Options struct {
	Accounts  *account.Service
	Sandboxes *sandbox.Service
	Runs      *agentrun.Service
	Classes   *class.Service
	Usage     *usage.Service
	Log       *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Driver names the sandbox driver; "" (no sandboxes) hides the
	// sandboxes screens entirely.
	Driver string
	// Reach lets callers into sandboxes and Terminal opens their shells:
	// both set, a running engineer sandbox's page offers its owner (or an
	// operator) a terminal. PublicURL is the gateway's origin, whence a
	// terminal's WebSocket must come.
	Reach     *reach.Service
	Terminal  *terminal.CA
	PublicURL string
	// Track counts an open terminal among the gateway's tunnels, which a
	// stopping gateway closes and waits for: stop is closed then, done
	// ends the count; ok is false when the gateway is already stopping.
	// nil tracks nothing.
	Track func() (stop <-chan struct{}, done func(), ok bool)
	// Status maps an error to the status and message the API answers for
	// it (the gateway's one mapper), logging what is internal.
	Status func(w http.ResponseWriter, r *http.Request, err error) (int, api.Error)
	// Previews mints HTTP previews of sandboxes' ports (the gateway's);
	// nil offers none.
	Previews Previews
	// SSO signs people in through the identity provider (without one it
	// offers nothing); NoKeySignIn turns off the sign-in form that takes
	// an API key.
	SSO         *sso.Service
	NoKeySignIn bool
}

// Previews mints an HTTP preview of port of the sandbox ref for p, as the
// API's POST /sandbox/v1/sandboxes/{ref}/previews does, for a browser that
// reached the panel as r did.
type Previews interface {
	Preview(r *http.Request, p account.Principal, ref string, port int) (api.Preview, error)
}

// Panel serves the web panel.
type Panel struct {
	accounts  *account.Service
	sandboxes *sandbox.Service
	runs      *agentrun.Service
	classes   *class.Service
	usage     *usage.Service
	log       *slog.Logger
	now       func() time.Time
	driver    string
	reach     *reach.Service
	terminal  *terminal.CA
	origin    string // the gateway's public origin, "scheme://host"
	track     func() (stop <-chan struct{}, done func(), ok bool)
	status    func(w http.ResponseWriter, r *http.Request, err error) (int, api.Error)
	previews  Previews
	sso       *sso.Service
	keySignIn bool
	pages     map[string]*template.Template
	assets    map[string]string // file name → its URL with a digest, so it may be cached long
	mux       *http.ServeMux
}

// New returns a Panel. Its templates are embedded: one that does not parse
// is a bug the package's tests catch, so New panics on it.
func New(o Options) *Panel {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	p := &Panel{accounts: o.Accounts, sandboxes: o.Sandboxes, classes: o.Classes, runs: o.Runs, usage: o.Usage, log: o.Log, now: now,
		driver: o.Driver, status: o.Status, previews: o.Previews, assets: map[string]string{}, reach: o.Reach, terminal: o.Terminal, origin: originOf(o.PublicURL), track: o.Track,
		sso: o.SSO, keySignIn: !o.NoKeySignIn}
	entries, err := fs.ReadDir(assetFS, "assets")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		b, err := assetFS.ReadFile("assets/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		p.assets[e.Name()] = "/assets/" + e.Name() + "?v=" + hex.EncodeToString(sum[:6])
	}
	p.pages = parsePages(p.funcs())
	p.mux = p.routes()
	return p
}

// parsePages parses layout.html with each page template into a set of its
// own, so every page may define the blocks the layout leaves open.
func parsePages(funcs template.FuncMap) map[string]*template.Template {
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(path.Base(n), ".html")
		if name == "layout" {
			continue
		}
		pages[name] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, n))
	}
	return pages
}

// route is one page or form of the panel: a ServeMux pattern and what
// answers it.
type route struct {
	pattern string
	handler http.Handler
}

// table is every page and form the panel serves. The gateway's
// authorization matrix test reads it (Routes): a page without a row there
// fails that test.
func (p *Panel) table() []route {
	rt := []route{
		{"GET /assets/{file}", http.HandlerFunc(p.serveAsset)},
		{"GET /sign-in", http.HandlerFunc(p.signInForm)},
		{"POST /sign-in", http.HandlerFunc(p.signIn)},
		{"GET " + ssoPath, http.HandlerFunc(p.ssoStart)},
		{"GET " + ssoPath + "/cli", http.HandlerFunc(p.ssoStartCLI)},
		{"GET " + ssoPath + "/callback", http.HandlerFunc(p.ssoCallback)},
		{"GET " + sso.DevicePage, http.HandlerFunc(p.deviceForm)},
		{"POST " + sso.DevicePage, http.HandlerFunc(p.deviceStart)},
		{"POST /sign-out", p.form(p.signOut)},
		{"GET /{$}", p.page(p.home)},
	}
	if p.driver != "" {
		rt = append(rt,
			route{"GET /sandboxes", p.page(p.listSandboxes)},
			route{"GET /sandboxes/new", p.page(p.newSandbox)},
			route{"POST /sandboxes/new", p.form(p.createSandbox)},
			route{"GET /sandboxes/{ref}", p.page(p.showSandbox)},
			route{"GET /sandboxes/{ref}/log", p.page(p.runLog)},
			route{"GET /sandboxes/{ref}/terminal", p.page(p.openTerminal)},
			route{"POST /sandboxes/{ref}/{action}", p.form(p.act)},
		)
	}
	return append(rt,
		route{"GET /classes", p.page(p.listClasses)},
		route{"GET /classes/new", p.page(p.newClass)},
		route{"POST /classes/new", p.form(p.saveClass)},
		route{"POST /classes/apply", p.form(p.applyClasses)},
		route{"GET /classes/{name}/edit", p.page(p.editClass)},
		route{"POST /classes/{name}/edit", p.form(p.saveClass)},
		route{"POST /classes/{name}/delete", p.form(p.deleteClass)},

		route{"GET /quotas", p.page(p.quotas)},
		route{"GET /quotas/edit", p.page(p.editGuardrail)},
		route{"POST /quotas/edit", p.form(p.saveGuardrail)},

		route{"GET /usage", p.page(p.usageReport)},
		route{"GET /audit", p.page(p.auditLog)},
		route{"GET /users", p.page(p.listUsers)},
		route{"GET /users/{user}", p.page(p.showUser)},
		route{"POST /users/{user}/keys", p.form(p.createKey)},
		route{"POST /users/{user}/keys/{id}/revoke", p.form(p.revokeKey)},

		route{"/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.plainError(w, r, http.StatusNotFound, "There is no page at "+r.URL.Path+".")
		})},
	)
}

func (p *Panel) routes() *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range p.table() {
		mux.Handle(rt.pattern, rt.handler)
	}
	return mux
}

// Routes lists the patterns of every page and form the panel serves
// ("GET /sandboxes", "POST /classes/{name}/delete", …), in the order they
// are registered.
func (p *Panel) Routes() []string {
	var out []string
	for _, rt := range p.table() {
		out = append(out, rt.pattern)
	}
	return out
}

// ServeHTTP serves the panel with the headers every answer carries: no
// framing, no sniffing, no script or style from anywhere but the panel.
func (p *Panel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	p.mux.ServeHTTP(w, r)
}

func (p *Panel) serveAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := assetFS.ReadFile("assets/" + name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".svg":
		w.Header().Set("Content-Type", "image/svg+xml")
	}
	// Pages link assets by a digest of their content: a changed asset is a
	// new URL.
	w.Header().Set("Cache-Control", "public, max-age=86400")
	_, _ = w.Write(b)
}

// caller is who a page is rendered for.
type caller struct {
	account.Principal
	sess  session
	flash string // what the form before this page did
}

// view is what every page's template gets.
type view struct {
	Title     string
	Nav       string // the nav entry of this page
	Me        account.User
	Admin     bool // of the caller's own organisation
	Operator  bool
	Sandboxes bool // the deployment runs sandboxes
	CSRF      string
	Flash     string // what was just done, from a redirect
	Signed    bool   // signed in: the layout shows the nav
	// Refresh is a page of this gateway to go on to at once (a sign-in's
	// end); "" stays.
	Refresh string
	Body    any
}

func (p *Panel) view(c caller, r *http.Request, title, nav string, body any) *view {
	return &view{Title: title, Nav: nav, Me: c.User, Admin: c.IsAdminOf(c.User.Org), Operator: c.IsOperator(),
		Sandboxes: p.driver != "", CSRF: c.sess.csrf(), Flash: c.flash, Signed: true, Body: body}
}

// render writes a page whole: it is executed into a buffer first, so a
// template error becomes a 500, never half a page.
func (p *Panel) render(w http.ResponseWriter, r *http.Request, status int, name string, v *view) {
	var buf bytes.Buffer
	if err := p.pages[name].ExecuteTemplate(&buf, "layout.html", v); err != nil {
		p.log.ErrorContext(r.Context(), "panel page failed to render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorPage is the body of the error page.
type errorPage struct {
	Status  int
	Code    string
	Message string
}

// fail answers an error as the API would: the same status and message,
// as a page. An expired or revoked key signs the caller out.
func (p *Panel) fail(w http.ResponseWriter, r *http.Request, c caller, err error) {
	if errors.Is(err, fault.Unauthenticated) {
		p.toSignIn(w, r, "Your key no longer works: sign in again.")
		return
	}
	status, body := p.status(w, r, err)
	w.Header().Del("WWW-Authenticate")
	if body.Code == api.CodeNotFound {
		// The API's message leaves "not found" to its code; a page says it.
		body.Message += ": not found"
	}
	p.render(w, r, status, "error", p.view(c, r, http.StatusText(status), "", errorPage{Status: status, Code: body.Code, Message: body.Message}))
}

// formError is the answer to a form that could not be read: over its
// limit, the gateway's one answer to a body too large (413 too_large);
// otherwise 400.
func (p *Panel) formError(w http.ResponseWriter, r *http.Request, err error) (int, api.Error) {
	if errors.As(err, new(*http.MaxBytesError)) {
		return p.status(w, r, err)
	}
	return http.StatusBadRequest, api.Error{Code: api.CodeInvalid, Message: "The form could not be read."}
}

// plainError answers an error to somebody who may not be signed in.
func (p *Panel) plainError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	p.render(w, r, status, "error", &view{Title: http.StatusText(status), Body: errorPage{Status: status, Message: msg}})
}

// page wraps a handler that needs a signed-in caller.
func (p *Panel) page(h func(w http.ResponseWriter, r *http.Request, c caller)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := p.signedIn(w, r)
		if !ok {
			return
		}
		h(w, r, c)
	})
}

// form wraps a handler of a form: a signed-in caller, a body of at most
// api.MaxBody, and the form's token checked before anything is done.
func (p *Panel) form(h func(w http.ResponseWriter, r *http.Request, c caller)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, api.MaxBody)
		c, ok := p.signedIn(w, r)
		if !ok {
			return
		}
		if err := r.ParseForm(); err != nil {
			status, body := p.formError(w, r, err)
			p.render(w, r, status, "error", p.view(c, r, http.StatusText(status), "",
				errorPage{Status: status, Code: body.Code, Message: body.Message}))
			return
		}
		if !c.sess.checkCSRF(r.PostForm.Get("csrf")) {
			p.render(w, r, http.StatusForbidden, "error", p.view(c, r, "Form refused", "",
				errorPage{Status: http.StatusForbidden, Code: api.CodeForbidden, Message: "This form did not come from this page of the panel, or it is from an earlier sign-in. Nothing was done: go back, reload the page and try again."}))
			return
		}
		h(w, r, c)
	})
}

// home is the sandboxes screen, or the quotas screen where the deployment
// runs no sandboxes.
func (p *Panel) home(w http.ResponseWriter, r *http.Request, c caller) {
	if p.driver == "" {
		http.Redirect(w, r, "/quotas", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/sandboxes", http.StatusSeeOther)
}

// redirect ends a form: see other, with what was done for the next page
// to say.
func redirect(w http.ResponseWriter, r *http.Request, to, done string) {
	if done != "" {
		setFlash(w, r, done)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"berth.dev/berth/internal/api"
)

// The authorization matrix (issue 14, item 3): every route of the gateway,
// every page and form of the web panel, × every kind of caller. Each cell
// is one real request over HTTP, with that caller's credential where the
// route takes it, against real objects, and the status it must answer. The
// expected table is data, in matrix_table_test.go; matrix_world_test.go
// builds the world and sends the requests, matrix_sso_test.go signs its
// callers in through the identity provider (a stand-in of the test's),
// matrix_fixtures_test.go makes the fresh objects cells act on; this file
// runs the table and checks the answers.

// caller is a kind of caller: a column of the table.
type caller int

const (
	cOperator      caller = iota
	cAdmin                // an administrator of acme, the sandboxes' (and the operator's) organisation
	cForeignAdmin         // an administrator of organisation other
	cOwner                // alice, a member of acme, who owns the sandboxes
	cSSO                  // alice's key from signing in through the identity provider (berth login --sso); her panel signed in there too
	cMember               // bob, another member of acme
	cForeignMember        // sam, a member of other
	cEngineer             // the own key of alice's engineer sandbox dev (token mode, on acme/app)
	cAgent                // the own key of alice's agent sandbox fix, its run under way in its machine
	cReviewer             // the own key of alice's reviewer run rev, under way
	cRevoked              // a key of alice's, revoked
	cCut                  // a key from the sign-in of a person the identity provider cut off since (dora, her user disabled by it)
	cNone                 // no credential at all
	cGarbage              // a key shaped like ours, with a real key's id and a wrong secret
	nCallers
)

var callerNames = [nCallers]string{"operator", "admin", "admin of another org", "owner", "owner signed in through the identity provider",
	"member", "member of another org", "engineer sandbox's key", "agent sandbox's key", "reviewer run's key", "revoked key",
	"key of a person the identity provider cut off", "no credential", "garbage credential"}

// derived are the callers the table's want does not list: each expects
// what the caller it is derived from does (an SSO-made key of alice's is
// a key of alice's; a cut-off person's key is as dead as a revoked one),
// unless the row's sso or cut says otherwise.
var derived = map[caller]caller{cSSO: cOwner, cCut: cRevoked}

func (c caller) String() string { return callerNames[c] }

// place is where a request carries its caller's credential.
type place int

const (
	bearer     place = iota // Authorization: Bearer (the API; OpenAI's clients; Anthropic's auth token)
	basic                   // HTTP Basic, the key as the password (git's credential helper)
	xAPIKey                 // x-api-key (Anthropic's clients)
	googKey                 // x-goog-api-key (Gemini's clients)
	queryKey                // ?key= (Gemini's clients, too)
	cookie                  // the panel's session cookie, signed in as a browser does
	signInForm              // the key typed into the panel's sign-in form
	proxyAuth               // Proxy-Authorization: Basic, the key as the password (HTTPS_PROXY), on a proxy request
)

// request is the concrete request of a row. {name} in its path, body or
// form is a world's object (see matrix.vars) or a fresh one (fixtures).
type request struct {
	method, path string
	body         string
	form         url.Values // a panel form's fields; its token is added
	place        place
	tunnel       bool // with the tunnel's upgrade headers
	// origin makes a panel GET a WebSocket's upgrade from a page of this
	// origin ("{self}": the gateway's own).
	origin string
}

// row is one line of the table: a route, the request sent to it, and the
// status every kind of caller must get.
type row struct {
	// route is the pattern as the route table (or the panel's mux)
	// registers it.
	route string
	// what the request asks, when a route has several rows.
	what string
	req  request
	// watch names what a refused request must leave as it was (watches);
	// a fresh object a cell is sent against is watched anyway.
	watch string
	// last rows spend the world's own sandboxes: they are sent after
	// every other row.
	last bool
	// field is the input field the row's 400s must name (its bad input).
	field string
	// want is one status per caller, in the order of the callers, apart
	// by spaces: a number, or "in" for the panel's 303 to its sign-in
	// page (not signed in). The derived callers have none: see sso, cut.
	want string
	// sso and cut, when not "", are cSSO's and cCut's statuses where they
	// differ from those they are derived from (derived); the row says
	// why.
	sso, cut string
	// says is what every answer of the row must hold, in its body or its
	// Location.
	says string
}

func (r row) name() string {
	if r.what == "" {
		return r.route
	}
	return r.route + " (" + r.what + ")"
}

// expect is one cell's expected answer.
type expect struct {
	status int
	signIn bool // a 303 to the panel's sign-in page
}

func (e expect) String() string {
	if e.signIn {
		return "303 to sign in"
	}
	return strconv.Itoa(e.status)
}

// success is an answer that did what was asked.
func (e expect) success() bool {
	return e.status == http.StatusSwitchingProtocols || (e.status >= 200 && e.status < 300) || (e.status == http.StatusSeeOther && !e.signIn)
}

func parseWant(t *testing.T, r row) [nCallers]expect {
	t.Helper()
	var out [nCallers]expect
	f := strings.Fields(r.want)
	if len(f) != int(nCallers)-len(derived) {
		t.Fatalf("row %s: %d statuses, want one for each of the %d callers the table lists", r.name(), len(f), int(nCallers)-len(derived))
	}
	parse := func(s string) expect {
		if s == "in" {
			return expect{status: http.StatusSeeOther, signIn: true}
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 || n > 599 {
			t.Fatalf("row %s: %q is not a status", r.name(), s)
		}
		if n == http.StatusBadRequest && r.field == "" {
			t.Fatalf("row %s: a 400 must name the field at fault: give the row's field", r.name())
		}
		return expect{status: n}
	}
	i := 0
	for c := range nCallers {
		if _, ok := derived[c]; !ok {
			out[c] = parse(f[i])
			i++
		}
	}
	for c, from := range derived {
		out[c] = out[from]
	}
	for c, s := range map[caller]string{cSSO: r.sso, cCut: r.cut} {
		if s == "" {
			continue
		}
		if e := parse(s); e != out[derived[c]] {
			out[c] = e
		} else {
			t.Fatalf("row %s: %s's %s is %s's already: say it only where it differs", r.name(), c, s, derived[c])
		}
	}
	return out
}

var objectRef = regexp.MustCompile(`\{[a-z][a-z-]*\}`)

// TestAuthorizationMatrix sends every cell of the table (SPEC S6, S17;
// issue 14): a route of the route table or of the panel without a row
// fails, as does a row for a route nobody serves.
func TestAuthorizationMatrix(t *testing.T) {
	start := time.Now()
	m := newMatrix(t)
	rows := matrixRows()
	checkCoverage(t, m, rows)
	var ordered []row
	for _, last := range []bool{false, true} {
		for _, r := range rows {
			if r.last == last {
				ordered = append(ordered, r)
			}
		}
	}
	wants := make([][nCallers]expect, len(ordered)) // the whole table is read before a cell is sent
	for i, r := range ordered {
		wants[i] = parseWant(t, r)
	}
	cells := 0
	for i, r := range ordered {
		want := wants[i]
		t.Run(r.name(), func(t *testing.T) {
			made := map[string]string{} // the row's fresh objects, by placeholder
			for c := range nCallers {
				cells++
				m.cell(t, r, c, want[c], made)
			}
		})
	}
	t.Logf("authorization matrix: %d rows, %d cells, %d kinds of caller, in %s", len(rows), cells, nCallers, time.Since(start).Round(time.Millisecond))
}

// cell sends one cell and checks its answer, and that a refusal changed
// nothing.
func (m *matrix) cell(t *testing.T, r row, c caller, want expect, made map[string]string) {
	t.Helper()
	n := strconv.Itoa(m.next()) // {n}: names and values no cell used before
	expand := func(s string) string {
		return objectRef.ReplaceAllStringFunc(s, func(ph string) string {
			name := strings.Trim(ph, "{}")
			if name == "n" {
				return n
			}
			if v, ok := made[name]; ok {
				return v
			}
			if f, ok := fixtures[name]; ok {
				made[name] = f.make(m, t)
				return made[name]
			}
			if v, ok := m.vars[name]; ok {
				return v
			}
			t.Fatalf("row %s: no object %s", r.name(), ph)
			return ""
		})
	}
	// The fresh objects are made first, so their state is read before.
	for _, s := range []string{r.req.path, r.req.body} {
		expand(s)
	}
	for _, vs := range r.req.form {
		for _, v := range vs {
			expand(v)
		}
	}
	snapshot := func() map[string]string {
		out := map[string]string{}
		for name, v := range made {
			out[name] = fixtures[name].state(m, t, v)
		}
		if r.watch != "" {
			w, ok := watches[r.watch]
			if !ok {
				t.Fatalf("row %s: no watch %q", r.name(), r.watch)
			}
			out[r.watch] = w(m, t)
		}
		return out
	}
	before := snapshot()
	status, header, body := m.send(t, r.req, c, expand)
	after := snapshot()

	got := expect{status: status, signIn: status == http.StatusSeeOther && strings.HasPrefix(header.Get("Location"), "/sign-in")}
	e := apiError(header, body)
	switch {
	case got != want:
		t.Errorf("as %s: %s %s answered %s, want %s\n%.300s", c, r.req.method, expand(r.req.path), got, want, body)
	case r.req.place == bearer && e.Code != "" && !codeFits(status, e.Code):
		t.Errorf("as %s: %s %s answered %d with code %q", c, r.req.method, expand(r.req.path), status, e.Code)
	case status == http.StatusBadRequest && r.req.place == cookie && !strings.Contains(body, r.field+": "):
		// A panel's page names the field in its message.
		t.Errorf("as %s: %s %s answered a 400 page not naming field %q\n%.300s", c, r.req.method, expand(r.req.path), r.field, body)
	case status == http.StatusBadRequest && r.req.place != cookie && e.Field != r.field:
		t.Errorf("as %s: %s %s answered 400 naming field %q, want %q\n%.300s", c, r.req.method, expand(r.req.path), e.Field, r.field, body)
	case r.says != "" && !strings.Contains(body, r.says) && !strings.Contains(header.Get("Location"), r.says):
		t.Errorf("as %s: %s %s answered %s without saying %q\n%.300s", c, r.req.method, expand(r.req.path), got, r.says, body)
	}
	for name, b := range before {
		a := after[name]
		switch {
		case !want.success() && a != b:
			t.Errorf("as %s: refused (%s), yet %s changed: %s → %s", c, got, name, b, a)
		case want.success() && got == want && a == b && fixtures[name].make != nil:
			t.Errorf("as %s: answered %s, yet %s did not change (%s)", c, got, name, b)
		}
		if a != b {
			delete(made, name) // spent: the next cell gets a fresh one
		}
	}
	if got.success() {
		clear(made)
	}
}

// apiError is a JSON error answer; zero for any other answer.
func apiError(h http.Header, body string) api.Error {
	var e api.Error
	if !strings.HasPrefix(h.Get("Content-Type"), "application/json") || json.Unmarshal([]byte(body), &e) != nil {
		return api.Error{}
	}
	return e
}

// codeFits says whether an error's code is the one its status stands for.
func codeFits(status int, code string) bool {
	switch status {
	case http.StatusBadRequest:
		return code == api.CodeInvalid
	case http.StatusUnauthorized:
		return code == api.CodeUnauthenticated
	case http.StatusForbidden:
		return code == api.CodeForbidden || code == api.CodeQuotaExceeded
	case http.StatusNotFound:
		return code == api.CodeNotFound
	}
	return true
}

// checkCoverage fails for a route of the gateway or of its panel without
// a row, an operation of openapi.yaml without one, and a row whose route
// nobody serves.
func checkCoverage(t *testing.T, m *matrix, rows []row) {
	t.Helper()
	served := append(append(m.gw.Routes(), m.gw.PanelRoutes()...), m.gw.ProxyRoutes()...)
	covered := map[string]bool{}
	for _, r := range rows {
		covered[r.route] = true
		if !slices.Contains(served, r.route) {
			t.Errorf("the matrix has a row for %s, which neither the route table nor the panel serves", r.name())
		}
	}
	for _, s := range served {
		if !covered[s] {
			t.Errorf("route %s has no row in the authorization matrix (matrix_table_test.go)", s)
		}
	}
	b, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	// OpenAPI writes a trailing wildcard {x...} as {x}.
	described := map[string]bool{}
	for r := range covered {
		described[strings.ReplaceAll(r, "...}", "}")] = true
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			if op := strings.ToUpper(method) + " " + path; !described[op] {
				t.Errorf("openapi.yaml describes %s, which has no row in the authorization matrix", op)
			}
		}
	}
}

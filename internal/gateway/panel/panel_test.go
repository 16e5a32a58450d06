package panel_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/class"
	"berth.dev/berth/internal/guardrail"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/quantity"
	"berth.dev/berth/internal/sandbox"
)

// TestSessionCookie: signing in keeps the key in an HttpOnly,
// SameSite=Strict cookie, Secure when the browser came over https; no page
// shows the key; signing out forgets it.
func TestSessionCookie(t *testing.T) {
	w := newWorld(t)
	for _, tt := range []struct {
		name       string
		proto      string
		wantSecure bool
	}{
		{"http", "", false},
		{"https through a proxy", "https", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := w.browser(t)
			form := b.get("/sign-in")
			req, err := http.NewRequest("POST", w.url+"/sign-in", strings.NewReader(url.Values{"csrf": {form.csrf(t)}, "key": {w.keys["alice"]}}.Encode()))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tt.proto != "" {
				req.Header.Set("X-Forwarded-Proto", tt.proto)
			}
			res, err := b.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			var session *http.Cookie
			for _, ck := range res.Cookies() {
				if ck.Name == "berth_session" {
					session = ck
				}
			}
			if res.StatusCode != http.StatusSeeOther || session == nil {
				t.Fatalf("sign in: status %d, cookies %v; want 303 and berth_session", res.StatusCode, res.Cookies())
			}
			if !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Secure != tt.wantSecure || session.Path != "/" {
				t.Errorf("session cookie: HttpOnly %v, SameSite %v, Secure %v, Path %q; want HttpOnly, Strict, Secure %v, /",
					session.HttpOnly, session.SameSite, session.Secure, session.Path, tt.wantSecure)
			}
			for _, path := range []string{"/sandboxes", "/quotas", "/sandboxes/new"} {
				if pg := b.get(path); pg.status != http.StatusOK || strings.Contains(pg.body, w.keys["alice"]) {
					t.Errorf("GET %s: status %d, key on the page %v; want 200 without it", path, pg.status, strings.Contains(pg.body, w.keys["alice"]))
				}
			}
		})
	}

	b := w.browser(t)
	token := b.signIn(w.keys["alice"])
	out := b.post("/sign-out", url.Values{"csrf": {token}})
	if out.status != http.StatusSeeOther || out.header.Get("Location") != "/sign-in" {
		t.Fatalf("sign out: %d to %q, want 303 to /sign-in", out.status, out.header.Get("Location"))
	}
	if pg := b.get("/sandboxes"); pg.status != http.StatusSeeOther || pg.header.Get("Location") != "/sign-in?next=%2Fsandboxes" {
		t.Errorf("after sign out, GET /sandboxes: %d to %q; want 303 to the sign-in page", pg.status, pg.header.Get("Location"))
	}
}

// TestSignInRefuses: a wrong key, a sandbox's own key and a sign-in form
// not from the panel are refused, and nobody is signed in.
func TestSignInRefuses(t *testing.T) {
	w := newWorld(t)
	b := w.browser(t)
	form := b.get("/sign-in")
	if pg := b.post("/sign-in", url.Values{"csrf": {form.csrf(t)}, "key": {"berth_nope"}}); pg.status != http.StatusUnauthorized {
		t.Errorf("sign in with a wrong key: %d, want 401", pg.status)
	}
	if pg := b.post("/sign-in", url.Values{"csrf": {"forged"}, "key": {w.keys["alice"]}}); pg.status != http.StatusForbidden {
		t.Errorf("sign in with a forged form token: %d, want 403", pg.status)
	}
	fresh := w.browser(t) // no sign-in cookie at all
	if pg := fresh.post("/sign-in", url.Values{"csrf": {form.csrf(t)}, "key": {w.keys["alice"]}}); pg.status != http.StatusForbidden {
		t.Errorf("sign in without the form's cookie: %d, want 403", pg.status)
	}
	if pg := b.get("/quotas"); pg.status != http.StatusSeeOther {
		t.Errorf("after refused sign-ins, GET /quotas: %d, want 303 to sign in", pg.status)
	}
}

// TestFormsNeedTheirToken: a form without the session's token, or with
// another session's, is refused and nothing is done.
func TestFormsNeedTheirToken(t *testing.T) {
	w := newWorld(t)
	sb := w.create(t, "alice", "dev")
	alice, other := w.browser(t), w.browser(t)
	alice.signIn(w.keys["alice"])
	otherToken := other.signIn(w.keys["alice"]) // the same key, another sign-in
	for _, tt := range []struct {
		name string
		form url.Values
	}{
		{"no token", url.Values{}},
		{"another sign-in's token", url.Values{"csrf": {otherToken}}},
		{"a forged token", url.Values{"csrf": {"AAAA"}}},
	} {
		pg := alice.post("/sandboxes/"+string(sb.ID)+"/terminate", tt.form)
		if pg.status != http.StatusForbidden {
			t.Errorf("terminate with %s: status %d, want 403", tt.name, pg.status)
		}
	}
	got, err := w.sandboxes.Get(t.Context(), w.principal("alice"), string(sb.ID))
	if err != nil {
		t.Fatal(err)
	}
	if got.State == sandbox.StateTerminated {
		t.Errorf("a refused form terminated the sandbox")
	}
}

// TestPagesAnswerLikeTheAPI: a sandbox the caller may not see is not
// found, on its page and to every form, as in the API (SPEC S6: never
// forbidden); an administrator sees it.
func TestPagesAnswerLikeTheAPI(t *testing.T) {
	w := newWorld(t)
	sb := w.create(t, "alice", "dev")
	for _, tt := range []struct {
		user string
		want int
	}{{"bob", http.StatusNotFound}, {"sam", http.StatusNotFound}, {"ada", http.StatusOK}, {"alice", http.StatusOK}} {
		b := w.browser(t)
		token := b.signIn(w.keys[tt.user])
		for _, ref := range []string{string(sb.ID), "dev"} {
			if pg := b.get("/sandboxes/" + ref); pg.status != tt.want {
				t.Errorf("%s: GET /sandboxes/%s: %d, want %d", tt.user, ref, pg.status, tt.want)
			}
			req, _ := http.NewRequest("GET", w.url+"/sandbox/v1/sandboxes/"+ref, nil)
			req.Header.Set("Authorization", "Bearer "+w.keys[tt.user])
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tt.want {
				t.Errorf("%s: the API's GET /sandbox/v1/sandboxes/%s: %d, want %d like the panel", tt.user, ref, res.StatusCode, tt.want)
			}
		}
		if tt.want == http.StatusNotFound {
			for _, action := range []string{"suspend", "extend", "terminate"} {
				if pg := b.post("/sandboxes/"+string(sb.ID)+"/"+action, url.Values{"csrf": {token}}); pg.status != http.StatusNotFound {
					t.Errorf("%s: %s alice's sandbox: %d, want 404", tt.user, action, pg.status)
				}
			}
			if pg := b.get("/sandboxes/" + string(sb.ID) + "/log"); pg.status != http.StatusNotFound {
				t.Errorf("%s: alice's sandbox's log: %d, want 404", tt.user, pg.status)
			}
			if pg := b.get("/sandboxes"); strings.Contains(pg.body, string(sb.ID)) {
				t.Errorf("%s: the sandboxes screen lists alice's sandbox", tt.user)
			}
		}
	}
}

// TestGuardrailEditorKeepsWhatItDoesNotShow: the editor writes the
// guardrail whole (SPEC S7): allowed_repos, which it does not show, is
// written back as it is; a bad value is refused naming its field and
// nothing is written.
func TestGuardrailEditorKeepsWhatItDoesNotShow(t *testing.T) {
	w := newWorld(t)
	b := w.browser(t)
	token := b.signIn(w.keys["ada"])
	if pg := b.get("/quotas/edit"); pg.status != http.StatusOK || !strings.Contains(pg.body, `value="8"`) {
		t.Fatalf("GET /quotas/edit: %d, want 200 with the cpu ceiling 8\n%s", pg.status, pg.body)
	}
	pg := b.post("/quotas/edit", url.Values{"csrf": {token}, "max_sandboxes": {"5"}, "max_sandbox_memory": {"16Gi"},
		"max_sandbox_cpu": {"4"}, "max_sandbox_ttl": {"8h"}})
	if pg.status != http.StatusSeeOther {
		t.Fatalf("save quotas: %d, want 303\n%s", pg.status, pg.body)
	}
	want := guardrail.Guardrail{MaxSandboxes: ptr(5), MaxSandboxMemory: ptr(int64(16384)), MaxSandboxCPU: ptr(quantity.Millicores(4000)),
		MaxSandboxTTL: ptr(8 * time.Hour), AllowedRepos: []string{"acme"}}
	got, err := w.accounts.Guardrail(t.Context(), w.operator, "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("guardrail after the editor saved it (-want +got):\n%s", diff)
	}
	// Memory is shown as it was written, the way classes write it.
	if pg := b.get("/quotas/edit"); !strings.Contains(pg.body, `name="max_sandbox_memory" value="16Gi"`) {
		t.Errorf("GET /quotas/edit after saving 16Gi does not show 16Gi:\n%s", pg.body)
	}
	pg = b.post("/quotas/edit", url.Values{"csrf": {token}, "max_sandboxes": {"5"}, "max_sandbox_ttl": {"soon"}})
	if pg.status != http.StatusBadRequest || !strings.Contains(pg.body, "max_sandbox_ttl") || !strings.Contains(pg.body, `aria-invalid="true"`) {
		t.Errorf("save quotas with ttl soon: %d, want 400 naming max_sandbox_ttl and marking it\n%s", pg.status, pg.body)
	}
	if again, _ := w.accounts.Guardrail(t.Context(), w.operator, "acme", ""); !cmp.Equal(want, again) {
		t.Errorf("a refused save changed the guardrail: %v", again)
	}
	member := w.browser(t)
	mt := member.signIn(w.keys["alice"])
	if pg := member.post("/quotas/edit", url.Values{"csrf": {mt}, "max_sandboxes": {"99"}}); pg.status != http.StatusForbidden {
		t.Errorf("a member saves quotas: %d, want 403 as the API answers", pg.status)
	}
}

// TestClassEditorKeepsWhatItDoesNotShow: an edit goes through the same
// checks as `sandbox apply`, and the fields the form does not show (git,
// contract, setup_command) keep their values.
func TestClassEditorKeepsWhatItDoesNotShow(t *testing.T) {
	w := newWorld(t)
	b := w.browser(t)
	token := b.signIn(w.keys["ada"])
	edit := b.get("/classes/agent/edit")
	if edit.status != http.StatusOK || !strings.Contains(edit.body, "contract: kelos") {
		t.Fatalf("GET /classes/agent/edit: %d, want 200 saying the contract is kept\n%s", edit.status, edit.body)
	}
	form := url.Values{"csrf": {token}, "description": {"Agents, bigger"}, "image": {"localhost/berth-sandbox:latest"},
		"isolation": {"standard"}, "cpu": {"4"}, "memory": {"8Gi"}, "disk": {"none"}, "default_ttl": {"2h"}, "max_ttl": {"6h"},
		"session_idle": {"45m"}, "warm": {"0"}, "agent": {"1"}}
	if pg := b.post("/classes/agent/edit", form); pg.status != http.StatusSeeOther {
		t.Fatalf("save class: %d, want 303\n%s", pg.status, pg.body)
	}
	got := classSpec(t, w, "agent")
	want := class.Spec{Name: "agent", Description: "Agents, bigger", Image: "localhost/berth-sandbox:latest", Isolation: "standard",
		CPU: "4", Memory: "8Gi", Disk: "none", DefaultTTL: "2h", MaxTTL: "6h", SessionIdle: "45m", Purposes: []string{"agent"},
		Git: "gateway", Contract: "kelos", SetupCommand: []string{"make", "deps"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("class after the editor saved it (-want +got):\n%s", diff)
	}

	form.Set("max_ttl", "1h") // under the default lifetime: apply refuses it
	pg := b.post("/classes/agent/edit", form)
	if pg.status != http.StatusBadRequest || !strings.Contains(pg.body, "max_ttl") {
		t.Errorf("save class with max_ttl under default_ttl: %d, want 400 naming max_ttl\n%s", pg.status, pg.body)
	}
	form.Set("max_ttl", "6h")
	form.Set("session_idle", "7h") // past the longest lifetime
	pg = b.post("/classes/agent/edit", form)
	if pg.status != http.StatusBadRequest || !strings.Contains(pg.body, "session_idle: 7h is outside 1m to max_ttl 6h") ||
		!strings.Contains(pg.body, `value="7h"`) {
		t.Errorf("save class with session_idle past max_ttl: %d, want 400 naming session_idle and its bounds, with what was typed\n%s", pg.status, pg.body)
	}
	form.Set("session_idle", "45m")
	if pg := b.get("/classes"); !strings.Contains(pg.body, "a session waits at most 45m for a task") {
		t.Errorf("the classes screen does not show the agent class's session_idle\n%s", pg.body)
	}
	form.Set("image", "docker.io/evil/image")
	if pg := b.post("/classes/agent/edit", form); pg.status != http.StatusForbidden || !strings.Contains(pg.body, "an operator must set it") {
		t.Errorf("save class with an image the rule does not allow: %d, want 403 as apply answers\n%s", pg.status, pg.body)
	}
	if diff := cmp.Diff(want, classSpec(t, w, "agent")); diff != "" {
		t.Errorf("refused saves changed the class (-want +got):\n%s", diff)
	}

	member := w.browser(t)
	mt := member.signIn(w.keys["alice"])
	if pg := member.post("/classes/agent/delete", url.Values{"csrf": {mt}}); pg.status != http.StatusForbidden {
		t.Errorf("a member deletes a class: %d, want 403", pg.status)
	}
	if pg := b.post("/classes/agent/delete", url.Values{"csrf": {token}}); pg.status != http.StatusSeeOther {
		t.Errorf("the administrator deletes a class: %d, want 303", pg.status)
	}
	if pg := b.get("/classes"); strings.Contains(pg.body, "/classes/agent/edit") {
		t.Errorf("the deleted class is still listed")
	}
}

func classSpec(t *testing.T, w *world, name string) class.Spec {
	t.Helper()
	classes, _, err := w.classes.List(t.Context(), w.principal("ada"), "", paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(classes, func(c class.Status) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("no class %s", name)
	}
	return classes[i].Spec()
}

// TestClassPickerSaysWhyNot: the create form offers the classes the quota
// allows and says why it refuses the others; sent anyway, the refusal is
// the API's.
func TestClassPickerSaysWhyNot(t *testing.T) {
	w := newWorld(t)
	b := w.browser(t)
	token := b.signIn(w.keys["alice"])
	form := b.get("/sandboxes/new")
	for _, want := range []string{
		`value="standard" data-purposes="engineer agent" checked`,
		`value="large" data-purposes="engineer agent" disabled aria-describedby="why-large"`,
		"You cannot start this class now: 16 cores is more than the guardrail&#39;s max_sandbox_cpu of 8",
	} {
		if !strings.Contains(form.body, want) {
			t.Errorf("the create form lacks %q", want)
		}
	}
	pg := b.post("/sandboxes/new", url.Values{"csrf": {token}, "name": {"big"}, "purpose": {"engineer"}, "class": {"large"}, "ssh_keys": {sshKey}})
	if pg.status != http.StatusForbidden || !strings.Contains(pg.body, "max_sandbox_cpu") || !strings.Contains(pg.body, `value="big"`) {
		t.Errorf("create a large sandbox: %d, want 403 saying why, the form kept\n%s", pg.status, pg.body)
	}
	pg = b.post("/sandboxes/new", url.Values{"csrf": {token}, "name": {"dev"}, "purpose": {"engineer"}, "class": {"standard"}, "ssh_keys": {sshKey + "\n"}})
	if pg.status != http.StatusSeeOther || !strings.HasPrefix(pg.header.Get("Location"), "/sandboxes/sbx_") {
		t.Fatalf("create dev: %d to %q, want 303 to its page\n%s", pg.status, pg.header.Get("Location"), pg.body)
	}
	if again := b.get("/sandboxes/new"); !strings.Contains(again.body, "ada@laptop") {
		t.Errorf("the create form does not offer the last sandbox's ssh key")
	}
}

// TestNoDriverHidesSandboxes: a deployment that runs no sandboxes shows no
// sandboxes screen at all.
func TestNoDriverHidesSandboxes(t *testing.T) {
	w := newWorld(t, noDriver)
	b := w.browser(t)
	b.signIn(w.keys["ada"])
	if pg := b.get("/"); pg.status != http.StatusSeeOther || pg.header.Get("Location") != "/quotas" {
		t.Errorf("GET /: %d to %q, want 303 to /quotas", pg.status, pg.header.Get("Location"))
	}
	if pg := b.get("/sandboxes"); pg.status != http.StatusNotFound {
		t.Errorf("GET /sandboxes: %d, want 404", pg.status)
	}
	if pg := b.get("/quotas"); pg.status != http.StatusOK || strings.Contains(pg.body, `href="/sandboxes"`) {
		t.Errorf("GET /quotas: %d, links to sandboxes %v; want 200 without", pg.status, strings.Contains(pg.body, `href="/sandboxes"`))
	}
}

// TestAPIPathsStayJSON: the panel takes only paths outside the API's, so
// an unknown API path still answers in JSON, and the panel's headers keep
// it out of frames and its pages to its own scripts.
func TestAPIPathsStayJSON(t *testing.T) {
	w := newWorld(t)
	res, err := http.Get(w.url + "/api/v1/nope")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct{ Code string }
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != http.StatusNotFound || body.Code != "not_found" {
		t.Errorf("GET /api/v1/nope: %d %q (%v), want 404 not_found in JSON", res.StatusCode, body.Code, err)
	}
	pg := w.browser(t).get("/sign-in")
	if csp := pg.header.Get("Content-Security-Policy"); pg.status != http.StatusOK || !strings.Contains(csp, "script-src 'self'") ||
		!strings.Contains(csp, "frame-ancestors 'none'") || !strings.HasPrefix(pg.header.Get("Content-Type"), "text/html") {
		t.Errorf("GET /sign-in: %d, %q, CSP %q", pg.status, pg.header.Get("Content-Type"), csp)
	}
}

// TestAgentSandboxShowsItsRun: an agent sandbox's page shows its run's
// telemetry (tokens, cost, branch) and the end of its log, and no shell
// command; an engineer sandbox's shows the one-line ssh command to its
// owner and not to an administrator, who may not get inside (SPEC S6).
func TestAgentSandboxShowsItsRun(t *testing.T) {
	w := newWorld(t)
	sb := w.agentRun(t, "alice", "fix")
	if sb.State != sandbox.StateTerminated {
		t.Fatalf("agent sandbox ended %s (%s), want terminated", sb.State, sb.Reason)
	}
	b := w.browser(t)
	b.signIn(w.keys["alice"])
	pg := b.get("/sandboxes/" + string(sb.ID))
	for _, want := range []string{"claude-code", "claude-sonnet-4-5", "berth/fix", "out", "(native, cost basis list)", "Done: wrote f.txt and committed it."} {
		if !strings.Contains(pg.body, want) {
			t.Errorf("the agent sandbox's page lacks %q", want)
		}
	}
	// S8: the task's cost includes the machine it ran on.
	if !regexp.MustCompile(`<dt>Machine</dt><dd>[^<]+ of a [\d.]+-core machine \([\d,]+ core-seconds\)</dd>`).MatchString(pg.body) {
		t.Errorf("the agent sandbox's page does not say what machine time the run took:\n%s", pg.body)
	}
	if strings.Contains(pg.body, "berth sandbox ssh") {
		t.Errorf("the agent sandbox's page offers a shell")
	}
	log := b.get("/sandboxes/" + string(sb.ID) + "/log")
	if log.status != http.StatusOK || !strings.HasPrefix(log.header.Get("Content-Type"), "text/plain") || !strings.Contains(log.body, `"type":"result"`) {
		t.Errorf("the whole log: %d %q, want the stream as text", log.status, log.header.Get("Content-Type"))
	}

	dev := w.create(t, "alice", "dev")
	if pg := b.get("/sandboxes/" + string(dev.ID)); !strings.Contains(pg.body, "berth sandbox ssh dev") {
		t.Errorf("the owner's engineer sandbox page lacks the ssh command")
	}
	admin := w.browser(t)
	admin.signIn(w.keys["ada"])
	if pg := admin.get("/sandboxes/" + string(dev.ID)); pg.status != http.StatusOK || strings.Contains(pg.body, "berth sandbox ssh") {
		t.Errorf("an administrator's view of alice's sandbox: %d, offers a shell %v; want 200 without", pg.status, strings.Contains(pg.body, "berth sandbox ssh"))
	}
}

// TestQuotasSayWhatIsLeft: the quotas screen counts the live sandboxes
// against max_sandboxes, the organisation's and the project's, the
// smaller binding.
func TestQuotasSayWhatIsLeft(t *testing.T) {
	w := newWorld(t)
	w.create(t, "alice", "one")
	w.create(t, "bob", "two")
	if err := w.accounts.SetGuardrail(t.Context(), w.operator, "acme", "", guardrail.Guardrail{MaxSandboxes: ptr(5), AllowedRepos: []string{"acme"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.accounts.SetGuardrail(t.Context(), w.operator, "acme", "default", guardrail.Guardrail{MaxSandboxes: ptr(3)}); err != nil {
		t.Fatal(err)
	}
	b := w.browser(t)
	b.signIn(w.keys["alice"]) // a member reads them too
	pg := b.get("/quotas")
	org, project, ok := strings.Cut(pg.body, "Project default")
	if pg.status != http.StatusOK || !ok {
		t.Fatalf("GET /quotas: %d, want 200 with the default project\n%s", pg.status, pg.body)
	}
	if !strings.Contains(org, "2 live; <strong>3 more</strong>") || !strings.Contains(project, "2 live; <strong>1 more</strong>") {
		t.Errorf("quotas: want 3 more in the organisation (5 - 2) and 1 in the project (3 - 2)\n%s", pg.body)
	}
	if strings.Contains(pg.body, "/quotas/edit") {
		t.Errorf("a member is offered the guardrail editor")
	}
}

// TestUsageScreen: an administrator reads the report with a chart of
// each day of the window; a member is refused as by the API.
func TestUsageScreen(t *testing.T) {
	w := newWorld(t)
	w.running(t, w.create(t, "alice", "one").ID)
	b := w.browser(t)
	b.signIn(w.keys["ada"])
	pg := b.get("/usage?by=user&since=7d")
	if pg.status != http.StatusOK || !strings.Contains(pg.body, `<th scope="row" data-label="User">alice</th>`) {
		t.Fatalf("GET /usage by user: %d, want 200 with a row for alice\n%s", pg.status, pg.body)
	}
	// 7 days back from now: 8 UTC days, a bar each, in each of two charts.
	if got := strings.Count(pg.body, `<rect class="bar"`); got != 16 {
		t.Errorf("the charts have %d bars, want 8 days by 2 charts", got)
	}
	if pg := b.get("/usage?since=1000d"); pg.status != http.StatusBadRequest || !strings.Contains(pg.body, "retention") {
		t.Errorf("usage past the retention: %d, want 400 naming it", pg.status)
	}
	member := w.browser(t)
	member.signIn(w.keys["alice"])
	if pg := member.get("/usage"); pg.status != http.StatusForbidden {
		t.Errorf("a member reads usage: %d, want 403 as the API answers", pg.status)
	}
}

// TestTerminatedRunSaysWhoEndedIt (issue 14, item 9): the run view of a
// run terminated under its agent names who ended it and shows no exit
// code; a run that exited shows its code.
func TestTerminatedRunSaysWhoEndedIt(t *testing.T) {
	w := newWorld(t)
	done := w.agentRun(t, "alice", "done")
	started, release := make(chan struct{}), make(chan struct{})
	w.drv.SetAgent(func(sandbox.Spec) ([]string, int) {
		close(started)
		<-release
		return nil, 143
	})
	sb, err := w.sandboxes.Create(t.Context(), w.principal("alice"), sandbox.CreateRequest{Name: "stop", Purpose: "agent", Class: "standard",
		Repo: "acme/app", Branch: "main", Task: "never mind", Runner: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if _, err := w.sandboxes.Terminate(t.Context(), w.principal("alice"), "stop"); err != nil {
		t.Fatal(err)
	}
	close(release)
	w.wait(t, sb.ID, func(sb sandbox.Sandbox) bool { return !sb.Live() })
	b := w.browser(t)
	b.signIn(w.keys["alice"])
	pg := b.get("/sandboxes/" + string(sb.ID))
	if !strings.Contains(pg.body, "failed, terminated by alice before the agent exited") || strings.Contains(pg.body, "exit code") {
		t.Errorf("the terminated run's page does not say who ended it, or gives it an exit code:\n%s", pg.body)
	}
	if pg := b.get("/sandboxes/" + string(done.ID)); !strings.Contains(pg.body, "succeeded, exit code 0") {
		t.Errorf("the finished run's page lacks its exit code")
	}
}

package inference_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/fakeclock"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/runner"
	"berth.dev/berth/internal/store"
)

const file = `
providers:
  - {name: s, kind: scripted}
  - {name: oai, kind: openai, url: "http://127.0.0.1:1/v1", credential_env: K}
models:
  - {id: cheap, provider: s, price: {input: 1, output: 2}}
  - {id: gpt-5, provider: oai}
  - {id: auto, router: [gpt-5, cheap]}
`

// env is a service on a real store with one organisation, its default
// project, an administrator and a member.
type env struct {
	svc         *inference.Service
	admin, user account.Principal
	clock       *fakeclock.Clock
	st          *store.Store
	opts        inference.Options // what svc was made with
}

func newEnv(t *testing.T) env { return newEnvOf(t, file) }

// newEnvOf is an env whose inference file is file.
func newEnvOf(t *testing.T, file string) env { return newEnvAt(t, t.TempDir()+"/berth.db", file) }

// newEnvAt is an env on the database url.
func newEnvAt(t *testing.T, url, file string) env {
	t.Helper()
	st, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := fakeclock.New(time.Date(2026, 11, 30, 23, 59, 0, 0, time.UTC))
	accounts := account.NewService(st, st, clock.Now, nil, st, nil)
	_, _, op, opKey, err := accounts.Bootstrap(t.Context(), "acme", "default", "ops")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := accounts.Authenticate(t.Context(), opKey.Secret.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	u, err := accounts.CreateUser(t.Context(), admin, "", "bob", "", account.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := inference.ParseConfig(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	cat, err := inference.NewCatalog(cfg, func(string) string { return "sk-test" })
	if err != nil {
		t.Fatal(err)
	}
	_ = op
	opts := inference.Options{Catalog: cat, Store: st, Accounts: accounts, Audit: st, PublicURL: "http://gw", Now: clock.Now}
	return env{svc: inference.NewService(opts), admin: admin, user: account.Principal{User: u, KeyID: "key_bob"}, clock: clock, st: st, opts: opts}
}

func (e env) set(t *testing.T, project string, s inference.Settings) {
	t.Helper()
	if _, err := e.svc.SetSettings(t.Context(), e.admin, "", project, s); err != nil {
		t.Fatal(err)
	}
}

func admit(t *testing.T, e env, p account.Principal, d inference.Dialect, body string) (*inference.Ticket, error) {
	t.Helper()
	c, err := inference.ReadCall(d, "cheap", false, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return e.svc.Admit(t.Context(), p, c, []byte(body), "")
}

// TestSystemPromptInEachDialect checks the body sent upstream, byte for
// byte where the dialect allows: the prompts go first, the request's own
// stays, a streamed Chat Completion asks for its usage, and a request
// needing no change goes as it came.
func TestSystemPromptInEachDialect(t *testing.T) {
	e := newEnv(t)
	e.set(t, "", inference.Settings{SystemPrompt: "A"})
	e.set(t, "default", inference.Settings{SystemPrompt: "B <&>"})
	cases := []struct {
		d          inference.Dialect
		body, want string
	}{
		{inference.Anthropic, `{"model":"cheap","messages":[]}`, `{"messages":[],"model":"cheap","system":"A\n\nB <&>"}`},
		{inference.Anthropic, `{"model":"cheap","system":[{"type":"text","text":"C","cache_control":{"type":"ephemeral"}}]}`,
			`{"model":"cheap","system":[{"text":"A\n\nB <&>","type":"text"},{"type":"text","text":"C","cache_control":{"type":"ephemeral"}}]}`},
		{inference.OpenAIChat, `{"model":"cheap","stream":true,"messages":[{"role":"developer","content":"C"}]}`,
			`{"messages":[{"content":"A\n\nB <&>","role":"developer"},{"role":"developer","content":"C"}],"model":"cheap","stream":true,"stream_options":{"include_usage":true}}`},
		{inference.OpenAIResponses, `{"model":"cheap","instructions":null}`, `{"instructions":"A\n\nB <&>","model":"cheap"}`},
		{inference.Gemini, `{"system_instruction":{"parts":[{"text":"C"}]}}`, `{"system_instruction":{"parts":[{"text":"A\n\nB <&>"},{"text":"C"}]}}`},
	}
	for _, c := range cases {
		tk, err := admit(t, e, e.user, c.d, c.body)
		if err != nil {
			t.Fatalf("%s: %v", c.d, err)
		}
		if got := string(tk.Body); got != c.want {
			t.Errorf("%s %s\n got %s\nwant %s", c.d, c.body, got, c.want)
		}
	}
	e.set(t, "", inference.Settings{})
	e.set(t, "default", inference.Settings{})
	body := `{"model":"cheap", "messages":[] }`
	if tk, err := admit(t, e, e.user, inference.OpenAIChat, body); err != nil || string(tk.Body) != body {
		t.Errorf("an unchanged request was rewritten: %s (%v)", tk.Body, err)
	}
}

// TestReservationsNeverOvershoot admits concurrently against a budget
// that fits exactly five worst cases: five are admitted, the rest refused;
// settling at the real cost frees room again.
func TestReservationsNeverOvershoot(t *testing.T) {
	e := newEnv(t)
	body := `{"model":"cheap","max_tokens":1000,"messages":[]}`
	// The worst case: a token a byte of the body at $1/M plus 1000 output
	// at $2/M.
	worst := (float64(len(body))*1 + 1000*2) / 1e6
	budget := 5*worst + worst/2
	e.set(t, "default", inference.Settings{BudgetUSD: &budget})
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		tickets []*inference.Ticket
		refused int
	)
	for range 40 {
		wg.Go(func() {
			tk, err := admit(t, e, e.user, inference.Anthropic, body)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, fault.Budget):
				refused++
			case err != nil:
				t.Error(err)
			default:
				tickets = append(tickets, tk)
			}
		})
	}
	wg.Wait()
	if len(tickets) != 5 || refused != 35 {
		t.Fatalf("admitted %d, refused %d; want 5 and 35", len(tickets), refused)
	}
	st, _ := e.svc.Settings(t.Context(), e.admin, "", "default")
	if st.ReservedUSD < 5*worst*0.9999 || st.ReservedUSD > 5*worst*1.0001 {
		t.Errorf("reserved $%f, want 5 × $%f", st.ReservedUSD, worst)
	}
	m := inference.NewMeter(inference.Anthropic, "application/json")
	_, _ = m.Write([]byte(`{"usage":{"input_tokens":1000,"output_tokens":100}}`))
	for _, tk := range tickets {
		rec, err := e.svc.Settle(t.Context(), tk, 200, m)
		if err != nil || rec.CostUSD != 0.0012 || !rec.Metered {
			t.Errorf("settle: %+v, %v", rec, err)
		}
	}
	st, _ = e.svc.Settings(t.Context(), e.admin, "", "default")
	if st.ReservedUSD != 0 || st.SpentUSD < 0.0059999 || st.SpentUSD > 0.0060001 {
		t.Errorf("after settling: spent $%f reserved $%f; want $0.006 and nothing", st.SpentUSD, st.ReservedUSD)
	}
	// The month turns: the spend starts again from what the store holds for it.
	e.clock.Advance(2 * time.Minute)
	if st, _ = e.svc.Settings(t.Context(), e.admin, "", "default"); st.SpentUSD != 0 || st.Month.Month() != time.December {
		t.Errorf("in the new month: %+v", st)
	}
}

// TestRateLimitRefillsWithTime: 3/m lets three through, refuses the
// fourth with the wait, and lets one more through 20s later.
func TestRateLimitRefillsWithTime(t *testing.T) {
	e := newEnv(t)
	r, err := inference.ParseRate("3/m")
	if err != nil {
		t.Fatal(err)
	}
	e.set(t, "default", inference.Settings{Rate: &r})
	body := `{"model":"cheap","messages":[]}`
	for i := range 3 {
		if _, err := admit(t, e, e.user, inference.OpenAIChat, body); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	_, err = admit(t, e, e.user, inference.OpenAIChat, body)
	var rl *fault.Error
	if !errors.As(err, &rl) || rl.RetryAfter != 20*time.Second || !errors.Is(err, fault.RateLimited) {
		t.Fatalf("fourth: %v, want a rate limit with 20s to wait", err)
	}
	e.clock.Advance(20 * time.Second)
	if _, err := admit(t, e, e.user, inference.OpenAIChat, body); err != nil {
		t.Errorf("after 20s: %v", err)
	}
}

// TestPolicyNarrowsAndRoutes: the organisation's list narrowed by the
// project's decides what is reachable, routers last and only with a
// reachable target; the router goes to its first reachable target.
func TestPolicyNarrowsAndRoutes(t *testing.T) {
	e := newEnv(t)
	models := func() []string { return modelIDs(t, e, e.user) }
	if got := models(); !cmp.Equal(got, []string{"cheap", "gpt-5", "auto"}) {
		t.Errorf("nothing set: %v", got)
	}
	e.set(t, "", inference.Settings{Models: []string{"cheap", "auto"}})
	if got := models(); !cmp.Equal(got, []string{"cheap", "auto"}) {
		t.Errorf("the organisation's list: %v", got)
	}
	tk, err := e.svc.Admit(t.Context(), e.user, mustCall(t, inference.OpenAIChat, `{"model":"auto"}`), []byte(`{"model":"auto"}`), "")
	if err != nil || tk.Model.ID != "cheap" || string(tk.Body) != `{"model":"cheap"}` {
		t.Errorf("auto with gpt-5 out of reach: %v, %v", tk, err)
	}
	e.set(t, "default", inference.Settings{Models: []string{"auto"}})
	if got := models(); got != nil {
		t.Errorf("a router whose targets are all out of reach is listed: %v", got)
	}
	e.set(t, "default", inference.Settings{Models: []string{}})
	_, err = e.svc.Admit(t.Context(), e.user, mustCall(t, inference.Anthropic, `{"model":"cheap"}`), []byte(`{"model":"cheap"}`), "")
	if !errors.Is(err, fault.Forbidden) || !strings.Contains(err.Error(), "may reach: none") {
		t.Errorf("an empty project list: %v", err)
	}
	if _, err := e.svc.SetSettings(t.Context(), e.user, "", "default", inference.Settings{}); !errors.Is(err, fault.Forbidden) {
		t.Errorf("a member sets settings: %v", err)
	}
}

// modelIDs are the models p may reach, by id.
func modelIDs(t *testing.T, e env, p account.Principal) []string {
	t.Helper()
	ms, err := e.svc.Models(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func mustCall(t *testing.T, d inference.Dialect, body string) inference.Call {
	t.Helper()
	c, err := inference.ReadCall(d, "", false, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSettleCharges: errors and counts cost nothing; an answer without
// usage costs its worst case.
func TestSettleCharges(t *testing.T) {
	e := newEnv(t)
	body := `{"model":"cheap","max_tokens":10}`
	worst := (float64(len(body))*1 + 10*2) / 1e6
	for _, c := range []struct {
		status  int
		meter   *inference.Meter
		cost    float64
		metered bool
	}{
		{500, inference.NewMeter(inference.Anthropic, "application/json"), 0, true},
		{200, inference.NewMeter(inference.Anthropic, "text/event-stream"), worst, false},
		{0, nil, 0, true},
	} {
		tk, err := admit(t, e, e.user, inference.Anthropic, body)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := e.svc.Settle(t.Context(), tk, c.status, c.meter)
		if err != nil || rec.CostUSD != c.cost || rec.Metered != c.metered || rec.Usage != (runner.Usage{}) {
			t.Errorf("status %d: %+v, %v; want cost %v metered %v", c.status, rec, err, c.cost, c.metered)
		}
	}
}

// TestUserKeyFollowsTheirProject: a person's own key calls models as the
// project an administrator set for them (its settings, its budget), not
// the organisation's oldest; without one, the oldest.
func TestUserKeyFollowsTheirProject(t *testing.T) {
	e := newEnv(t)
	accounts := e.opts.Accounts.(*account.Service)
	if _, err := accounts.CreateProject(t.Context(), e.admin, "", "ml"); err != nil {
		t.Fatal(err)
	}
	e.set(t, "default", inference.Settings{Models: []string{"cheap"}})
	e.set(t, "ml", inference.Settings{Models: []string{"gpt-5"}})
	models := func(p account.Principal) []string { return modelIDs(t, e, p) }
	if got := models(e.user); !cmp.Equal(got, []string{"cheap"}) {
		t.Errorf("no project set: %v, want the default project's", got)
	}
	u, _, err := accounts.SetProject(t.Context(), e.admin, "", e.user.User.Name, "ml")
	if err != nil {
		t.Fatal(err)
	}
	if got := models(account.Principal{User: u, KeyID: e.user.KeyID}); !cmp.Equal(got, []string{"gpt-5"}) {
		t.Errorf("project ml set: %v, want ml's", got)
	}
	if _, _, err := accounts.SetProject(t.Context(), e.user, "", e.user.User.Name, "default"); !errors.Is(err, fault.Forbidden) {
		t.Errorf("a member sets their own project: %v, want forbidden", err)
	}
}

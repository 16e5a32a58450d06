package gateway_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/runner"
)

// metered is what the scripted model server reports for one call, as the
// gateway must normalise it (modelserver.DefaultUsage): Anthropic counts
// input without the cache and writes 5 to it; OpenAI and Gemini count a
// prompt of 150 of which 30 cached; Responses says 3 of 17 were reasoning.
var metered = map[inference.Dialect]runner.Usage{
	inference.Anthropic:       {Input: 120, CacheRead: 30, CacheWrite: 5, Output: 17},
	inference.OpenAIChat:      {Input: 120, CacheRead: 30, Output: 17},
	inference.OpenAIResponses: {Input: 120, CacheRead: 30, Output: 17, Reasoning: 3},
	inference.Gemini:          {Input: 120, CacheRead: 30, Output: 17},
}

var dialects = []inference.Dialect{inference.Anthropic, inference.OpenAIChat, inference.OpenAIResponses, inference.Gemini}

// vendorModel is the stand-in vendor's model that speaks d.
func vendorModel(d inference.Dialect) (inference.Kind, string) {
	switch d {
	case inference.Anthropic:
		return inference.KindAnthropic, claudeModel
	case inference.Gemini:
		return inference.KindGemini, geminiModel
	}
	return inference.KindOpenAI, gptModel
}

// TestModelRoutesMeterEveryDialect sends every dialect, streamed and not,
// with a sandbox's key in that vendor's own header, to the scripted
// provider and to a stand-in of the real vendor that checks its own auth
// header: the answer arrives, the session's metered tokens grow by exactly
// what the model server reported, and the cost is those tokens at the
// model's price.
func TestModelRoutesMeterEveryDialect(t *testing.T) {
	m := newModelWorld(t)
	sb, key := m.agentKey(t, "metered", "")
	prices := m.inference.Catalog().Prices()
	for _, via := range []string{"scripted", "vendor"} {
		for _, d := range dialects {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/stream=%v", via, d, stream), func(t *testing.T) {
					kind, model := vendorModel(d)
					if via == "scripted" {
						kind, model = inference.KindScripted, scriptedModel
					}
					before, err := m.inference.Usage(t.Context(), sb)
					if err != nil {
						t.Fatal(err)
					}
					resp := m.call(t, d, model, stream, key, sb, nil)
					body := answer(t, resp)
					if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Hello from the mock model.") {
						t.Fatalf("status %d, body %.300s", resp.StatusCode, body)
					}
					if ct := resp.Header.Get("Content-Type"); stream != strings.HasPrefix(ct, "text/event-stream") {
						t.Errorf("Content-Type %q for stream=%v", ct, stream)
					}
					after, err := m.inference.Usage(t.Context(), sb)
					if err != nil {
						t.Fatal(err)
					}
					got := runner.Usage{Input: after.Usage.Input - before.Usage.Input, CacheRead: after.Usage.CacheRead - before.Usage.CacheRead,
						CacheWrite: after.Usage.CacheWrite - before.Usage.CacheWrite, Output: after.Usage.Output - before.Usage.Output,
						Reasoning: after.Usage.Reasoning - before.Usage.Reasoning}
					if diff := cmp.Diff(metered[d], got); diff != "" || after.Requests != before.Requests+1 {
						t.Errorf("metered tokens (-want +got):\n%s requests %d → %d", diff, before.Requests, after.Requests)
					}
					want, _ := prices.Cost(model, metered[d])
					if cost := after.CostUSD - before.CostUSD; cost < want*0.999999 || cost > want*1.000001 || want == 0 {
						t.Errorf("cost $%.9f, want $%.9f", cost, want)
					}
					got1 := m.vendors[kind].last(t)
					if via == "vendor" && d != inference.OpenAIChat && d != inference.OpenAIResponses &&
						!strings.Contains(got1.path+string(got1.body), "upstream-1") {
						t.Errorf("the vendor was not asked for its own model name: %s %.200s", got1.path, got1.body)
					}
				})
			}
		}
	}
	u, err := m.inference.Usage(t.Context(), sb)
	if err != nil || u.Requests != 16 || u.Unmetered != 0 {
		t.Errorf("session usage %+v, %v; want 16 metered requests", u, err)
	}
}

// TestModelStreamArrivesInPieces holds each vendor's stream after its
// first event: the client must already have that event, so the gateway
// passes events on as they come instead of buffering the answer.
func TestModelStreamArrivesInPieces(t *testing.T) {
	m := newModelWorld(t)
	sb, key := m.agentKey(t, "pieces", "")
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			kind, model := vendorModel(d)
			release := m.vendors[kind].hold()
			defer release()
			resp := m.call(t, d, model, true, key, sb, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			r := bufio.NewReader(resp.Body)
			first := make(chan string, 1)
			go func() {
				var ev strings.Builder
				for {
					line, err := r.ReadString('\n')
					ev.WriteString(line)
					if err != nil || line == "\n" {
						first <- ev.String()
						return
					}
				}
			}()
			select {
			case ev := <-first:
				if !strings.Contains(ev, "data:") {
					t.Fatalf("first event %q", ev)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no event reached the client while the upstream was still answering: the gateway buffers")
			}
			release()
			if rest, err := io.ReadAll(r); err != nil {
				t.Fatalf("the rest of the stream: %v (%q)", err, rest)
			}
		})
	}
	if u, _ := m.inference.Usage(t.Context(), sb); u.Requests != 4 || u.Usage.Output != 4*17 {
		t.Errorf("after the held streams the session has %+v, want 4 requests of 17 output tokens", u)
	}
}

// setInference writes a scope's settings as the administrator.
func (m *modelWorld) setInference(t testing.TB, project string, s api.InferenceSettings) api.InferenceStatus {
	t.Helper()
	st, err := m.admin.SetInference(t.Context(), "acme", project, s)
	if err != nil {
		t.Fatalf("set inference of %q: %v", project, err)
	}
	return st
}

// errorBody decodes a refusal in any dialect's shape into its message and
// the dialect's type or status word.
func errorBody(t testing.TB, d inference.Dialect, body string) (msg, kind string) {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Code    any    `json:"code"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("%s error body %q: %v", d, body, err)
	}
	switch d {
	case inference.Anthropic:
		if e.Type != "error" {
			t.Errorf("anthropic error body %s lacks type error", body)
		}
		return e.Error.Message, e.Error.Type
	case inference.Gemini:
		return e.Error.Message, e.Error.Status
	}
	return e.Error.Message, e.Error.Type
}

// TestModelAllowList: the project's list narrows the organisation's; a
// model off it is refused with the list of what the key may reach, in the
// caller's dialect; a router goes to its first reachable model.
func TestModelAllowList(t *testing.T) {
	m := newModelWorld(t)
	m.setInference(t, "", api.InferenceSettings{Models: []string{scriptedModel, gptModel, claudeModel, "auto"}})
	st := m.setInference(t, "default", api.InferenceSettings{Models: []string{gptModel, geminiModel, "auto"}})
	if want := []string{gptModel, "auto"}; !cmp.Equal(st.Reachable, want) {
		t.Errorf("reachable %v, want %v: the organisation's list narrowed by the project's", st.Reachable, want)
	}
	sb, key := m.agentKey(t, "allow", "")
	cases := []struct {
		d          inference.Dialect
		model      string
		status     int
		kind, word string
	}{
		{inference.Anthropic, claudeModel, 403, "permission_error", "not allowed"},
		{inference.OpenAIChat, scriptedModel, 403, "forbidden", "not allowed"},
		{inference.Gemini, geminiModel, 403, "PERMISSION_DENIED", "not allowed"},
		{inference.OpenAIResponses, "no-such-model", 404, "not_found", "not served"},
	}
	for _, c := range cases {
		resp := m.call(t, c.d, c.model, false, key, sb, nil)
		msg, kind := errorBody(t, c.d, answer(t, resp))
		if resp.StatusCode != c.status || kind != c.kind || !strings.Contains(msg, c.word) || !strings.Contains(msg, "may reach: gpt-test, auto") {
			t.Errorf("%s %s: %d %s %q; want %d %s naming the models the key may reach", c.d, c.model, resp.StatusCode, kind, msg, c.status, c.kind)
		}
	}
	if resp := m.call(t, inference.OpenAIChat, gptModel, false, key, sb, nil); resp.StatusCode != 200 {
		t.Errorf("an allowed model: %d", resp.StatusCode)
	}
	// auto routes to claude-test first, which the project leaves out.
	resp := m.call(t, inference.OpenAIChat, "auto", false, key, sb, nil)
	if body := answer(t, resp); resp.StatusCode != 200 || !strings.Contains(body, "Hello") {
		t.Fatalf("the router: %d %s", resp.StatusCode, body)
	}
	if u, _ := m.inference.Usage(t.Context(), sb); !cmp.Equal(u.Models, []string{gptModel}) {
		t.Errorf("the session's models %v, want the router's target gpt-test only", u.Models)
	}
	models, err := client.New(m.url, key, nil).Models(t.Context())
	if err != nil || len(models) != 2 || models[0].ID != gptModel || models[1].ID != "auto" {
		t.Errorf("berth model list for the sandbox's key: %+v, %v", models, err)
	}
}

// TestModelBudgetReservations: fifty concurrent requests against a budget
// that fits three of them in flight: exactly three go upstream, the rest
// are refused with a budget error, and the budget is not exceeded.
func TestModelBudgetReservations(t *testing.T) {
	m := newModelWorld(t)
	sb, key := m.agentKey(t, "budget", "")
	v := m.vendors[inference.KindOpenAI]

	// One request held upstream shows what a request reserves.
	big := 1000.0
	m.setInference(t, "default", api.InferenceSettings{BudgetUSD: &big})
	release := v.hold()
	resp := m.call(t, inference.OpenAIChat, gptModel, true, key, sb, nil)
	var held api.InferenceStatus
	for deadline := time.Now().Add(10 * time.Second); held.ReservedUSD == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a held request reserves nothing")
		}
		held = must(m.admin.Inference(t.Context(), "acme", "default"))
	}
	release()
	answer(t, resp)
	reservation := held.ReservedUSD
	spent := must(m.admin.Inference(t.Context(), "acme", "default")).SpentUSD

	const n, fit = 50, 3
	budget := spent + fit*reservation + reservation/2
	m.setInference(t, "default", api.InferenceSettings{BudgetUSD: &budget})
	release = v.hold()
	defer release()
	codes := make(chan int, n)
	bodies := make(chan *http.Response, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp := m.call(t, inference.OpenAIChat, gptModel, true, key, sb, nil)
			codes <- resp.StatusCode
			bodies <- resp
		})
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	if count[200] != fit || count[402] != n-fit {
		t.Errorf("statuses %v; want %d×200 and %d×402", count, fit, n-fit)
	}
	release()
	close(bodies)
	for resp := range bodies {
		body := answer(t, resp)
		if resp.StatusCode == 402 {
			if msg, kind := errorBody(t, inference.OpenAIChat, body); kind != "budget_exceeded" || !strings.Contains(msg, "budget") {
				t.Errorf("refusal %s %q", kind, msg)
			}
		}
	}
	after := must(m.admin.Inference(t.Context(), "acme", "default"))
	if after.ReservedUSD != 0 || after.SpentUSD > budget || after.SpentUSD <= spent {
		t.Errorf("after: spent $%.6f, reserved $%.6f; budget $%.6f, spent before $%.6f", after.SpentUSD, after.ReservedUSD, budget, spent)
	}
}

// TestModelRateLimit: a project's rate limit answers 429 with Retry-After
// in the caller's dialect, and another project's keys are not limited.
func TestModelRateLimit(t *testing.T) {
	m := newModelWorld(t)
	if _, err := m.admin.CreateProject(t.Context(), "acme", "ml"); err != nil {
		t.Fatal(err)
	}
	rate := "2/m"
	m.setInference(t, "default", api.InferenceSettings{Rate: &rate})
	sb, key := m.agentKey(t, "limited", "")
	other, otherKey := m.agentKey(t, "free", "ml")
	for i := range 2 {
		if resp := m.call(t, inference.Anthropic, scriptedModel, false, key, sb, nil); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	resp := m.call(t, inference.Anthropic, scriptedModel, false, key, sb, nil)
	msg, kind := errorBody(t, inference.Anthropic, answer(t, resp))
	if resp.StatusCode != 429 || kind != "rate_limit_error" || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Retry-After") == "0" ||
		!strings.Contains(msg, "2/m") {
		t.Errorf("third request: %d %s %q Retry-After %q; want 429 rate_limit_error with Retry-After", resp.StatusCode, kind, msg, resp.Header.Get("Retry-After"))
	}
	for i := range 4 {
		if resp := m.call(t, inference.Anthropic, scriptedModel, false, otherKey, other, nil); resp.StatusCode != 200 {
			t.Errorf("project ml, request %d: %d; another project's limit leaked", i, resp.StatusCode)
		}
	}
}

// TestModelSystemPrompt: the organisation's and the project's prompts
// reach the upstream in each dialect's own place, before the request's
// own system prompt.
func TestModelSystemPrompt(t *testing.T) {
	m := newModelWorld(t)
	m.setInference(t, "", api.InferenceSettings{SystemPrompt: "ORG RULES"})
	m.setInference(t, "default", api.InferenceSettings{SystemPrompt: "PROJECT RULES"})
	sb, key := m.agentKey(t, "prompted", "")
	const both = "ORG RULES\n\nPROJECT RULES"
	type doc = map[string]any
	cases := []struct {
		d     inference.Dialect
		edit  func(doc)
		check func(b doc) bool
	}{
		{inference.Anthropic, nil, func(b doc) bool { return b["system"] == both }},
		{inference.Anthropic, func(b doc) { b["system"] = "CLIENT" }, func(b doc) bool { return b["system"] == both+"\n\nCLIENT" }},
		{inference.Anthropic, func(b doc) { b["system"] = []any{doc{"type": "text", "text": "CLIENT"}} }, func(b doc) bool {
			s, _ := b["system"].([]any)
			return len(s) == 2 && s[0].(doc)["text"] == both && s[1].(doc)["text"] == "CLIENT"
		}},
		{inference.OpenAIChat, nil, func(b doc) bool {
			msgs, _ := b["messages"].([]any)
			return len(msgs) == 2 && cmp.Equal(msgs[0], any(doc{"role": "system", "content": both})) && msgs[1].(doc)["role"] == "user"
		}},
		{inference.OpenAIResponses, func(b doc) { b["instructions"] = "CLIENT" }, func(b doc) bool { return b["instructions"] == both+"\n\nCLIENT" }},
		{inference.Gemini, func(b doc) { b["systemInstruction"] = doc{"parts": []any{doc{"text": "CLIENT"}}} }, func(b doc) bool {
			si, _ := b["systemInstruction"].(doc)
			parts, _ := si["parts"].([]any)
			return len(parts) == 2 && parts[0].(doc)["text"] == both && parts[1].(doc)["text"] == "CLIENT"
		}},
	}
	for i, c := range cases {
		for _, stream := range []bool{false, true} {
			resp := m.call(t, c.d, scriptedModel, stream, key, sb, c.edit)
			if answer(t, resp); resp.StatusCode != 200 {
				t.Fatalf("case %d: %d", i, resp.StatusCode)
			}
			var got doc
			if err := json.Unmarshal(m.vendors[inference.KindScripted].last(t).body, &got); err != nil {
				t.Fatal(err)
			}
			if !c.check(got) {
				t.Errorf("case %d (%s, stream=%v): the upstream received %v", i, c.d, stream, got)
			}
		}
	}
}

// TestModelSessions: usage is recorded under X-Berth-Session; a sandbox's
// key names only its own session, a user's key none of a sandbox's.
func TestModelSessions(t *testing.T) {
	m := newModelWorld(t)
	a, keyA := m.agentKey(t, "one", "")
	b, keyB := m.agentKey(t, "two", "")
	_, userKey := m.userKey(t, "acme", "dora", "member")
	for range 2 {
		answer(t, m.call(t, inference.OpenAIChat, scriptedModel, true, keyA, a, nil))
	}
	answer(t, m.call(t, inference.OpenAIChat, scriptedModel, true, keyB, b, nil))
	resp := m.call(t, inference.OpenAIChat, scriptedModel, true, keyB, a, nil)
	if msg, _ := errorBody(t, inference.OpenAIChat, answer(t, resp)); resp.StatusCode != 403 || !strings.Contains(msg, "own session") {
		t.Errorf("a sandbox naming another's session: %d %q", resp.StatusCode, msg)
	}
	// What an engineer sandbox's Pi sends: the name of its unset BERTH_SESSION.
	if resp := m.call(t, inference.OpenAIChat, scriptedModel, true, keyB, "BERTH_SESSION", nil); answer(t, resp) == "" || resp.StatusCode != 200 {
		t.Errorf("a sandbox's key with a value that is no session: %d, want it served and recorded under none", resp.StatusCode)
	}
	if resp := m.call(t, inference.OpenAIChat, scriptedModel, true, userKey, a, nil); resp.StatusCode != 403 {
		t.Errorf("a user's key naming a sandbox's session: %d", resp.StatusCode)
	}
	if resp := m.call(t, inference.Gemini, scriptedModel, false, userKey, "laptop-1", nil); answer(t, resp) == "" || resp.StatusCode != 200 {
		t.Errorf("a user's key with its own session: %d", resp.StatusCode)
	}
	for session, want := range map[string]int{a: 2, b: 1, "laptop-1": 1, "nobody": 0, "BERTH_SESSION": 0} {
		if u, err := m.inference.Usage(t.Context(), session); err != nil || u.Requests != want || u.Usage.Output != int64(17*want) {
			t.Errorf("session %s: %+v, %v; want %d requests", session, u, err, want)
		}
	}
}

// TestModelRevokedKey: a revoked user's key and an ended sandbox's key are
// refused, in the dialect's shape.
func TestModelRevokedKey(t *testing.T) {
	m := newModelWorld(t)
	sb, key := m.agentKey(t, "ending", "")
	dora, userKey := m.userKey(t, "acme", "dora", "member")
	for _, k := range []string{key, userKey} {
		if resp := m.call(t, inference.Anthropic, scriptedModel, false, k, "", nil); resp.StatusCode != 200 {
			t.Fatalf("before: %d", resp.StatusCode)
		}
	}
	keys, err := dora.Keys(t.Context(), "")
	if err != nil || len(keys) != 1 {
		t.Fatal(keys, err)
	}
	if err := dora.RevokeKey(t.Context(), keys[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.owner.Terminate(t.Context(), sb); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{key, userKey} {
		for _, d := range dialects {
			resp := m.call(t, d, scriptedModel, false, k, "", nil)
			if msg, _ := errorBody(t, d, answer(t, resp)); resp.StatusCode != 401 || !strings.Contains(msg, "revoked") {
				t.Errorf("%s with a revoked key: %d %q", d, resp.StatusCode, msg)
			}
		}
	}
}

// TestModelLimitsStayInTheirProject: a spent budget, a list and a prompt
// of one project touch neither another project nor another organisation.
func TestModelLimitsStayInTheirProject(t *testing.T) {
	m := newModelWorld(t)
	if _, err := m.admin.CreateProject(t.Context(), "acme", "ml"); err != nil {
		t.Fatal(err)
	}
	zero := 0.0
	m.setInference(t, "ml", api.InferenceSettings{BudgetUSD: &zero, Models: []string{gptModel}, SystemPrompt: "ML ONLY"})
	ml, mlKey := m.agentKey(t, "in-ml", "ml")
	def, defKey := m.agentKey(t, "in-default", "")
	_, foreignKey := m.userKey(t, "other", "olga", "member")

	resp := m.call(t, inference.OpenAIChat, gptModel, false, mlKey, ml, nil)
	if msg, kind := errorBody(t, inference.OpenAIChat, answer(t, resp)); resp.StatusCode != 402 || kind != "budget_exceeded" || !strings.Contains(msg, "project ml") {
		t.Errorf("project ml with a budget of 0: %d %s %q", resp.StatusCode, kind, msg)
	}
	for _, k := range []struct{ key, session string }{{defKey, def}, {foreignKey, ""}} {
		resp := m.call(t, inference.Anthropic, scriptedModel, false, k.key, k.session, nil)
		if answer(t, resp); resp.StatusCode != 200 {
			t.Errorf("another scope: %d", resp.StatusCode)
		}
		if body := string(m.vendors[inference.KindScripted].last(t).body); strings.Contains(body, "ML ONLY") {
			t.Errorf("project ml's prompt reached another scope's request: %s", body)
		}
	}
	if _, err := m.foreign.Inference(t.Context(), "acme", "ml"); err == nil {
		t.Error("a member of another organisation read project ml's settings")
	}
}

// TestInferenceSettingsAPI: administrators read and write settings through
// the client; members and sandbox keys may not; a model the gateway does
// not serve is refused; the change is audited without the prompt.
func TestInferenceSettingsAPI(t *testing.T) {
	m := newModelWorld(t)
	ctx := t.Context()
	_, key := m.agentKey(t, "settings", "")
	rate, budget := "60/m", 25.0
	want := api.InferenceSettings{Models: []string{gptModel}, BudgetUSD: &budget, Rate: &rate, SystemPrompt: "secret house rules"}
	for who, c := range map[string]*client.Client{"member": m.member, "sandbox key": client.New(m.url, key, nil)} {
		if _, err := c.SetInference(ctx, "acme", "default", want); !isCode(err, api.CodeForbidden) {
			t.Errorf("%s set inference: %v, want forbidden", who, err)
		}
	}
	if _, err := m.admin.SetInference(ctx, "acme", "default", api.InferenceSettings{Models: []string{"nope"}}); !isCode(err, api.CodeInvalid) {
		t.Errorf("an unknown model: %v, want invalid", err)
	}
	bad := "sixty"
	if _, err := m.admin.SetInference(ctx, "acme", "default", api.InferenceSettings{Rate: &bad}); !isCode(err, api.CodeInvalid) {
		t.Errorf("a bad rate: %v, want invalid", err)
	}
	got := m.setInference(t, "default", want)
	if diff := cmp.Diff(want, got.Settings); diff != "" || got.ProjectName != "default" || !cmp.Equal(got.Reachable, []string{gptModel}) {
		t.Errorf("settings (-want +got):\n%s %+v", diff, got)
	}
	events, err := m.admin.Audit(ctx, client.AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events {
		if e.Action == inference.AuditSet {
			found = true
			if strings.Contains(e.Detail, "house rules") || !strings.Contains(e.Detail, "$25.00") {
				t.Errorf("audit detail %q", e.Detail)
			}
		}
	}
	if !found {
		t.Error("no inference.set in the audit log")
	}
}

func isCode(err error, code string) bool {
	var e *api.Error
	return errors.As(err, &e) && e.Code == code
}

// TestModelUpstreamDown: a vendor that cannot be reached is 502 in the
// dialect's shape, and the request costs nothing.
func TestModelUpstreamDown(t *testing.T) {
	m := newModelWorld(t)
	sb, key := m.agentKey(t, "down", "")
	resp := m.call(t, inference.OpenAIChat, "down-model", true, key, sb, nil)
	if msg, kind := errorBody(t, inference.OpenAIChat, answer(t, resp)); resp.StatusCode != 502 || kind != "upstream" || !strings.Contains(msg, "down could not be reached") {
		t.Errorf("%d %s %q; want 502 upstream", resp.StatusCode, kind, msg)
	}
	if u, err := m.inference.Usage(t.Context(), sb); err != nil || u.Requests != 1 || u.CostUSD != 0 {
		t.Errorf("session %+v, %v; want one request at no cost", u, err)
	}
}

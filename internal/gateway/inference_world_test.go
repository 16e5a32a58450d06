package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/inference"
	"berth.dev/berth/internal/modelserver"
	"berth.dev/berth/internal/store"
)

// vendor stands in for a model vendor: the scripted model server standing
// in for that vendor alone (modelserver.AsVendor: its paths, its header,
// the fields its API requires; anything else refused as the vendor does).
// It fails the test on a request without the deployment's credential in
// that vendor's own header, or with a berth key anywhere, and records what
// it received.
type vendor struct {
	t    testing.TB
	kind inference.Kind
	cred string // the credential the gateway must send; "" for the scripted provider
	srv  *modelserver.Server

	mu    sync.Mutex
	got   []received
	gate  chan struct{} // when set, a streamed answer waits after its first event until it closes
	think time.Duration // when set, each answer starts this late, as a model's does
	keep  bool          // keep what each request was (off in benchmarks)
}

// received is one request as the vendor saw it.
type received struct {
	path   string
	header http.Header
	body   []byte
}

func newVendor(t testing.TB, kind inference.Kind, cred string) *vendor {
	var opts []modelserver.Option
	if v, ok := modelserver.ParseVendor(string(kind)); ok {
		opts = append(opts, modelserver.AsVendor(v, cred)) // the scripted provider serves everything
	}
	return &vendor{t: t, kind: kind, cred: cred, keep: true, srv: modelserver.New(modelserver.Script{Turns: []modelserver.Turn{{Text: modelserver.HelloText}}}, opts...)}
}

func (v *vendor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		v.t.Errorf("vendor %s: read: %v", v.kind, err)
	}
	var want string
	switch v.kind {
	case inference.KindAnthropic:
		want = r.Header.Get("X-Api-Key")
	case inference.KindOpenAI:
		want = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	case inference.KindGemini:
		want = r.Header.Get("X-Goog-Api-Key")
	}
	if want != v.cred {
		v.t.Errorf("vendor %s got credential %q in its header, want the deployment's %q", v.kind, want, v.cred)
	}
	for k, vs := range r.Header {
		for _, x := range vs {
			if strings.Contains(x, "berth_") {
				v.t.Errorf("vendor %s got a berth key in header %s", v.kind, k)
			}
		}
	}
	if r.URL.Query().Get("key") != "" || bytes.Contains(body, []byte("berth_")) {
		v.t.Errorf("vendor %s got a berth key in the query or body", v.kind)
	}
	v.mu.Lock()
	if v.keep {
		v.got = append(v.got, received{path: r.URL.Path, header: r.Header.Clone(), body: body})
	}
	gate, think := v.gate, v.think
	v.mu.Unlock()
	time.Sleep(think)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if gate != nil {
		w = &gatedWriter{ResponseWriter: w, gate: gate}
	}
	v.srv.Handler().ServeHTTP(w, r)
}

// last is the last request the vendor received.
func (v *vendor) last(t testing.TB) received {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.got) == 0 {
		t.Fatalf("vendor %s received nothing", v.kind)
	}
	return v.got[len(v.got)-1]
}

// hold makes streamed answers wait after their first event until release
// is called.
func (v *vendor) hold() (release func()) {
	gate := make(chan struct{})
	v.mu.Lock()
	v.gate = gate
	v.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			v.mu.Lock()
			v.gate = nil
			v.mu.Unlock()
			close(gate)
		})
	}
}

// gatedWriter holds the answer after its first flush until gate closes:
// the upstream has sent one event and has not finished.
type gatedWriter struct {
	http.ResponseWriter
	gate    chan struct{}
	flushed bool
}

func (g *gatedWriter) Flush() {
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	if !g.flushed {
		g.flushed = true
		<-g.gate
	}
}

// modelWorld is a world that serves models: the scripted provider inside
// the gateway, and an Anthropic, an OpenAI and a Gemini stand-in, each
// with its credential in a variable of the gateway's environment.
type modelWorld struct {
	*world
	vendors map[inference.Kind]*vendor
	creds   map[string]string // credential variable → value
	logs    *syncBuffer
}

// Models of the world, each priced (USD per million tokens).
const (
	scriptedModel = "scripted-model"
	claudeModel   = "claude-test"
	gptModel      = "gpt-test"
	geminiModel   = "gemini-test"
)

const inferenceFile = `
providers:
  - {name: scripted, kind: scripted}
  - {name: anthropic, kind: anthropic, url: %s, credential_env: TEST_ANTHROPIC_KEY}
  - {name: openai, kind: openai, url: %s/v1, credential_env: TEST_OPENAI_KEY}
  - {name: google, kind: gemini, url: %s, credential_env: TEST_GEMINI_KEY}
  - {name: down, kind: openai, url: "http://127.0.0.1:1/v1"}
models:
  - {id: scripted-model, provider: scripted, price: {input: 1, output: 2, cache_read: 0.1, cache_write: 1.25}}
  - {id: claude-test, provider: anthropic, upstream: claude-upstream-1, price: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}}
  - {id: gpt-test, provider: openai, price: {input: 1.25, output: 10, cache_read: 0.125}}
  - {id: gemini-test, provider: google, upstream: gemini-upstream-1, price: {input: 1.25, output: 10, cache_read: 0.31}}
  - {id: down-model, provider: down, price: {input: 1, output: 1}}
  - {id: auto, router: [claude-test, gpt-test]}
`

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newModelWorld(t testing.TB, opts ...func(*worldConfig)) *modelWorld {
	t.Helper()
	return newModelWorldOf(t, inferenceFile, opts...)
}

// newModelWorldOf is a model world whose inference file is file, with the
// Anthropic, OpenAI and Gemini stand-ins' URLs in its %[1]s, %[2]s and
// %[3]s; opts change the world.
func newModelWorldOf(t testing.TB, file string, opts ...func(*worldConfig)) *modelWorld {
	t.Helper()
	m := &modelWorld{vendors: map[inference.Kind]*vendor{}, creds: map[string]string{
		"TEST_ANTHROPIC_KEY": "sk-ant-" + account.NewID("cred"),
		"TEST_OPENAI_KEY":    "sk-oai-" + account.NewID("cred"),
		"TEST_GEMINI_KEY":    "goog-" + account.NewID("cred"),
	}, logs: &syncBuffer{}}
	m.vendors[inference.KindScripted] = newVendor(t, inference.KindScripted, "")
	urls := map[inference.Kind]string{}
	for kind, env := range map[inference.Kind]string{inference.KindAnthropic: "TEST_ANTHROPIC_KEY", inference.KindOpenAI: "TEST_OPENAI_KEY", inference.KindGemini: "TEST_GEMINI_KEY"} {
		v := newVendor(t, kind, m.creds[env])
		srv := httptest.NewServer(v)
		t.Cleanup(srv.Close)
		m.vendors[kind], urls[kind] = v, srv.URL
	}
	cfg, err := inference.ParseConfig(strings.NewReader(fmt.Sprintf(file, urls[inference.KindAnthropic], urls[inference.KindOpenAI], urls[inference.KindGemini])))
	if err != nil {
		t.Fatal(err)
	}
	cat, err := inference.NewCatalog(cfg, func(k string) string { return m.creds[k] })
	if err != nil {
		t.Fatal(err)
	}
	// Every log line of the gateway, at debug, for the secrets test.
	log := slog.New(slog.NewJSONHandler(m.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m.world = newWorld(t, append([]func(*worldConfig){func(c *worldConfig) {
		c.log = log
		c.inference = func(st *store.Store, accounts *account.Service, url string) (*inference.Service, http.Handler) {
			return inference.NewService(inference.Options{Catalog: cat, Store: st, Accounts: accounts, Audit: st, PublicURL: url, Log: log}),
				m.vendors[inference.KindScripted]
		}
	}}, opts...)...)
	return m
}

// call sends one model request of dialect d for model with key, where
// that vendor's clients put theirs, naming session when not empty. edit
// may change the body before it is sent.
func (m *modelWorld) call(t testing.TB, d inference.Dialect, model string, stream bool, key, session string, edit func(map[string]any)) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(m.request(t, d, model, stream, key, session, edit))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// request is the request call sends.
func (m *modelWorld) request(t testing.TB, d inference.Dialect, model string, stream bool, key, session string, edit func(map[string]any)) *http.Request {
	t.Helper()
	var (
		path string
		body map[string]any
	)
	switch d {
	case inference.Anthropic:
		path = "/v1/messages"
		body = map[string]any{"model": model, "stream": stream, "max_tokens": 256,
			"messages": []any{map[string]any{"role": "user", "content": "Say hello"}}}
	case inference.OpenAIChat:
		path = "/v1/chat/completions"
		body = map[string]any{"model": model, "stream": stream, "max_tokens": 256,
			"messages": []any{map[string]any{"role": "user", "content": "Say hello"}}}
	case inference.OpenAIResponses:
		path = "/v1/responses"
		body = map[string]any{"model": model, "stream": stream, "max_output_tokens": 256, "input": "Say hello"}
	case inference.Gemini:
		path = "/v1beta/models/" + model + ":generateContent"
		if stream {
			path = "/v1beta/models/" + model + ":streamGenerateContent?alt=sse"
		}
		body = map[string]any{"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "Say hello"}}}},
			"generationConfig": map[string]any{"maxOutputTokens": 256}}
	}
	if edit != nil {
		edit(body)
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, m.url+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	switch d {
	case inference.Anthropic:
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	case inference.Gemini:
		req.Header.Set("X-Goog-Api-Key", key)
	default:
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if session != "" {
		req.Header.Set("X-Berth-Session", session)
	}
	return req
}

// answer reads a whole answer.
func answer(t testing.TB, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// agentKey starts an agent sandbox in project (empty: the default one,
// the owner's; else the administrator's, who may choose a project) and
// returns its id and its own key.
func (m *modelWorld) agentKey(t testing.TB, name, project string) (id, key string) {
	t.Helper()
	m.allowRepos(t, "acme")
	c := m.owner
	if project != "" {
		c = m.admin
	}
	sb, err := c.CreateSandbox(t.Context(), api.CreateSandbox{Name: name, Purpose: "agent", Repo: "acme/app", Task: "fix it", Project: project})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return sb.ID, m.envOf(t, sb.ID)["BERTH_API_KEY"]
}

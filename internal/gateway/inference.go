package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"berth.dev/berth/internal/account"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/inference"
)

// The model routes (SPEC S14) speak each vendor's own API, so the agent
// CLIs inside a sandbox need nothing but a base URL and the sandbox's key:
// Anthropic Messages, OpenAI Chat Completions and Responses, Gemini
// generateContent. Each authenticates with the key where that vendor's
// clients send theirs, answers errors in that vendor's shape, and passes
// the upstream's answer on as it arrives, an event stream flushed piece by
// piece, while a Meter counts its tokens.

// maxModelBody caps a model request; Claude Code's are around 100 KB, and
// images make them larger.
const maxModelBody = 32 << 20

// errNoModels is a model route on a gateway that serves no models.
var errNoModels = fault.Errorf(fault.Unserved, "no models configured")

func (s *Server) anthropicMessages(w http.ResponseWriter, r *http.Request, _ account.Principal) {
	s.proxyModel(w, r, inference.Anthropic, "", false, false)
}

func (s *Server) anthropicCountTokens(w http.ResponseWriter, r *http.Request, _ account.Principal) {
	s.proxyModel(w, r, inference.Anthropic, "", false, true)
}

func (s *Server) openAIChat(w http.ResponseWriter, r *http.Request, _ account.Principal) {
	s.proxyModel(w, r, inference.OpenAIChat, "", false, false)
}

func (s *Server) openAIResponses(w http.ResponseWriter, r *http.Request, _ account.Principal) {
	s.proxyModel(w, r, inference.OpenAIResponses, "", false, false)
}

// gemini serves /v1beta/models/MODEL:generateContent, :streamGenerateContent
// and :countTokens.
func (s *Server) gemini(w http.ResponseWriter, r *http.Request, _ account.Principal) {
	model, stream, count, err := inference.ParseGeminiPath(r.PathValue("call"))
	if err != nil {
		s.modelError(w, r, inference.Gemini, err)
		return
	}
	s.proxyModel(w, r, inference.Gemini, model, stream, count)
}

// vendorKey finds the caller's key where the vendors' clients put theirs:
// x-api-key (Anthropic), Authorization: Bearer (OpenAI, Anthropic's auth
// token), x-goog-api-key or ?key= (Gemini).
func vendorKey(r *http.Request) string {
	for _, h := range []string{"X-Api-Key", "X-Goog-Api-Key"} {
		if v := strings.TrimSpace(r.Header.Get(h)); v != "" {
			return v
		}
	}
	if v, ok := bearer(r); ok {
		return v
	}
	return r.URL.Query().Get("key")
}

// modelPrincipal authenticates a model route's caller.
func (s *Server) modelPrincipal(r *http.Request) (account.Principal, error) {
	key := vendorKey(r)
	if key == "" {
		return account.Principal{}, fault.Errorf(fault.Unauthenticated, "send your berth key as x-api-key, Authorization: Bearer, x-goog-api-key or ?key=")
	}
	return s.accounts.Authenticate(r.Context(), key)
}

// proxyModel serves one model request of dialect d: authenticate, read,
// admit (allow-list, rate limit, budget reservation, system prompt), send
// upstream, pass the answer back as it comes, settle what it metered.
func (s *Server) proxyModel(w http.ResponseWriter, r *http.Request, d inference.Dialect, model string, stream, count bool) {
	start := time.Now()
	if s.inference == nil {
		s.modelError(w, r, d, fault.Errorf(fault.Unserved, "this gateway serves no models (BERTH_INFERENCE_FILE is unset)"))
		return
	}
	p, err := s.modelPrincipal(r)
	if err != nil {
		s.modelError(w, r, d, err)
		return
	}
	// A learning sandbox's setup is over once its agent calls a model.
	s.endLearningAtModel(r.Context(), p)
	body, err := readModelBody(w, r)
	if err != nil {
		s.modelError(w, r, d, err)
		return
	}
	call, err := inference.ReadCall(d, model, stream, body)
	if err != nil {
		s.modelError(w, r, d, err)
		return
	}
	call.CountOnly = count
	t, err := s.inference.Admit(r.Context(), p, call, body, r.Header.Get("X-Berth-Session"))
	if err != nil {
		s.modelError(w, r, d, err)
		return
	}
	status, meter := 0, (*inference.Meter)(nil)
	defer func() {
		// The request is over for the client, but its cost must be
		// charged even when the client went away.
		rec, err := s.inference.Settle(context.WithoutCancel(r.Context()), t, status, meter)
		if err != nil {
			s.log.ErrorContext(r.Context(), "model request not recorded", "model", rec.Model, "err", err)
		}
		if !s.log.Enabled(r.Context(), slog.LevelDebug) {
			return // the line's 20 attributes would be built even so
		}
		s.log.DebugContext(r.Context(), "model request", "dialect", d, "model", rec.Model, "provider", rec.Provider,
			"user", rec.User, "project", rec.Project, "sandbox", rec.Sandbox, "session", rec.Session, "status", status,
			"input", rec.Usage.Input, "cache_read", rec.Usage.CacheRead, "cache_write", rec.Usage.CacheWrite,
			"output", rec.Usage.Output, "cost_usd", rec.CostUSD, "metered", rec.Metered, "took", time.Since(start))
	}()
	resp, err := s.sendUpstream(r, t)
	if err != nil {
		s.log.WarnContext(r.Context(), "model vendor unreachable", "provider", t.Provider.Name, "model", t.Model.ID, "err", err)
		s.modelError(w, r, d, fault.Errorf(fault.Upstream, "%s could not be reached", t.Provider.Name))
		return
	}
	defer resp.Body.Close()
	status = resp.StatusCode
	meter = inference.NewMeter(d, resp.Header.Get("Content-Type"))
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	passOn(w, resp.Body, meter, meter.Stream())
}

// readModelBody reads a model request's body, refusing one over
// maxModelBody (told by its length ahead or found reading) with
// fault.TooLarge.
func readModelBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	tooLarge := fault.Errorf(fault.TooLarge, "the request body is over the %d MiB limit", maxModelBody>>20)
	if r.ContentLength > maxModelBody {
		return nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxModelBody))
	var over *http.MaxBytesError
	switch {
	case errors.As(err, &over):
		return nil, tooLarge
	case err != nil:
		return nil, fault.Errorf(fault.Invalid, "read the request: %v", err)
	}
	return body, nil
}

// passOn copies an answer to the client and the meter as it arrives,
// flushing each piece, so an event stream reaches the client event by
// event, never held back whole. A client that goes away ends the copy.
// An event stream's pieces are small (the transport reads through a 4 KiB
// buffer), so it is copied through as much: a 32 KiB buffer for each of
// them was most of what the proxy allocated.
func passOn(w http.ResponseWriter, from io.Reader, meter *inference.Meter, stream bool) {
	rc := http.NewResponseController(w)
	size := 32 << 10
	if stream {
		size = 4 << 10
	}
	buf := make([]byte, size)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			_, _ = meter.Write(buf[:n])
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// sendUpstream sends an admitted request to its provider with the
// provider's credential in the vendor's header and, of the caller's
// headers, only those upstreamHeader passes.
func (s *Server) sendUpstream(r *http.Request, t *inference.Ticket) (*http.Response, error) {
	prov := t.Provider
	q := r.URL.Query()
	q.Del("key")
	var target string
	rt := s.modelTransport
	switch prov.Kind {
	case inference.KindScripted:
		rt = s.scripted
		if rt == nil {
			return nil, errors.New("no scripted model server in this gateway")
		}
		target = "http://scripted" + upstreamPath(r.URL.Path, t)
	case inference.KindOpenAI:
		// OpenAI's base URL carries its version (/v1), as its SDKs take it.
		target = prov.URL + strings.TrimPrefix(upstreamPath(r.URL.Path, t), "/v1")
	default:
		target = prov.URL + upstreamPath(r.URL.Path, t)
	}
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, target, bytes.NewReader(t.Body))
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		if upstreamHeader(k) {
			req.Header[http.CanonicalHeaderKey(k)] = vs
		}
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if cred := prov.Credential.Reveal(); cred != "" {
		switch prov.Kind {
		case inference.KindAnthropic:
			req.Header.Set("X-Api-Key", cred)
		case inference.KindOpenAI:
			req.Header.Set("Authorization", "Bearer "+cred)
		case inference.KindGemini:
			req.Header.Set("X-Goog-Api-Key", cred)
		}
	}
	if prov.Kind == inference.KindAnthropic && req.Header.Get("Anthropic-Version") == "" {
		req.Header.Set("Anthropic-Version", "2023-06-01")
	}
	return rt.RoundTrip(req)
}

// upstreamPath is the request's path with the upstream's name for the
// model where the path carries one (Gemini).
func upstreamPath(path string, t *inference.Ticket) string {
	if t.Call.Dialect != inference.Gemini {
		return path
	}
	i := strings.LastIndexByte(path, '/')
	_, method, _ := strings.Cut(path[i+1:], ":")
	return path[:i+1] + url.PathEscape(t.Model.Upstream) + ":" + method
}

// upstreamHeader says which of the caller's headers go on to the vendor:
// an allow-list of what the vendors' APIs read to understand a request
// (its content type and what the client accepts, Anthropic's API version
// and beta features, OpenAI's beta switches) and the client's name. The
// vendor needs nothing else: the credential is the deployment's, set by
// the proxy, and the request is the gateway's. So the caller's network
// identity (Forwarded, X-Forwarded-*, X-Real-IP, Via, True-Client-IP,
// CF-Connecting-IP and whatever the next proxy invents), its key and
// cookies, berth's own headers, account headers that would bill another
// organisation (OpenAI-Organization, OpenAI-Project, X-Goog-User-Project),
// SDK fingerprints and hop-by-hop headers all stay behind; a deny-list
// would miss the next such header. Accept-Encoding stays behind too, so
// the answer comes uncompressed and the meter can read it.
func upstreamHeader(k string) bool {
	switch http.CanonicalHeaderKey(k) {
	case "Content-Type", "Accept", "User-Agent", "Anthropic-Version", "Anthropic-Beta", "Openai-Beta":
		return true
	}
	return false
}

// copyHeader copies an upstream's answer headers but its cookies, its
// length and hop-by-hop ones. Without a length the answer ends only when
// the handler returns, after the request is settled: a client that read
// the whole answer finds it recorded.
func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		switch k {
		case "Set-Cookie", "Content-Length", "Connection", "Keep-Alive", "Proxy-Authenticate", "Trailer", "Transfer-Encoding", "Upgrade":
			continue
		}
		dst[k] = vs
	}
}

// modelError answers a refusal in the dialect's own error shape, with the
// status the one error mapper chose, so each CLI shows its message.
func (s *Server) modelError(w http.ResponseWriter, r *http.Request, d inference.Dialect, err error) {
	status, e := s.errorStatus(w, r, err)
	writeJSON(w, status, inference.ErrorBody(d, status, e.Code, e.Message))
}

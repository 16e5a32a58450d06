// Package modelserver is a scripted stand-in for the model vendors: an HTTP
// server that speaks Anthropic Messages, OpenAI Chat Completions and
// Responses, and Gemini generateContent well enough that the real agent
// CLIs (Claude Code, Pi, Codex, OpenCode, Gemini CLI) run against it
// offline. It is a fake at a boundary berth does not own (STYLE.md §4.9),
// used by tests and by the README's offline demo (cmd/berth-model).
//
// Every request is answered from a Script, decided from the request alone
// (shared/notes/agent-clis.md, "What a scripted model server must
// implement"), and every model call reports the same known Usage, so a
// run's telemetry can be checked to the token. With AsVendor it stands in
// for one vendor alone, as a gateway's upstream: that vendor's paths, key
// header and required fields, anything else refused as the vendor does.
package modelserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Usage is what every model call reports, in normalised form; each
// dialect renders it in its own fields (see DefaultUsage).
type Usage struct {
	Input      int // prompt tokens not read from the cache
	CacheRead  int // prompt tokens read from the cache
	CacheWrite int // prompt tokens written to the cache (Anthropic only)
	Output     int // generated tokens
	Reasoning  int // of Output, spent reasoning (OpenAI Responses only)
}

// DefaultUsage is the usage the captured agent streams were recorded with
// (shared/testdata/agent-streams/README.md): Anthropic input_tokens 120,
// cache_read 30, cache_creation 5, output 17; OpenAI and Gemini prompt 150
// of which 30 cached, output 17 (Responses: 3 of them reasoning).
func DefaultUsage() Usage {
	return Usage{Input: 120, CacheRead: 30, CacheWrite: 5, Output: 17, Reasoning: 3}
}

// prompt is the whole prompt as OpenAI and Gemini count it: cached
// tokens included.
func (u Usage) prompt() int { return u.Input + u.CacheRead }

// Dialect names the vendor API a request spoke.
type Dialect string

// The dialects the server speaks.
const (
	Anthropic       Dialect = "anthropic-messages"
	OpenAIChat      Dialect = "openai-chat"
	OpenAIResponses Dialect = "openai-responses"
	Gemini          Dialect = "gemini"
)

// Request is what the server saw of one HTTP request. Credentials are
// never kept: only the name of the header that carried one.
type Request struct {
	Method  string
	Path    string
	Dialect Dialect // empty for HEAD and unknown paths
	Model   string
	Stream  bool
	// ToolResults counts the tool results the conversation held, and
	// Answers the model's finished answers in it (see Script): their sum
	// is the index of the turn that answered, before clamping to the
	// script's last turn.
	ToolResults int
	Answers     int
	// Turn is the index of the script turn that answered (the sum above,
	// or the last turn past the script's end), -1 if none did.
	Turn int
	// Session is the X-Berth-Session header.
	Session string
	// UserTexts are the texts of the conversation's user turns, in order,
	// each as its digest: what a CLI made of its prompt can be checked
	// without the server keeping a prompt.
	UserTexts []Text
	// Credential is the canonical name of the header that carried a key
	// ("Authorization", "X-Api-Key", "X-Goog-Api-Key"), "key" for a key
	// query parameter, or empty when none was presented.
	Credential string
	Status     int
	// Marked are the markers (WithMarkers) the request's body held.
	Marked []string
}

// Text is one text a request carried, as its SHA-256 and its length.
type Text struct {
	SHA256 string // hex
	Bytes  int
}

// TextOf is s as a request's Text.
func TextOf(s string) Text {
	sum := sha256.Sum256([]byte(s))
	return Text{SHA256: hex.EncodeToString(sum[:]), Bytes: len(s)}
}

// Option configures a Server.
type Option func(*Server)

// WithUsage makes every model call report u instead of DefaultUsage().
func WithUsage(u Usage) Option { return func(s *Server) { s.usage = u } }

// WithLogger logs one line per request to log (never a credential or a
// prompt). Without it the server logs nothing.
func WithLogger(log *slog.Logger) Option { return func(s *Server) { s.log = log } }

// Pace is how an event stream is played out: its first event First after
// the request, each next one Every after the one before, as a model
// thinks and then writes. The zero Pace sends every event at once.
type Pace struct{ First, Every time.Duration }

// WithMarkers makes the server note which of markers (plain words, which
// JSON leaves as they are) each request's body holds anywhere: its system
// prompt, a user turn, a tool's description (Request.Marked). A test so
// learns what a CLI sent the model without the server keeping a prompt.
func WithMarkers(markers ...string) Option { return func(s *Server) { s.markers = markers } }

// WithPace plays every event stream at pace p; answers that are not
// streamed still come at once.
func WithPace(p Pace) Option { return func(s *Server) { s.pace = p } }

// Server answers model calls from a script.
type Server struct {
	script Script
	usage  Usage
	pace   Pace
	log    *slog.Logger
	seq    atomic.Int64 // numbers response and call ids
	// vendor, when set, is the one vendor the server stands in for
	// (AsVendor), and vendorKey the key it requires.
	vendor    Vendor
	vendorKey string
	markers   []string // WithMarkers'

	mu       sync.Mutex
	requests []Request
}

// New returns a server that answers from script (see Script.Validate; an
// empty script answers every model call with a 500).
func New(script Script, opts ...Option) *Server {
	s := &Server{script: script, usage: DefaultUsage(), log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Requests returns a copy of every request seen so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Handler serves every dialect. Dispatch is on the path's suffix, so any
// base URL prefix works (/v1, /v1beta, none, or a proxy's own); AsVendor
// narrows it to one vendor's own paths.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

// maxBody caps a request body; Claude Code's are around 100 KB.
const maxBody = 16 << 20

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rec := Request{
		Method:     r.Method,
		Path:       r.URL.Path,
		Turn:       -1,
		Session:    r.Header.Get("X-Berth-Session"),
		Credential: credential(r),
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if len(s.markers) > 0 && r.Method == http.MethodPost {
		b, err := io.ReadAll(r.Body)
		if err == nil {
			for _, m := range s.markers {
				if bytes.Contains(b, []byte(m)) {
					rec.Marked = append(rec.Marked, m)
				}
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	path := r.URL.Path
	switch {
	case s.refuse(w, r, &rec):
	case r.Method == http.MethodHead:
		// Claude Code 2.1.197 probes HEAD / before its first call.
		rec.Status = http.StatusOK
		w.WriteHeader(http.StatusOK)
	case r.Method != http.MethodPost:
		rec.Status = http.StatusMethodNotAllowed
		writeJSON(w, rec.Status, openAIError("modelserver: method "+r.Method+" not allowed", rec.Status))
	case strings.HasSuffix(path, "/messages/count_tokens"):
		s.anthropicCountTokens(w, r, &rec)
	case strings.HasSuffix(path, "/messages"):
		s.anthropic(w, r, &rec)
	case strings.HasSuffix(path, "/chat/completions"):
		s.openAIChat(w, r, &rec)
	case strings.HasSuffix(path, "/responses"):
		s.openAIResponses(w, r, &rec)
	case strings.Contains(path, "/models/") && strings.Contains(path[strings.LastIndex(path, "/"):], ":"):
		s.gemini(w, r, &rec)
	default:
		rec.Status = http.StatusNotFound
		writeJSON(w, rec.Status, openAIError("modelserver: no endpoint at "+path, rec.Status))
	}
	s.log.InfoContext(r.Context(), "model call", "method", rec.Method, "path", rec.Path,
		"dialect", rec.Dialect, "model", rec.Model, "stream", rec.Stream, "turn", rec.Turn, "status", rec.Status)
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	s.mu.Unlock()
}

// credential names where the request carried a key, without keeping it.
func credential(r *http.Request) string {
	for _, h := range []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"} {
		if r.Header.Get(h) != "" {
			return h
		}
	}
	if r.URL.Query().Get("key") != "" {
		return "key"
	}
	return ""
}

// Serve answers on ln until ctx is done, then shuts down, giving open
// streams a few seconds to finish. It returns nil after a shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	done := make(chan error, 1)
	stop := make(chan struct{}) // closed when Serve fails on its own
	defer close(stop)
	go func() {
		select {
		case <-ctx.Done():
		case <-stop:
			done <- nil
			return
		}
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		done <- srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("modelserver: serve: %w", err)
	}
	return <-done
}

// Package githttp serves git's smart HTTP protocol for the gateway's git
// endpoint (SPEC S17) and the local forge: `git http-backend` over CGI for
// the protocol itself, with every push's ref updates read first from the
// pkt-line stream and checked against forge.PushRules, so a refused push
// never reaches the repository and git shows the reason.
package githttp

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"berth.dev/berth/internal/forge"
)

// Target is one repository a request was authorised for.
type Target struct {
	// Dir is the bare repository.
	Dir string
	// User names the pusher for git (REMOTE_USER).
	User string
	// Rules decide what a push may do; nil refuses every push.
	Rules *forge.PushRules
	// Refused is told of a push the rules refused, before the answer.
	Refused func(ctx context.Context, updates []forge.RefUpdate, why map[string]string)
	// Pushed is told of the updates a push made, before the answer; an
	// error undoes nothing by itself but is shown to the pusher.
	Pushed func(ctx context.Context, done []forge.RefUpdate) error
}

// Handler runs git http-backend.
type Handler struct {
	git string
	log *slog.Logger
}

// New returns a Handler running the git binary at git ("git", found in
// PATH, if empty).
func New(git string, log *slog.Logger) *Handler {
	if git == "" {
		git = "git"
	}
	if p, err := exec.LookPath(git); err == nil {
		git = p // CGI runs a path, not a name
	}
	return &Handler{git: git, log: log}
}

// Serve answers one smart-HTTP request for t; rest is the part of the
// path after the repository: /info/refs, /git-upload-pack or
// /git-receive-pack.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, t Target, rest string) {
	service := r.URL.Query().Get("service")
	switch {
	case r.Method == http.MethodGet && rest == "/info/refs" && (service == "git-upload-pack" || service == "git-receive-pack"):
		if service == "git-receive-pack" && t.Rules == nil {
			http.Error(w, "berth: this repository cannot be pushed to from here\n", http.StatusForbidden)
			return
		}
		h.cgi(w, r, t, rest)
	case r.Method == http.MethodPost && rest == "/git-upload-pack":
		h.cgi(w, r, t, rest)
	case r.Method == http.MethodPost && rest == "/git-receive-pack":
		if t.Rules == nil {
			http.Error(w, "berth: this repository cannot be pushed to from here\n", http.StatusForbidden)
			return
		}
		h.receivePack(w, r, t)
	default:
		// Only the smart protocol: no dumb-HTTP file serving.
		http.Error(w, "berth: not a git smart-HTTP request\n", http.StatusNotFound)
	}
}

// receivePack reads the push's commands, checks them, and either answers
// with a refusal (the pack is read and dropped) or hands the request on to
// git with the commands in front, unchanged.
func (h *Handler) receivePack(w http.ResponseWriter, r *http.Request, t Target) {
	body := io.Reader(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, "berth: bad gzip body\n", http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	cmds, err := readCommands(body)
	if err != nil {
		http.Error(w, "berth: "+err.Error()+"\n", http.StatusBadRequest)
		return
	}
	if refused := t.Rules.Check(cmds.updates); len(refused) > 0 {
		_, _ = io.Copy(io.Discard, io.LimitReader(body, 1<<30))
		if t.Refused != nil {
			t.Refused(r.Context(), cmds.updates, refused)
		}
		var msg strings.Builder
		msg.WriteString("berth refused this push:\n")
		for _, u := range cmds.updates {
			if why, ok := refused[u.Ref]; ok {
				fmt.Fprintf(&msg, "  %s: %s\n", u.Ref, why)
			}
		}
		w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(refusal(cmds, refused, msg.String()))
		return
	}
	before := h.refs(r.Context(), t.Dir, cmds.updates)
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(io.MultiReader(bytes.NewReader(cmds.raw), body))
	r2.Header.Del("Content-Encoding")
	r2.ContentLength = -1
	// Buffer git's answer (a short report): what the push did is only
	// known after it, and Pushed may have to say it failed upstream.
	rec := httptest.NewRecorder()
	h.cgi(rec, r2, t, "/git-receive-pack")
	after := h.refs(r.Context(), t.Dir, cmds.updates)
	var done []forge.RefUpdate
	for _, u := range cmds.updates {
		if after[u.Ref] != before[u.Ref] && (after[u.Ref] == u.New || (u.IsDelete() && after[u.Ref] == "")) {
			done = append(done, u)
		}
	}
	if t.Pushed != nil && len(done) > 0 {
		if err := t.Pushed(r.Context(), done); err != nil {
			h.log.WarnContext(r.Context(), "push not completed", "repo", t.Dir, "err", err)
			refused := map[string]string{}
			for _, u := range done {
				refused[u.Ref] = err.Error()
			}
			w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
			_, _ = w.Write(refusal(cmds, refused, "berth could not complete this push: "+oneLine(err.Error())+"\n"))
			return
		}
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// refs reads the current value of each updated ref ("" when absent).
func (h *Handler) refs(ctx context.Context, dir string, updates []forge.RefUpdate) map[string]string {
	out := map[string]string{}
	for _, u := range updates {
		b, err := exec.CommandContext(ctx, h.git, "--git-dir", dir, "rev-parse", "--verify", "--quiet", u.Ref).Output()
		if err == nil {
			out[u.Ref] = strings.TrimSpace(string(b))
		} else {
			out[u.Ref] = ""
		}
	}
	return out
}

// cgi runs git http-backend for the request.
func (h *Handler) cgi(w http.ResponseWriter, r *http.Request, t Target, rest string) {
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + filepath.Base(t.Dir) + rest
	r2.URL.RawPath = ""
	home, _ := os.UserHomeDir()
	handler := &cgi.Handler{
		Path: h.git,
		Args: []string{"http-backend"},
		Dir:  t.Dir,
		Env: []string{
			"GIT_PROJECT_ROOT=" + filepath.Dir(t.Dir),
			"GIT_HTTP_EXPORT_ALL=1",
			"REMOTE_USER=" + t.User,
			"GIT_CONFIG_NOSYSTEM=1",
			"HOME=" + home,
			// http-backend refuses receive-pack unless told to; the push
			// rules above decided already.
			"GIT_CONFIG_COUNT=2",
			"GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=true",
			"GIT_CONFIG_KEY_1=uploadpack.allowFilter", "GIT_CONFIG_VALUE_1=true",
		},
		InheritEnv: []string{"PATH"},
		Logger:     slog.NewLogLogger(h.log.Handler(), slog.LevelWarn),
		Stderr:     io.Discard,
	}
	handler.ServeHTTP(w, r2)
}

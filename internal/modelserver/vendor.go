package modelserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// Vendor is one model vendor the server can stand in for alone, as a
// gateway's upstream: it then serves that vendor's API only, at the
// vendor's own paths, and only to a request carrying the vendor's key in
// the vendor's own header.
type Vendor string

// The vendors the server stands in for.
const (
	// VendorAnthropic serves Messages at /v1/messages (and count_tokens)
	// to x-api-key with an anthropic-version header.
	VendorAnthropic Vendor = "anthropic"
	// VendorOpenAI serves Chat Completions and Responses under /v1 to
	// Authorization: Bearer.
	VendorOpenAI Vendor = "openai"
	// VendorGemini serves generateContent, streamGenerateContent and
	// countTokens under /v1beta/models/ to x-goog-api-key (or ?key=).
	VendorGemini Vendor = "gemini"
)

// ParseVendor reads a vendor's name.
func ParseVendor(s string) (Vendor, bool) {
	switch v := Vendor(s); v {
	case VendorAnthropic, VendorOpenAI, VendorGemini:
		return v, true
	}
	return "", false
}

// AsVendor makes the server stand in for vendor v alone, requiring key.
// A request for another vendor's API, or for a path the vendor does not
// serve, is answered 404; one without the key in the vendor's header 401;
// one whose body lacks what the vendor's API requires 400; each in the
// vendor's own error shape, as the vendor answers them.
func AsVendor(v Vendor, key string) Option {
	return func(s *Server) { s.vendor, s.vendorKey = v, key }
}

// refuse answers a request the vendor would not serve and reports whether
// it did. It leaves r's body readable.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, rec *Request) bool {
	if s.vendor == "" {
		return false
	}
	path := r.URL.Path
	if r.Method == http.MethodHead && path == "/" && s.vendor == VendorAnthropic {
		return false // Claude Code 2.1.197's probe
	}
	var fields []string // what the vendor's API requires of a body
	switch s.vendor {
	case VendorAnthropic:
		switch path {
		case "/v1/messages":
			fields = []string{"model", "messages", "max_tokens"}
		case "/v1/messages/count_tokens":
			fields = []string{"model", "messages"}
		}
	case VendorOpenAI:
		switch path {
		case "/v1/chat/completions":
			fields = []string{"model", "messages"}
		case "/v1/responses":
			fields = []string{"model", "input"}
		}
	case VendorGemini:
		rest, ok := strings.CutPrefix(path, "/v1beta/models/")
		model, method, _ := strings.Cut(rest, ":")
		if ok && model != "" && (method == "generateContent" || method == "streamGenerateContent" || method == "countTokens") {
			fields = []string{"contents"}
		}
	}
	switch {
	case fields == nil || r.Method != http.MethodPost:
		s.vendorError(w, rec, http.StatusNotFound, "no such endpoint: "+r.Method+" "+path)
	case s.presented(r) != s.vendorKey:
		s.vendorError(w, rec, http.StatusUnauthorized, "invalid or missing API key")
	case s.vendor == VendorAnthropic && r.Header.Get("Anthropic-Version") == "":
		s.vendorError(w, rec, http.StatusBadRequest, "anthropic-version: header is required")
	default:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			s.vendorError(w, rec, http.StatusBadRequest, "the body could not be read")
			return true
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var got map[string]json.RawMessage
		if err := json.Unmarshal(body, &got); err != nil {
			s.vendorError(w, rec, http.StatusBadRequest, "the body is not a JSON object")
			return true
		}
		for _, f := range fields {
			if _, ok := got[f]; !ok {
				s.vendorError(w, rec, http.StatusBadRequest, f+": field required")
				return true
			}
		}
		return false
	}
	return true
}

// presented is the key a request carries where the vendor reads it.
func (s *Server) presented(r *http.Request) string {
	switch s.vendor {
	case VendorAnthropic:
		return r.Header.Get("X-Api-Key")
	case VendorGemini:
		if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
			return k
		}
		return r.URL.Query().Get("key")
	}
	k, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return k
}

// vendorError answers in the vendor's error shape.
func (s *Server) vendorError(w http.ResponseWriter, rec *Request, status int, msg string) {
	f := &Failure{Status: status, Message: "modelserver (" + string(s.vendor) + "): " + msg}
	switch s.vendor {
	case VendorAnthropic:
		s.anthropicError(w, rec, f)
	case VendorGemini:
		s.geminiFail(w, rec, f)
	default:
		rec.Status = status
		writeJSON(w, status, openAIError(f.Message, status))
	}
}

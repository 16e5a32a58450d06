// Package rest is what berth's remote forges (GitHub and GitLab, SPEC S9)
// share of their REST APIs: reading the configured URL, the web base clone
// URLs derive from, and one JSON call with its errors, over an HTTP client
// that follows no redirect and a message that never shows a credential.
package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// BaseURL reads a forge's configured URL (BERTH_SANDBOX_GIT_URL), or def
// when it is empty: http or https, a host, no credentials, query or
// fragment. The path is kept without its trailing slash.
func BaseURL(raw, def string) (*url.URL, error) {
	if raw == "" {
		raw = def
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Hostname() == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		// A credential in the URL must not reach an error message either.
		return nil, fmt.Errorf("the forge URL must be http(s)://host[:port][/path] with nothing else")
	}
	u.Host = webHost(u)
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// webHost is u's host as repository addresses name it: lower case, with
// the port only when it is not the scheme's own.
func webHost(u *url.URL) string {
	host := strings.ToLower(u.Host)
	if p := u.Port(); u.Scheme == "https" && p == "443" || u.Scheme == "http" && p == "80" {
		host = strings.TrimSuffix(host, ":"+p)
	}
	return host
}

// maxAnswer bounds what is read of an API's answer.
const maxAnswer = 1 << 20

// Client is a forge's JSON API: a base URL, the headers every call
// carries, and an HTTP client that follows no redirect, so that a
// credential in a header never goes to another host.
type Client struct {
	base   string // scheme://host[:port][/path], no trailing slash
	hc     *http.Client
	header http.Header
}

// New returns a Client on base; hc is copied, not changed.
func New(base *url.URL, hc *http.Client, header http.Header) *Client {
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{base: base.String(), hc: &c, header: header}
}

// Error is an answer outside 2xx. Its message never holds a header's
// credential.
type Error struct {
	Call    string // "GET /repos/acme/app/installation"
	Status  int
	Message string // the forge's own words, cut short
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %d %s", e.Call, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Status is err's HTTP status when it is an *Error, else 0.
func Status(err error) int {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Status
	}
	return 0
}

// Do sends in (when not nil) as JSON to path under the base, with the
// client's headers and extra, and decodes a 2xx answer into out (when not
// nil). path is already escaped.
func (c *Client) Do(ctx context.Context, method, path string, extra http.Header, in, out any) error {
	call := method + " " + path
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s: %w", call, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("%s: %w", call, err)
	}
	for _, h := range []http.Header{c.header, extra} {
		for k, v := range h {
			req.Header[k] = v
		}
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", call, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%s: read the answer: %w", call, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &Error{Call: call, Status: resp.StatusCode, Message: message(answer, req.Header)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return fmt.Errorf("%s: the answer is not the JSON expected: %w", call, err)
	}
	return nil
}

// message is what a forge said in an error answer: GitHub's and GitLab's
// "message" (a string or, on GitLab, an object of field errors) or
// GitLab's "error", with the request's credentials blanked out and cut to
// a line.
func message(answer []byte, sent http.Header) string {
	var fields struct {
		Message json.RawMessage `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(answer, &fields) != nil {
		return ""
	}
	raw := fields.Message
	if len(raw) == 0 {
		raw = fields.Error
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(raw)
	}
	for _, k := range []string{"Authorization", "Private-Token"} {
		v := sent.Get(k)
		if _, cred, ok := strings.Cut(v, " "); ok && k == "Authorization" {
			v = cred
		}
		if v != "" {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "…"
	}
	return strings.TrimSpace(s)
}

package oidctest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
)

// Authorize plays the browser of an authorization-code flow: it opens
// authURL with a cookie jar, follows the redirects through hydra and the
// login app, and stops at the first one to redirectURI, which it returns
// (with code and state, or error) without requesting it. A page that
// answers instead of redirecting is an error with its status and text.
func Authorize(ctx context.Context, authURL, redirectURI string) (*url.URL, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	var callback *url.URL
	c := &http.Client{
		Jar: jar,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), redirectURI) {
				callback = req.URL
				return http.ErrUseLastResponse
			}
			if len(via) > 20 {
				return errors.New("oidctest: more than 20 redirects")
			}
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if callback != nil {
		return callback, nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	at := *resp.Request.URL
	at.RawQuery = "" // a challenge is long and says nothing
	return nil, fmt.Errorf("oidctest: %s answered %s, not a redirect to %s: %s", &at, resp.Status, redirectURI, strings.TrimSpace(string(b)))
}

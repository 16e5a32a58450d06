package gateway_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"berth.dev/berth/internal/gateway"
)

// TestKeySignInOff: with BERTH_PANEL_KEY_SIGNIN=off (Options.NoKeySignIn)
// the panel's sign-in page offers the identity provider alone, and a key
// posted to its form signs nobody in, even a good one; the same key still
// works on the API. On by default, the page offers both.
func TestKeySignInOff(t *testing.T) {
	for _, off := range []bool{false, true} {
		var p *standIn
		w := newWorld(t, withSSO(&p), func(c *worldConfig) { c.options = func(o *gateway.Options) { o.NoKeySignIn = off } })
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Get(w.url + "/sign-in")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		hasForm, hasSSO := strings.Contains(string(page), `name="key"`), strings.Contains(string(page), `id="sso"`)
		if hasForm == off || !hasSSO {
			t.Errorf("key sign-in off %v: the sign-in page has the key form %v, the provider's button %v", off, hasForm, hasSSO)
		}
		// The form's token from a page that has the form, or a made-up
		// one (the cookie set all the same) where it has none.
		token := "made-up"
		if m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page); m != nil {
			token = string(m[1])
		} else {
			u, _ := url.Parse(w.url + "/sign-in")
			jar.SetCookies(u, []*http.Cookie{{Name: "berth_sign_in", Value: token, Path: "/sign-in"}})
		}
		resp, err = c.PostForm(w.url+"/sign-in", url.Values{"csrf": {token}, "key": {w.opKey}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case !off && resp.StatusCode != http.StatusSeeOther:
			t.Errorf("key sign-in on: a good key posted: %s", resp.Status)
		case off && (resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "turned off")):
			t.Errorf("key sign-in off: a good key posted: %s\n%.400s", resp.Status, body)
		}
		req, _ := http.NewRequest("GET", w.url+"/api/v1/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+w.opKey)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("key sign-in off %v: the key on the API: %v %v", off, err, resp.Status)
		} else {
			resp.Body.Close()
		}
	}
}

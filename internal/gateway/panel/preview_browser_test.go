package panel_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserPreview: the owner, signed in to the panel, asks the
// sandbox's page for port 3000 and follows the link: Chromium resolves
// *.localhost itself, lands on the app's own page on the preview's host,
// and the app saw neither the panel's cookie nor the preview's.
func TestBrowserPreview(t *testing.T) {
	c := newChrome(t)
	w := newWorld(t, func(c *worldConfig) { c.previewDomain = "preview.localhost" })
	sb := w.running(t, w.create(t, "alice", "web").ID)
	app := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(rw, "<!doctype html><title>The app</title><h1 id=app>Hello from port 3000</h1><p id=cookies>cookies: [%s]</p><p id=host>%s</p>",
			r.Header.Get("Cookie"), r.Host)
	}))
	t.Cleanup(app.Close)
	w.drv.Point(sb.ID, 3000, app.Listener.Addr().String())

	ctx := c.tab()
	c.signIn(ctx, w.url, w.keys["alice"])
	c.run(ctx, "open the sandbox's page", chromedp.Navigate(w.url+"/sandboxes/"+string(sb.ID)), chromedp.WaitVisible(chromedp.CSS("#port")))
	c.run(ctx, "ask for port 3000", chromedp.SendKeys(chromedp.CSS("#port"), "3000"))
	c.follow(ctx, "ask for the preview", `form.preview button[type=submit]`, "#preview-link")
	c.shot(ctx, "preview-link")
	c.follow(ctx, "open the preview", "#preview-link", "#app")
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	host := "p3000-" + strings.ReplaceAll(string(sb.ID), "_", "-") + ".preview.localhost"
	if !strings.HasPrefix(loc, "http://"+host+":") || strings.Contains(loc, "berth_preview") {
		t.Errorf("the browser is at %s: want the preview's host, the token gone", loc)
	}
	if got := c.text(ctx, "#app"); got != "Hello from port 3000" {
		t.Errorf("the page: %q", got)
	}
	if got := c.text(ctx, "#cookies"); got != "cookies: []" {
		t.Errorf("the app saw %q: want no cookie of berth's", got)
	}
	c.shot(ctx, "preview-app")
	// A reload goes on with the preview's own cookie.
	c.run(ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#app")))
}

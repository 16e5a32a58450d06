package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/browsertest"
)

// editorImage is the editor class image (images/build editor), or a skip:
// BERTH_TEST_EDITOR_IMAGE names another tag of it.
const editorImage = "localhost/berth-editor:latest"

// TestEditorThroughForward is issue 18's real editor on podman: an
// engineer sandbox of the editor class with acme/app checked out starts
// code-server over ssh (code-server-start, the image's), its owner
// forwards a local port to it with berth sandbox forward, and headless
// Chromium loads VS Code from that port, opens a file of the checkout from
// the explorer and shows its text. The screenshot is editor-forward.png in
// BERTH_TEST_SCREENSHOTS.
func TestEditorThroughForward(t *testing.T) {
	e := startEditor(t)
	_, local := e.alice.forward(t, "dev", "0:8080")
	tab := e.browser.tab()
	e.open(tab, "http://"+local+"/?folder=/home/berth/app")
	e.browser.shot(tab, "editor-forward")
}

// TestEditorThroughPreview is the same editor through the gateway's HTTP
// preview (BERTH_PREVIEW_DOMAIN; Chromium resolves *.localhost to
// loopback itself): the owner asks for a link to port 8080 with berth
// sandbox preview, Chromium opens it (the one-time token becomes the
// preview host's cookie and leaves the address bar), and VS Code loads,
// its WebSockets through the gateway's preview proxy, and opens the
// checkout's file. The screenshot is editor-preview.png. (That nobody
// else gets in, the spent link again included, is the gateway's preview
// tests': TestPreviewWho, TestPreviewTokenFlow, TestPreviewHostDispatch.)
func TestEditorThroughPreview(t *testing.T) {
	const domain = "preview.localhost"
	e := startEditor(t, "BERTH_PREVIEW_DOMAIN="+domain)
	link, err := url.Parse(strings.TrimSpace(e.alice.run(berthBin, "sandbox", "preview", "dev", "8080")))
	if err != nil {
		t.Fatal(err)
	}
	host := "p8080-" + strings.ReplaceAll(e.sb.ID, "_", "-") + "." + domain
	if link.Hostname() != host || !link.Query().Has("berth_preview") {
		t.Fatalf("berth sandbox preview dev 8080: %s, want a one-time link on %s", link, host)
	}

	// The link as printed: code-server opens the folder it was started on.
	tab := e.browser.tab()
	e.open(tab, link.String())
	loc, err := chromedp.Run(tab, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if at, err := url.Parse(loc); err != nil || at.Host != link.Host || at.Query().Has("berth_preview") {
		t.Errorf("the browser is at %s: want the preview's host %s, the token gone", loc, link.Host)
	}
	// The token became the preview host's own cookie (a domain without a
	// leading dot is host-only), out of the page's scripts.
	cookies, err := chromedp.Call(tab, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(cookies.Cookies, func(c *network.Cookie) bool { return c.Name == "berth_preview" })
	if i < 0 || cookies.Cookies[i].Domain != host || cookies.Cookies[i].Path != "/" || !cookies.Cookies[i].HTTPOnly {
		t.Errorf("the browser's cookies on the preview: %+v, want berth_preview, host-only on %s, path /, HttpOnly", cookies.Cookies, host)
	}
	e.browser.shot(tab, "editor-preview")
}

// editor is a gateway with alice's engineer sandbox dev of the editor
// class, acme/app checked out in it (hello.go holding marker), code-server
// answering on its port 8080, and a browser.
type editor struct {
	g       *gateway
	alice   *person
	sb      api.Sandbox
	marker  string
	browser *browser
}

// startEditor starts the gateway (extra: its settings), the sandbox and
// code-server in it over ssh (code-server-start, the image's); a skip
// without the editor image or Chromium.
func startEditor(t *testing.T, extra ...string) *editor {
	t.Helper()
	root := podmanRoot(t)
	image := os.Getenv("BERTH_TEST_EDITOR_IMAGE")
	if image == "" {
		image = editorImage
	}
	if !imageBuilt(root, image) {
		t.Skipf("no %s in %s: build it with `images/build editor` (make editor-image) to run the editor test", image, root)
	}
	e := &editor{browser: newBrowser(t), g: startGateway(t, extra...)}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	e.marker = "berth_editor_" + hex.EncodeToString(b)
	e.g.seedRepoFiles("acme/app", map[string]string{
		"hello.go": "package main\n\n// " + e.marker + "\nfunc main() {}\n",
	})
	ctx := context.Background()
	classes := `sandboxes:
  - name: editor
    image: ` + image + `
    isolation: standard
    cpu: "1"
    memory: 2Gi
    purposes: [engineer]
`
	if _, err := e.g.operator.ApplyClasses(ctx, "", strings.NewReader(classes)); err != nil {
		t.Fatal(err)
	}
	e.alice = e.g.newMember(t, "alice")
	pub, err := os.ReadFile(e.alice.key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := e.alice.api.CreateSandbox(ctx, api.CreateSandbox{Name: "dev", Class: "editor", Repo: "acme/app", SSHKeys: []string{strings.TrimSpace(string(pub))}})
	if err != nil {
		t.Fatal(err)
	}
	e.sb = e.g.waitState(e.alice.api, sb.ID, "running", 3*time.Minute)

	started := time.Now()
	out := e.alice.run(berthBin, "sandbox", "ssh", "dev", "-i", e.alice.key, "--", "code-server-start app")
	if !strings.Contains(out, "on port 8080, opening /home/berth/app") {
		t.Fatalf("code-server-start app: %q", out)
	}
	t.Logf("code-server answered %s after code-server-start", time.Since(started).Round(time.Millisecond))
	return e
}

// open loads VS Code from address in tab, waits for the explorer to list
// the checkout, opens hello.go from it and waits for its text.
func (e *editor) open(tab context.Context, address string) {
	e.browser.t.Helper()
	loaded := time.Now()
	e.browser.run(tab, "load the editor",
		chromedp.Navigate(address),
		// The explorer lists the checkout's file.
		chromedp.WaitVisible(`//div[contains(@class,"explorer-folders-view")]//div[contains(@class,"monaco-list-row")]//*[text()="hello.go"]`),
	)
	e.browser.t.Logf("the editor showed the checkout %s after navigating", time.Since(loaded).Round(time.Millisecond))
	e.browser.run(tab, "open hello.go",
		chromedp.Click(`//div[contains(@class,"explorer-folders-view")]//div[contains(@class,"monaco-list-row")]//*[text()="hello.go"]`),
		// The editor renders the file's lines (spaces as no-break spaces).
		chromedp.Poll[chromedp.Void](`[...document.querySelectorAll(".editor-instance .view-lines")].some(e => e.textContent.includes(`+"`"+e.marker+"`"+`))`,
			chromedp.WithPollingTimeout(time.Minute)),
	)
}

// browser is one headless Chromium for an end-to-end test, gated on
// BERTH_TEST_CHROMIUM (its binary), writing screenshots to
// BERTH_TEST_SCREENSHOTS (default: a new temporary directory, logged).
type browser struct {
	t     *testing.T
	alloc context.Context
	shots string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	alloc := browsertest.Allocator(t, 1280, 800)
	return &browser{t: t, alloc: alloc, shots: browsertest.Screenshots(t)}
}

// tab opens a tab whose actions must all finish within three minutes (VS
// Code is a large page for a busy two-core machine).
func (b *browser) tab() context.Context {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.alloc)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no deadline: one would stop it
		cancel()
		b.t.Fatal(err)
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	b.t.Cleanup(func() { cancelTimeout(); cancel() })
	return ctx
}

// run runs actions, failing the test with what was being done (and a
// screenshot of where the page was).
func (b *browser) run(ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		if png, serr := chromedp.Run(ctx, chromedp.FullScreenshot(100)); serr == nil {
			path := filepath.Join(b.shots, "failed.png")
			if os.WriteFile(path, png, 0o644) == nil {
				b.t.Logf("screenshot of the failure: %s", path)
			}
		}
		b.t.Fatalf("%s: %v", what, err)
	}
}

// shot writes a screenshot of the page as NAME.png.
func (b *browser) shot(ctx context.Context, name string) {
	b.t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", path)
}

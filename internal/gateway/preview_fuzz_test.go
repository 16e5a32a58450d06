package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzPreviewHost: the Host of a request (untrusted) is a preview host
// exactly when it is the preview domain or a name under it, and a label
// under it names a sandbox and port only when PreviewLabel makes that
// very label: no two hosts reach one sandbox's port, and no host outside
// the domain is taken for a preview.
func FuzzPreviewHost(f *testing.F) {
	for _, s := range []string{
		"p3000-sbx-abcdefghij0123456789.preview.localhost:8080", "preview.localhost", "a.b.preview.localhost",
		"p0-sbx-x.preview.localhost", "p03000-sbx-a.preview.localhost", "P3000-SBX-A.Preview.Localhost.",
		"preview.localhost.evil.example", "p3000-sbx_a.preview.localhost", "localhost", "", "[::1]:80",
	} {
		f.Add(s)
	}
	pv := newPreviews("preview.localhost")
	f.Fuzz(func(t *testing.T, host string) {
		label, ok := pv.previewHost(&http.Request{Host: host})
		h := strings.ToLower(host)
		if ok && !strings.Contains(h, "preview.localhost") {
			t.Fatalf("host %q outside the preview domain taken for a preview", host)
		}
		if !ok || label == "" {
			return
		}
		if strings.Contains(label, ".") {
			t.Fatalf("host %q gave a label with a dot: %q", host, label)
		}
		id, port, ok := parsePreviewLabel(label)
		if !ok {
			return
		}
		if PreviewLabel(id, port) != label || port <= 0 {
			t.Fatalf("label %q parsed as %s port %d, which makes %q", label, id, port, PreviewLabel(id, port))
		}
	})
}

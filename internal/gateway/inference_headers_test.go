package gateway_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"berth.dev/berth/internal/inference"
)

// TestModelRoutesPassNoCallerIdentity sends each model route, over a raw
// HTTP/1.1 connection so every header arrives as written, a request
// carrying the caller's network identity in every header proxies use for
// it, hop-by-hop headers, and headers of the caller's own accounts and
// clients. The vendor stand-in (and the scripted provider) receives none
// of them, and does receive what its API reads: the content type, what the
// client accepts, Anthropic's version and beta features, OpenAI's beta
// switches and the client's name.
func TestModelRoutesPassNoCallerIdentity(t *testing.T) {
	m := newModelWorld(t)
	sb, key := m.agentKey(t, "headers", "")
	withheld := map[string]string{
		"Forwarded":           "for=192.0.2.60;proto=http;by=203.0.113.43",
		"X-Forwarded-For":     "192.0.2.60",
		"X-Forwarded-Host":    "laptop.example",
		"X-Forwarded-Proto":   "https",
		"X-Real-Ip":           "192.0.2.61",
		"Via":                 "1.1 laptop-proxy",
		"True-Client-Ip":      "192.0.2.62",
		"Cf-Connecting-Ip":    "192.0.2.63",
		"X-Client-Ip":         "192.0.2.64",
		"X-Cluster-Client-Ip": "192.0.2.65",
		"Client-Ip":           "192.0.2.66",
		"Fastly-Client-Ip":    "192.0.2.67",
		"X-Originating-Ip":    "192.0.2.68",
		// Hop-by-hop: for this connection only, never the next one.
		"Keep-Alive":       "timeout=5",
		"Te":               "trailers",
		"Proxy-Connection": "keep-alive",
		"X-Hop":            "named in Connection",
		// The caller's own accounts and client fingerprints.
		"Openai-Organization":         "org-caller",
		"Openai-Project":              "proj_caller",
		"X-Goog-User-Project":         "caller-project",
		"Cookie":                      "session=caller",
		"X-Stainless-Os":              "Linux",
		"X-Claude-Code-Session-Id":    "0f5f1c2e-caller",
		"Proxy-Authorization":         "Basic Y2FsbGVyOnB3",
		"X-Berth-Debug":               "1",
		"X-Forwarded-Client-Cert":     "By=caller",
		"X-Envoy-External-Address":    "192.0.2.69",
		"X-Appengine-User-Ip":         "192.0.2.70",
		"Akamai-Origin-Hop":           "2",
		"X-Azure-Clientip":            "192.0.2.71",
		"X-Amzn-Trace-Id":             "Root=1-caller",
		"Cdn-Loop":                    "cloudflare",
		"X-Original-Forwarded-For":    "192.0.2.72",
		"X-Proxyuser-Ip":              "192.0.2.73",
		"Forwarded-For":               "192.0.2.74",
		"X-Forwarded-Server":          "laptop",
		"X-Real-Client-Ip":            "192.0.2.75",
		"Wl-Proxy-Client-Ip":          "192.0.2.76",
		"X-Cluster-Client-Ip-Trusted": "192.0.2.77",
	}
	passed := map[string]string{
		"Anthropic-Beta": "prompt-caching-2024-07-31",
		"Openai-Beta":    "responses=v1",
		"User-Agent":     "claude-cli/2.1.332 (external, cli)",
		"Accept":         "application/json",
	}
	for _, via := range []string{"vendor", "scripted"} {
		for _, d := range dialects {
			t.Run(fmt.Sprintf("%s/%s", via, d), func(t *testing.T) {
				kind, model := vendorModel(d)
				if via == "scripted" {
					kind, model = inference.KindScripted, scriptedModel
				}
				req := m.request(t, d, model, false, key, sb, nil)
				for k, v := range withheld {
					req.Header.Set(k, v)
				}
				for k, v := range passed {
					req.Header.Set(k, v)
				}
				req.Header.Set("Connection", "close, X-Hop")
				if status := sendRaw(t, req); status != http.StatusOK {
					t.Fatalf("status %d", status)
				}
				got := m.vendors[kind].last(t).header
				for k := range withheld {
					if v := got.Values(k); len(v) > 0 {
						t.Errorf("the vendor received %s: %q", k, v)
					}
				}
				if v := got.Get("Connection"); strings.Contains(strings.ToLower(v), "x-hop") {
					t.Errorf("the vendor received Connection: %s", v)
				}
				for k, v := range passed {
					if got.Get(k) != v {
						t.Errorf("the vendor received %s %q, want %q", k, got.Get(k), v)
					}
				}
				if d == inference.Anthropic && got.Get("Anthropic-Version") != "2023-06-01" {
					t.Errorf("Anthropic-Version %q, want the caller's 2023-06-01", got.Get("Anthropic-Version"))
				}
			})
		}
	}
}

// sendRaw writes req on a connection of its own, headers exactly as set
// (Connection and the other hop-by-hop ones included), and returns the
// answer's status.
func sendRaw(t *testing.T, req *http.Request) int {
	t.Helper()
	conn, err := net.Dial("tcp", req.URL.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

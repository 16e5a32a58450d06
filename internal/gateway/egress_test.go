package gateway_test

import (
	"bufio"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/client"
	"berth.dev/berth/internal/gateway"
)

// TestEgressThroughTheGateway: the gateway's own port is an agent
// sandbox's way out. With the real curl and the sandbox's own key, an
// HTTPS host its class's egress names is reached (curl verifies the
// host's certificate, so the proxy did not look inside); one it does not
// name is refused, the reason in curl's output and the refusal in the
// audit log; a user's key, an engineer's class narrower than open and a
// sandbox's show say what they should.
func TestEgressThroughTheGateway(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	host := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached") }))
	t.Cleanup(host.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: host.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(host.Listener.Addr().(*net.TCPAddr).Port)

	w := newWorld(t)
	w.allowRepos(t, "acme")
	ctx := t.Context()
	file := `sandboxes:
  - name: fetcher
    image: localhost/berth-sandbox:1
    isolation: standard
    purposes: [agent]
    egress: ["127.0.0.1:` + port + `"]
`
	if _, err := w.admin.ApplyClasses(ctx, "", strings.NewReader(file)); err != nil {
		t.Fatal(err)
	}
	sb, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "fetch", Purpose: "agent", Class: "fetcher", Repo: "acme/app", Task: "fetch"})
	if err != nil {
		t.Fatal(err)
	}
	env := w.envOf(t, sb.ID)
	key := env["BERTH_API_KEY"]
	sb = w.waitState(t, w.owner, sb.ID, "running")
	// Its tools are pointed at the proxy with its own key; the gateway
	// itself (models, git) is reached straight.
	u, _ := url.Parse(w.url)
	if want := "http://x:" + key + "@" + u.Host; env["HTTPS_PROXY"] != want || env["http_proxy"] != want || env["NO_PROXY"] != u.Hostname() {
		t.Errorf("the agent's proxy settings: HTTPS_PROXY %q http_proxy %q NO_PROXY %q; want %q and %q", env["HTTPS_PROXY"], env["http_proxy"], env["NO_PROXY"], want, u.Hostname())
	}
	if sb.Egress != "127.0.0.1/32:"+port {
		t.Errorf("the sandbox's egress is %q, want its class's", sb.Egress)
	}
	curl := func(args ...string) (string, string, error) {
		cmd := exec.Command("curl", append([]string{"-sS", "-v", "--max-time", "10", "--proxy", w.url, "--cacert", ca}, args...)...)
		if args[0] == "--proxy" { // the sandbox's own setting, key and all
			cmd = exec.Command("curl", append([]string{"-sS", "-v", "--max-time", "10", "--cacert", ca}, args...)...)
		}
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	if out, errOut, err := curl("--proxy", env["HTTPS_PROXY"], "https://127.0.0.1:"+port+"/"); err != nil || out != "reached" {
		t.Fatalf("curl through the gateway to a host the class names: %v, %q\n%s", err, out, errOut)
	}
	_, errOut, err := curl("--proxy-user", "x:"+key, "https://127.0.0.2:"+port+"/")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(errOut, "403 Forbidden (berth egress: 127.0.0.2 port "+port+" is not in this sandbox's egress policy") {
		t.Errorf("curl to a host the class does not name: %v\n%s", err, errOut)
	}
	_, userKey := w.userKey(t, "acme", "dora", "member")
	if _, errOut, err := curl("--proxy-user", "x:"+userKey, "https://127.0.0.1:"+port+"/"); err == nil || !strings.Contains(errOut, "407") {
		t.Errorf("curl through the gateway with a user's key: %v\n%s", err, errOut)
	}

	families, status := scrape(t, w.url, w.opKey)
	if status != http.StatusOK {
		t.Fatalf("scrape: %d", status)
	}
	for decision, want := range map[string]float64{"allowed": 1, "refused": 1} {
		if got := value(t, families, "berth_egress_connections_total", map[string]string{"class": "fetcher", "decision": decision}); got != want {
			t.Errorf("berth_egress_connections_total{class=fetcher,decision=%s} = %v, want %v", decision, got, want)
		}
	}
	if got := value(t, families, "berth_egress_bytes_total", map[string]string{"class": "fetcher", "direction": "from_host"}); got <= 0 {
		t.Errorf("berth_egress_bytes_total{from_host} = %v, want the download's bytes", got)
	}

	events, err := w.operator.Audit(ctx, client.AuditOptions{Sandbox: sb.ID})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, e := range events {
		if e.Action == "egress.refuse" {
			refused++
			if e.Target != "127.0.0.2:"+port || e.Outcome != "refused" || !strings.Contains(e.Detail, "not in this sandbox's egress policy") {
				t.Errorf("the refusal's audit entry: %+v", e)
			}
		}
	}
	if refused != 1 {
		t.Errorf("%d egress refusals in the audit log, want 1: %+v", refused, events)
	}

	// Its summary: each host with its connections and bytes, the refusal
	// with its reason; a sandbox of someone the caller may not see is not
	// found. (A run naming what it was refused: internal/e2e's
	// TestEgress, with a real run.)
	sum, err := w.owner.SandboxEgress(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Name != "fetch" || sum.Policy != sb.Egress || len(sum.Hosts) != 2 {
		t.Fatalf("berth sandbox egress: %+v", sum)
	}
	if h := sum.Hosts[0]; h.Host != "127.0.0.2" || h.Port != host.Listener.Addr().(*net.TCPAddr).Port || h.Decision != "refused" || h.Connections != 1 || !strings.Contains(h.Why, "not in this sandbox's egress policy") {
		t.Errorf("the refused host: %+v", h)
	}
	if h := sum.Hosts[1]; h.Host != "127.0.0.1" || h.Decision != "allowed" || h.Connections != 1 || h.BytesDown < int64(len("reached")) || h.BytesUp == 0 || h.Last.Before(h.First) {
		t.Errorf("the allowed host: %+v", h)
	}
	if len(sum.Learned) != 1 || sum.Learned[0] != "none" {
		t.Errorf("learned %v: an address is no name to learn", sum.Learned)
	}
	var nf *api.Error
	if _, err := w.foreign.SandboxEgress(ctx, sb.ID); !errors.As(err, &nf) || nf.Status != http.StatusNotFound {
		t.Errorf("another organisation's member asks for the summary: %v, want 404", err)
	}

	// The organisation's guardrail narrows it, restrict-only: a sandbox
	// made now goes nowhere, and the proxy refuses it the host its class
	// names.
	g, err := w.admin.Guardrail(ctx, "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	g.Egress = []string{"none"}
	if _, err := w.admin.SetGuardrail(ctx, "acme", "", g); err != nil {
		t.Fatal(err)
	}
	narrowed, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "fetch-2", Purpose: "agent", Class: "fetcher", Repo: "acme/app", Task: "fetch"})
	if err != nil {
		t.Fatal(err)
	}
	nenv := w.envOf(t, narrowed.ID)
	if narrowed = w.waitState(t, w.owner, narrowed.ID, "running"); narrowed.Egress != "none" || nenv["HTTPS_PROXY"] != "" {
		t.Errorf("under a guardrail of none: egress %q, HTTPS_PROXY %q; want none and no proxy", narrowed.Egress, nenv["HTTPS_PROXY"])
	}
	if _, errOut, err := curl("--proxy-user", "x:"+nenv["BERTH_API_KEY"], "https://127.0.0.1:"+port+"/"); err == nil || !strings.Contains(errOut, "403") {
		t.Errorf("curl from a sandbox made under a guardrail of none: %v\n%s", err, errOut)
	}

	// An engineer's network is open today: a class engineers may use
	// cannot be narrower, and an engineer sandbox says open.
	bad := strings.Replace(file, "purposes: [agent]", "purposes: [engineer, agent]", 1)
	var e *api.Error
	if _, err := w.admin.ApplyClasses(ctx, "", strings.NewReader(bad)); !errors.As(err, &e) || e.Status != http.StatusBadRequest || !strings.Contains(e.Message, "egress") {
		t.Errorf("a class for engineers with a list of hosts: %v", err)
	}
	eng := w.create(t, w.owner, "dev")
	if eng.Egress != "open" {
		t.Errorf("an engineer sandbox's egress is %q, want open", eng.Egress)
	}
	// Its own network is its way out: the proxy is not.
	engKey := w.envOf(t, eng.ID)["BERTH_API_KEY"]
	if _, errOut, err := curl("--proxy-user", "x:"+engKey, "https://127.0.0.1:"+port+"/"); err == nil || !strings.Contains(errOut, "407") {
		t.Errorf("curl through the gateway with an engineer sandbox's key: %v\n%s", err, errOut)
	}
}

// TestEgressLearnt: a sandbox of a class that says egress: learn reaches
// any host while its setup runs, the proxy keeping what it reached; its
// agent's first model call ends that, once: from then on it reaches what
// it reached and nothing else, its egress says so, the audit log has the
// list, and berth sandbox egress --as-policy prints it.
func TestEgressLearnt(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	host := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached "+r.Host) }))
	t.Cleanup(host.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: host.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	// Three names for the one test server (its certificate names
	// example.com), as a mirror would be reached.
	to := host.Listener.Addr().String()
	w := newModelWorld(t, func(c *worldConfig) {
		c.options = func(o *gateway.Options) {
			o.EgressConnectTo = map[string]string{"example.com:443": to, "www.example.com:443": to, "other.example.com:443": to}
		}
	})
	w.allowRepos(t, "acme")
	ctx := t.Context()
	if _, err := w.admin.ApplyClasses(ctx, "", strings.NewReader("sandboxes:\n  - name: learner\n    image: localhost/berth-sandbox:1\n    isolation: standard\n    purposes: [agent]\n    egress: learn\n")); err != nil {
		t.Fatal(err)
	}
	sb, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "learn", Purpose: "agent", Class: "learner", Repo: "acme/app", Task: "set up, then work"})
	if err != nil {
		t.Fatal(err)
	}
	env := w.envOf(t, sb.ID)
	if sb = w.waitState(t, w.owner, sb.ID, "running"); sb.Egress != "learn" || env["HTTPS_PROXY"] == "" {
		t.Fatalf("egress %q, HTTPS_PROXY %q: want learn, and the proxy", sb.Egress, env["HTTPS_PROXY"])
	}
	curl := func(url string) (string, string, error) {
		cmd := exec.Command("curl", "-sS", "-v", "--max-time", "10", "--proxy", env["HTTPS_PROXY"], "--cacert", ca, url)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	// Setup: any host; one reached through a tunnel still open when
	// setup ends (a download under way) is learnt too.
	if out, errOut, err := curl("https://example.com/"); err != nil || !strings.HasPrefix(out, "reached") {
		t.Fatalf("setup: curl example.com: %v, %q\n%s", err, out, errOut)
	}
	proxyURL, err := url.Parse(env["HTTPS_PROXY"])
	if err != nil {
		t.Fatal(err)
	}
	tunnel, err := net.Dial("tcp", proxyURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer tunnel.Close()
	pass, _ := proxyURL.User.Password()
	auth := base64.StdEncoding.EncodeToString([]byte(proxyURL.User.Username() + ":" + pass))
	fmt.Fprintf(tunnel, "CONNECT www.example.com:443 HTTP/1.1\r\nHost: www.example.com:443\r\nProxy-Authorization: Basic %s\r\n\r\n", auth)
	if status, err := bufio.NewReader(tunnel).ReadString('\n'); err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("setup: a tunnel to www.example.com: %q, %v", status, err)
	}
	// The agent's first model call ends the learning.
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, w.url+"/v1/messages", strings.NewReader(`{"model":"scripted-model","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("x-api-key", env["BERTH_API_KEY"])
		req.Header.Set("content-type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	got, err := w.owner.Sandbox(ctx, sb.ID)
	if err != nil || got.Egress != "example.com, www.example.com" {
		t.Fatalf("after the agent's first model call: egress %q, %v; want the two hosts setup reached", got.Egress, err)
	}
	if out, errOut, err := curl("https://www.example.com/"); err != nil || !strings.HasPrefix(out, "reached") {
		t.Errorf("the agent reaches a host setup reached: %v, %q\n%s", err, out, errOut)
	}
	if _, errOut, err := curl("https://other.example.com/"); err == nil || !strings.Contains(errOut, "other.example.com port 443 is not in this sandbox's egress policy (example.com, www.example.com)") {
		t.Errorf("the agent reaches a host setup did not: %v\n%s", err, errOut)
	}
	events, err := w.operator.Audit(ctx, client.AuditOptions{Sandbox: sb.ID})
	if err != nil {
		t.Fatal(err)
	}
	learnt := 0
	for _, e := range events {
		if e.Action == "egress.learn" {
			learnt++
			if e.Target != "example.com, www.example.com" || e.Detail != "its agent called a model" {
				t.Errorf("the audit entry of the learning's end: %+v", e)
			}
		}
	}
	if learnt != 1 {
		t.Errorf("%d egress.learn entries, want 1", learnt)
	}
	sum, err := w.owner.SandboxEgress(ctx, sb.ID)
	if err != nil || strings.Join(sum.Learned, " ") != "example.com www.example.com" {
		t.Errorf("learned %v, %v", sum.Learned, err)
	}
}

// TestEgressNarrowedAtCreate: a create may narrow an agent's egress,
// never widen it: learn within an open class, a host of the class's list,
// open taking nothing away; an engineer's create and a bad rule are
// refused naming egress.
func TestEgressNarrowedAtCreate(t *testing.T) {
	w := newWorld(t)
	w.allowRepos(t, "acme")
	ctx := t.Context()
	if _, err := w.admin.ApplyClasses(ctx, "", strings.NewReader(`sandboxes:
  - name: opened
    image: localhost/berth-sandbox:1
    isolation: standard
    purposes: [agent]
    egress: open
  - name: listed
    image: localhost/berth-sandbox:1
    isolation: standard
    purposes: [agent]
    egress: [a.example.com, b.example.com]
`)); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		class  string
		asked  []string
		egress string
	}{
		{"opened", []string{"learn"}, "learn"},
		{"opened", []string{"a.example.com"}, "a.example.com"},
		{"listed", []string{"a.example.com", "c.example.com"}, "a.example.com"},
		{"listed", []string{"open"}, "a.example.com, b.example.com"},
		{"listed", []string{"learn"}, "a.example.com, b.example.com"},
		{"listed", []string{"none"}, "none"},
	} {
		sb, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: fmt.Sprintf("n-%d", i), Purpose: "agent", Class: c.class, Repo: "acme/app", Task: "t", Egress: c.asked})
		if err != nil || sb.Egress != c.egress {
			t.Errorf("class %s, egress %v asked: %q, %v; want %q", c.class, c.asked, sb.Egress, err, c.egress)
		}
	}
	var e *api.Error
	if _, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "bad", Purpose: "agent", Class: "opened", Repo: "acme/app", Task: "t", Egress: []string{"*.com"}}); !errors.As(err, &e) || e.Field != "egress" {
		t.Errorf("a bad rule at create: %v, want 400 naming egress", err)
	}
	if _, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "eng", SSHKeys: []string{sshKey}, Egress: []string{"none"}}); !errors.As(err, &e) || e.Field != "egress" {
		t.Errorf("egress on an engineer's create: %v, want 400 naming egress", err)
	}
}

// TestEgressRefusalFlood: a sandbox that loops on a refused host has
// every refusal counted in its egress summary, and only the first 30 of a
// minute in the audit log.
func TestEgressRefusalFlood(t *testing.T) {
	w := newWorld(t)
	w.allowRepos(t, "acme")
	ctx := t.Context()
	sb, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "loop", Purpose: "agent", Repo: "acme/app", Task: "loop"})
	if err != nil {
		t.Fatal(err)
	}
	key := w.envOf(t, sb.ID)["BERTH_API_KEY"]
	w.waitState(t, w.owner, sb.ID, "running")
	const n = 45
	for range n {
		req, _ := http.NewRequest(http.MethodConnect, w.url, nil)
		req.Host = "blocked.example:443"
		req.Header.Set("Proxy-Authorization", "Bearer "+key)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("CONNECT blocked.example: %s, want 403", resp.Status)
		}
	}
	sum, err := w.owner.SandboxEgress(ctx, sb.ID)
	if err != nil || len(sum.Hosts) != 1 || sum.Hosts[0].Connections != n {
		t.Errorf("the summary: %+v, %v; want the %d refusals counted", sum.Hosts, err, n)
	}
	events, err := w.operator.Audit(ctx, client.AuditOptions{Sandbox: sb.ID})
	if err != nil {
		t.Fatal(err)
	}
	audited := 0
	for _, e := range events {
		if e.Action == "egress.refuse" {
			audited++
		}
	}
	if audited != 30 {
		t.Errorf("%d refusals in the audit log, want the first 30 of the minute", audited)
	}
}

package gateway_test

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/egress/placeholder"
	"berth.dev/berth/internal/gateway"
	"berth.dev/berth/internal/secret"
)

// TestSecretsByPlaceholderThroughTheGateway (issue 22): an administrator
// stores a project secret for api.example.com; an agent sandbox of the
// project holds only a placeholder (and the authority to trust); with the
// real curl through the gateway's proxy, the secret's host gets the value
// where the placeholder stood and another host gets the placeholder; the
// database and the sandbox's environment hold no value; once the sandbox
// ends its placeholder is worth nothing.
func TestSecretsByPlaceholderThroughTheGateway(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	var mu sync.Mutex
	var seen []string
	host := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Host+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(host.Close)
	last := func() string { mu.Lock(); defer mu.Unlock(); return seen[len(seen)-1] }
	roots := x509.NewCertPool()
	roots.AddCert(host.Certificate())
	hostCA := filepath.Join(t.TempDir(), "host-ca.pem")
	if err := os.WriteFile(hostCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: host.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	to := host.Listener.Addr().String()
	w := newWorld(t, func(c *worldConfig) {
		c.options = func(o *gateway.Options) {
			o.EgressConnectTo = map[string]string{"example.com:443": to, "www.example.com:443": to}
			o.UpstreamRoots = roots
		}
	})
	w.allowRepos(t, "acme")
	ctx := t.Context()
	const value = "ghp_s3cr3tVALUEofTheGatewayTest"
	if _, err := w.member.SetSecret(ctx, "acme", "default", "API_TOKEN", secret.New(value), []string{"example.com"}); !isStatus(err, http.StatusForbidden) {
		t.Errorf("a member sets a secret: %v, want 403", err)
	}
	x, err := w.admin.SetSecret(ctx, "acme", "default", "API_TOKEN", secret.New(value), []string{"example.com"})
	if err != nil || x.Name != "API_TOKEN" || strings.Join(x.Hosts, ",") != "example.com" {
		t.Fatalf("set: %+v, %v", x, err)
	}
	if list, err := w.owner.Secrets(ctx, "acme", "default"); err != nil || len(list) != 1 || list[0].Name != "API_TOKEN" {
		t.Errorf("a member lists the project's secrets: %+v, %v", list, err)
	}
	if _, err := w.admin.SetSecret(ctx, "acme", "default", "BERTH_API_KEY", secret.New("x"), []string{"example.com"}); !isStatus(err, http.StatusBadRequest) {
		t.Errorf("a secret named like berth's own variable: %v, want 400", err)
	}

	if _, err := w.admin.ApplyClasses(ctx, "", strings.NewReader("sandboxes:\n  - name: caller\n    image: localhost/berth-sandbox:1\n    isolation: standard\n    purposes: [agent]\n    egress: [example.com, www.example.com]\n")); err != nil {
		t.Fatal(err)
	}
	sb, err := w.owner.CreateSandbox(ctx, api.CreateSandbox{Name: "call", Purpose: "agent", Class: "caller", Repo: "acme/app", Task: "call the API"})
	if err != nil {
		t.Fatal(err)
	}
	env := w.envOf(t, sb.ID)
	w.waitState(t, w.owner, sb.ID, "running")
	ph := env["API_TOKEN"]
	if !strings.HasPrefix(ph, placeholder.Prefix) || env["BERTH_CA_CERTS"] != string(w.issuer.CertPEM()) {
		t.Fatalf("the sandbox's API_TOKEN %q, BERTH_CA_CERTS %q: want a placeholder and the deployment's authority", ph, env["BERTH_CA_CERTS"])
	}
	for k, v := range env {
		if strings.Contains(v, value) {
			t.Errorf("the sandbox's %s holds the secret's value", k)
		}
	}
	berthCA := filepath.Join(t.TempDir(), "berth-ca.pem")
	if err := os.WriteFile(berthCA, []byte(env["BERTH_CA_CERTS"]), 0o644); err != nil {
		t.Fatal(err)
	}
	curl := func(ca, url string) (string, string, error) {
		cmd := exec.Command("curl", "-sS", "--max-time", "10", "--proxy", env["HTTPS_PROXY"], "--cacert", ca, "-H", "Authorization: Bearer "+ph, url)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	if out, errOut, err := curl(berthCA, "https://example.com/"); err != nil || out != "ok" {
		t.Fatalf("curl the secret's host: %v, %q\n%s", err, out, errOut)
	}
	if got := last(); got != "example.com Bearer "+value {
		t.Errorf("the secret's host got %q, want the value", got)
	}
	if out, errOut, err := curl(hostCA, "https://www.example.com/"); err != nil || out != "ok" {
		t.Fatalf("curl another host: %v, %q\n%s", err, out, errOut)
	}
	if got := last(); got != "www.example.com Bearer "+ph {
		t.Errorf("another host got %q, want the placeholder as sent", got)
	}
	for _, f := range []string{w.dbPath, w.dbPath + "-wal"} {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), value) {
			t.Errorf("%s holds the secret's value in the clear", filepath.Base(f))
		}
	}

	if _, err := w.owner.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := curl(berthCA, "https://example.com/"); err == nil || !strings.Contains(errOut, "407") {
		t.Errorf("the placeholder after its sandbox ended: %v\n%s", err, errOut)
	}
}

func isStatus(err error, status int) bool {
	var e *api.Error
	return errors.As(err, &e) && e.Status == status
}

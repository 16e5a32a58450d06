package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/secret"
)

// recorder is an HTTPS host of the test CA that keeps the Authorization
// and X-Token headers of each request it gets, and answers "ok" (never
// what it got: the value must not travel back to the sandbox).
type recorder struct {
	mu   sync.Mutex
	seen []string
	port int
}

func (ca *testCA) recorder(t *testing.T, names ...string) *recorder {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.seen = append(rec.seen, r.Host+" "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Token"))
		rec.mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	cert := ca.leafFor(t, names...)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	rec.port = srv.Listener.Addr().(*net.TCPAddr).Port
	return rec
}

func (r *recorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 {
		return ""
	}
	return r.seen[len(r.seen)-1]
}

// TestSecretsByPlaceholder: for a host a secret is for, the proxy stands
// in for the host (curl trusts berth's authority, not the host's) and the
// host gets the value where the sandbox sent the placeholder, in a header
// and inside Basic credentials; another sandbox's placeholder stays as it
// is; a host the secret is not for gets the placeholder untouched, over
// a tunnel the proxy does not read; a host whose own certificate the
// proxy cannot verify is not sent the value.
func TestSecretsByPlaceholder(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	ca := newTestCA(t)
	api := ca.recorder(t, "api.test", "other.test")
	p := strconv.Itoa(api.port)
	issuer, err := LoadIssuer(filepath.Join(t.TempDir(), "data", "egress_ca")) // a data directory not made yet
	if err != nil {
		t.Fatal(err)
	}
	berthCA := filepath.Join(t.TempDir(), "berth-ca.pem")
	if err := os.WriteFile(berthCA, issuer.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	rule, _ := egress.ParseRule("api.test:" + p)
	const ph, value = "berth-placeholder-abcdefabcdefabcdefabcdefabcdefab", "s3cr3t-VALUE"
	pol := policy(t, "api.test:"+p, "other.test:"+p, "untrusted.test:"+p)
	prx := &Proxy{
		Authenticate: func(_ context.Context, h string) (Caller, error) {
			if h != "Bearer berth_sk_test" {
				return Caller{}, errors.New("unknown key")
			}
			return Caller{Sandbox: "sbx_test", Policy: pol, Secrets: []Replacement{{Hosts: []egress.Rule{rule}, Placeholder: ph, Value: secret.New(value)}}}, nil
		},
		Resolve: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
		ConnectTo: map[string]string{"api.test:" + p: "127.0.0.1:" + p, "other.test:" + p: "127.0.0.1:" + p},
		Issuer:    issuer, UpstreamRoots: roots,
	}
	srv := httptest.NewServer(prx)
	t.Cleanup(srv.Close)
	with := []string{"--proxy", srv.URL, "--proxy-header", "Proxy-Authorization: Bearer berth_sk_test"}

	out, errOut, code := curl(t, append(with, "--cacert", berthCA, "-H", "Authorization: Bearer "+ph, "-H", "X-Token: "+ph+"-other-sandbox-"+ph[:20], "https://api.test:"+p+"/")...)
	if code != 0 || out != "ok" {
		t.Fatalf("curl through the proxy to the secret's host: exit %d, %q\n%s", code, out, errOut)
	}
	if got := api.last(); got != "api.test:"+p+" Bearer "+value+" "+value+"-other-sandbox-"+ph[:20] {
		t.Errorf("the host got %q, want the value where the placeholder stood, and the rest as sent", got)
	}
	_, _, code = curl(t, append(with, "--cacert", berthCA, "-u", "x-access-token:"+ph, "https://api.test:"+p+"/")...)
	if want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+value)); code != 0 || !strings.Contains(api.last(), want) {
		t.Errorf("Basic credentials: exit %d, the host got %q, want %q", code, api.last(), want)
	}
	// curl trusting only the host's own authority: what it meets is berth's.
	if _, errOut, code := curl(t, append(with, "--cacert", ca.file, "https://api.test:"+p+"/")...); code == 0 {
		t.Errorf("curl verified the secret's host against the host's own authority: the proxy did not stand in for it\n%s", errOut)
	}
	// Another host: the tunnel carries the placeholder as it is.
	if out, errOut, code := curl(t, append(with, "--cacert", ca.file, "-H", "Authorization: Bearer "+ph, "https://other.test:"+p+"/")...); code != 0 || out != "ok" {
		t.Fatalf("curl to another host: exit %d %q\n%s", code, out, errOut)
	}
	if got := api.last(); got != "other.test:"+p+" Bearer "+ph+" " {
		t.Errorf("another host got %q, want the placeholder untouched", got)
	}

	// A secret's host whose certificate the proxy cannot verify gets nothing.
	bad := ca.recorder(t, "untrusted.test")
	prx2 := *prx
	prx2.UpstreamRoots = x509.NewCertPool() // trusts nothing
	badRule, _ := egress.ParseRule("untrusted.test:" + strconv.Itoa(bad.port))
	prx2.Authenticate = func(context.Context, string) (Caller, error) {
		return Caller{Sandbox: "sbx_test", Policy: policy(t, "untrusted.test:"+strconv.Itoa(bad.port)),
			Secrets: []Replacement{{Hosts: []egress.Rule{badRule}, Placeholder: ph, Value: secret.New(value)}}}, nil
	}
	prx2.ConnectTo = map[string]string{"untrusted.test:" + strconv.Itoa(bad.port): "127.0.0.1:" + strconv.Itoa(bad.port)}
	srv2 := httptest.NewServer(&prx2)
	t.Cleanup(srv2.Close)
	out, _, code = curl(t, "--proxy", srv2.URL, "--cacert", berthCA, "-H", "Authorization: Bearer "+ph, "https://untrusted.test:"+strconv.Itoa(bad.port)+"/")
	if code != 0 || !strings.Contains(out, "certificate") || bad.last() != "" {
		t.Errorf("a host the proxy cannot verify: exit %d, %q; it got %q", code, out, bad.last())
	}
}

// FuzzReplaceSecrets: whatever a sandbox sends in a header (its values
// are untrusted, Basic credentials decoded), replacing never fails, a
// value that holds no placeholder (plain or in Basic) is left as sent,
// and no placeholder is left where it stood.
func FuzzReplaceSecrets(f *testing.F) {
	const ph = "berth-placeholder-abcdefabcdefabcdefabcdefabcdefab"
	for _, v := range []string{"Bearer " + ph, "Basic " + base64.StdEncoding.EncodeToString([]byte("x:"+ph)), "Basic !!!", "token " + ph + ph, "plain"} {
		f.Add(v)
	}
	secrets := []Replacement{{Placeholder: ph, Value: secret.New("s3cr3t")}}
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{"Authorization": {v}, "X-Token": {v}}
		replaceSecrets(h, secrets)
		for _, got := range []string{h.Get("Authorization"), h.Get("X-Token")} {
			if strings.Contains(got, ph) {
				t.Fatalf("%q kept the placeholder: %q", v, got)
			}
			holds := strings.Contains(v, ph)
			if scheme, cred, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "basic") {
				if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred)); err == nil && strings.Contains(string(raw), ph) {
					holds = true
				}
			}
			if !holds && got != v {
				t.Fatalf("%q, which holds no placeholder, became %q", v, got)
			}
		}
	})
}

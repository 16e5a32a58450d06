package entrypoint_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testCA is a certificate authority of a test's own, as the deployment's.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
}

func newTestCA(t *testing.T, name string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{cert: cert, key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// serverCert is a certificate for 127.0.0.1 and localhost that ca signed.
func (ca testCA) serverCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// trustedBy reports whether a pool of the PEM certificates in bundle verifies
// a certificate ca signed.
func (ca testCA) trustedBy(t *testing.T, bundle []byte) bool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Errorf("no certificate in the bundle parses")
		return false
	}
	_, err := ca.serverCert(t).Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost"})
	return err == nil
}

// caVars are the variables berth-init points at the CA's files.
var caVars = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT", "NODE_EXTRA_CA_CERTS"}

// lookupEnv is the value of name in envv, as the program gets it.
func lookupEnv(envv []string, name string) (string, bool) {
	for _, kv := range slices.Backward(envv) {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// caDirs are the berth-ca-* directories under parent.
func caDirs(t *testing.T, parent string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(parent, "berth-ca-*"))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// systemTrustStore is the trust store berth-init is to start bundle.pem
// with when SSL_CERT_FILE names none; nil when the machine has none.
func systemTrustStore(t *testing.T) []byte {
	t.Helper()
	for _, name := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"} {
		if b, err := os.ReadFile(name); err == nil {
			return b
		}
	}
	t.Log("no system trust store on this machine: bundle.pem is the CA alone")
	return nil
}

// caAgentRun is an agent run (pi) with BERTH_CA_CERTS set to certs and
// XDG_RUNTIME_DIR a directory of the test's, which it returns.
func caAgentRun(t *testing.T, certs string) (*harness, string) {
	t.Helper()
	h, _ := agentRun(t, "pi", "pi", "exit 0")
	run := t.TempDir()
	h.vars["XDG_RUNTIME_DIR"] = run
	h.vars["BERTH_CA_CERTS"] = certs
	return h, run
}

// execEnv runs h's berth-init and returns the environment the agent was
// exec'd with.
func execEnv(t *testing.T, h *harness) []string {
	t.Helper()
	if code := h.main(); code != 126 {
		t.Fatalf("Main = %d, want 126 (the exec stub returned); stderr:\n%s", code, h.stderr.String())
	}
	if len(h.execs) != 1 {
		t.Fatalf("exec calls = %d, want 1", len(h.execs))
	}
	return h.execs[0].envv
}

// TestAgentRunTrustsTheDeploymentCA: with BERTH_CA_CERTS (two CAs), the
// agent is exec'd with the clients' variables naming bundle.pem, the
// system's trust store and then the CAs, and NODE_EXTRA_CA_CERTS naming
// extra.pem, the earlier NODE_EXTRA_CA_CERTS file's certificates and then
// the CAs; both in a private directory under XDG_RUNTIME_DIR, readable,
// and BERTH_CA_CERTS itself gone.
func TestAgentRunTrustsTheDeploymentCA(t *testing.T) {
	ca, ca2, nodeCA := newTestCA(t, "berth deployment CA"), newTestCA(t, "second CA"), newTestCA(t, "node's CA")
	h, run := caAgentRun(t, ca.pem+"\n"+ca2.pem)
	nodeFile := filepath.Join(t.TempDir(), "node-extra.pem")
	write(t, nodeFile, nodeCA.pem)
	h.vars["NODE_EXTRA_CA_CERTS"] = nodeFile
	envv := execEnv(t, h)

	dirs := caDirs(t, run)
	if len(dirs) != 1 {
		t.Fatalf("berth-ca-* directories under XDG_RUNTIME_DIR: %q, want one", dirs)
	}
	dir := dirs[0]
	bundle, extra := filepath.Join(dir, "bundle.pem"), filepath.Join(dir, "extra.pem")
	want := map[string]string{"NODE_EXTRA_CA_CERTS": extra}
	for _, name := range caVars[:5] {
		want[name] = bundle
	}
	for _, name := range caVars {
		if got, _ := lookupEnv(envv, name); got != want[name] {
			t.Errorf("agent's %s = %q, want %q", name, got, want[name])
		}
	}
	if v, ok := lookupEnv(envv, "BERTH_CA_CERTS"); ok {
		t.Errorf("agent's environment has BERTH_CA_CERTS=%.40q…, want it left out", v)
	}
	if _, ok := lookupEnv(envv, "BERTH_API_KEY"); !ok {
		t.Errorf("agent's environment lost BERTH_API_KEY: the rest must stay")
	}

	modes := map[string]os.FileMode{dir: os.ModeDir | 0o700, bundle: 0o644, extra: 0o644}
	for path, mode := range modes {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != mode {
			t.Errorf("%s: %v, %v; want %v", path, fi.Mode(), err, mode)
		}
	}
	certs := ca.pem + ca2.pem
	gotBundle, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	system := string(systemTrustStore(t))
	if system != "" && !strings.HasSuffix(system, "\n") {
		system += "\n"
	}
	if string(gotBundle) != system+certs {
		t.Errorf("bundle.pem (%d bytes) is not the system's trust store (%d bytes) followed by the CAs (%d bytes)", len(gotBundle), len(system), len(certs))
	}
	for _, c := range []testCA{ca, ca2} {
		if !c.trustedBy(t, gotBundle) {
			t.Errorf("a pool of bundle.pem does not trust %s", c.cert.Subject.CommonName)
		}
	}
	gotExtra, err := os.ReadFile(extra)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(nodeCA.pem+certs, string(gotExtra)); diff != "" {
		t.Errorf("extra.pem: want NODE_EXTRA_CA_CERTS's file, then the CAs (-want +got):\n%s", diff)
	}
	if !nodeCA.trustedBy(t, gotExtra) || !ca.trustedBy(t, gotExtra) {
		t.Errorf("a pool of extra.pem does not trust both node's CA and the deployment's")
	}
	if !strings.Contains(h.stderr.String(), "berth-init: trusting the deployment's CA (BERTH_CA_CERTS): "+bundle) {
		t.Errorf("stderr does not say where the CA's files are:\n%s", h.stderr.String())
	}
}

// TestAgentRunCABundleBase: bundle.pem starts with the file the
// environment's own SSL_CERT_FILE names when it can be read (even without
// a final newline), else with the system's trust store; a
// NODE_EXTRA_CA_CERTS that cannot be read leaves extra.pem the CA alone;
// without XDG_RUNTIME_DIR the files go under /tmp.
func TestAgentRunCABundleBase(t *testing.T) {
	ca, own := newTestCA(t, "berth deployment CA"), newTestCA(t, "the image's CA")
	ownFile := filepath.Join(t.TempDir(), "own.pem")
	write(t, ownFile, strings.TrimSuffix(own.pem, "\n"))
	tests := []struct {
		name, sslCertFile, run string
		wantBase               []byte
		wantLog                string
	}{
		{name: "SSL_CERT_FILE", sslCertFile: ownFile, wantBase: []byte(own.pem)},
		{name: "SSL_CERT_FILE unreadable", sslCertFile: "/nonexistent/ca.pem", wantBase: systemTrustStore(t),
			wantLog: "SSL_CERT_FILE /nonexistent/ca.pem cannot be read"},
		{name: "SSL_CERT_FILE a directory", sslCertFile: t.TempDir(), wantBase: systemTrustStore(t)},
		{name: "no XDG_RUNTIME_DIR", run: "/nonexistent/run", sslCertFile: ownFile, wantBase: []byte(own.pem)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, run := caAgentRun(t, ca.pem)
			h.vars["SSL_CERT_FILE"] = tt.sslCertFile
			h.vars["NODE_EXTRA_CA_CERTS"] = "/nonexistent/node.pem"
			if tt.run != "" {
				h.vars["XDG_RUNTIME_DIR"], run = tt.run, "/tmp"
			}
			envv := execEnv(t, h)
			bundle, _ := lookupEnv(envv, "SSL_CERT_FILE")
			dir := filepath.Dir(bundle)
			if tt.run != "" {
				t.Cleanup(func() { os.RemoveAll(dir) })
			}
			if filepath.Dir(dir) != run || !strings.HasPrefix(filepath.Base(dir), "berth-ca-") {
				t.Fatalf("SSL_CERT_FILE = %q, want bundle.pem in a berth-ca-* directory under %s", bundle, run)
			}
			got, err := os.ReadFile(bundle)
			if err != nil {
				t.Fatal(err)
			}
			base := string(tt.wantBase)
			if base != "" && !strings.HasSuffix(base, "\n") {
				base += "\n"
			}
			if string(got) != base+ca.pem {
				t.Errorf("bundle.pem (%d bytes): want the base (%d bytes) then the CA (%d bytes)", len(got), len(tt.wantBase), len(ca.pem))
			}
			if !ca.trustedBy(t, got) || tt.name == "SSL_CERT_FILE" && !own.trustedBy(t, got) {
				t.Errorf("a pool of bundle.pem does not trust the CA and the base's")
			}
			extra, _ := lookupEnv(envv, "NODE_EXTRA_CA_CERTS")
			if got, err := os.ReadFile(extra); err != nil || string(got) != ca.pem {
				t.Errorf("extra.pem = %q, %v; want the CA alone", got, err)
			}
			if !strings.Contains(h.stderr.String(), tt.wantLog) || !strings.Contains(h.stderr.String(), "NODE_EXTRA_CA_CERTS /nonexistent/node.pem cannot be read") {
				t.Errorf("stderr does not say what it could not read:\n%s", h.stderr.String())
			}
		})
	}
}

// TestAgentRunRefusesABadCA: a BERTH_CA_CERTS that is not one or more
// certificates in PEM within 64 KiB stops the start (64) before anything
// is written, naming the variable and what is wrong, and never repeating
// a key it was handed; in every agent-run mode.
func TestAgentRunRefusesABadCA(t *testing.T) {
	ca := newTestCA(t, "berth deployment CA")
	keyDER, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		t.Fatal(err)
	}
	key := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	junk := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER at all")}))
	tests := []struct {
		name, certs, want string
	}{
		{"not PEM", "MIIBhTCCASugAwIBAgIBATAKBggqhkjOPQQDAjAeMRwwGgYDVQQDExNiZXJ0aA==", "BERTH_CA_CERTS: holds no PEM block"},
		{"blank", " \n", "BERTH_CA_CERTS: holds no PEM block"},
		{"private key", key, `BERTH_CA_CERTS: PEM block 1 is a "PRIVATE KEY" block, want CERTIFICATE blocks only`},
		{"key after the CA", ca.pem + key, `BERTH_CA_CERTS: PEM block 2 is a "PRIVATE KEY" block`},
		{"garbage DER", junk, "BERTH_CA_CERTS: PEM block 1 is not a certificate: x509: "},
		{"cut short", ca.pem + ca.pem[:len(ca.pem)/2], "BERTH_CA_CERTS: holds a PEM block that does not decode"},
		{"too large", strings.Repeat(ca.pem, 64<<10/len(ca.pem)+1), "BERTH_CA_CERTS: is 6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, run := caAgentRun(t, tt.certs)
			if code := h.main(); code != 64 {
				t.Errorf("Main = %d, want 64", code)
			}
			if !strings.Contains(h.stderr.String(), "berth-init: "+tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, h.stderr.String())
			}
			if tt.name == "too large" && !strings.Contains(h.stderr.String(), "more than the 64 KiB it may hold") {
				t.Errorf("stderr does not name the limit:\n%s", h.stderr.String())
			}
			if strings.Contains(h.stderr.String(), strings.Split(key, "\n")[1]) {
				t.Errorf("stderr shows the key:\n%s", h.stderr.String())
			}
			entries, _ := os.ReadDir(h.home)
			if len(h.execs) != 0 || len(entries) != 0 || len(caDirs(t, run)) != 0 {
				t.Errorf("exec'd %v, wrote %d entries in HOME and %q; want nothing", h.execs, len(entries), caDirs(t, run))
			}
		})
	}

	t.Run("in-machine", func(t *testing.T) {
		g := newFakeGateway(t, testPrompt)
		h, work := inMachine(t, g)
		h.vars["BERTH_CA_CERTS"] = key
		if code := h.inMachine(work); code != 64 {
			t.Errorf("Main = %d, want 64", code)
		}
		if want := `berth-init: BERTH_CA_CERTS: PEM block 1 is a "PRIVATE KEY" block`; !strings.Contains(h.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, h.stderr.String())
		}
		if calls, _, exits := g.got(); calls != 0 || len(exits) != 0 || len(h.runs) != 0 {
			t.Errorf("went on: %d task calls, exit reports %v, ran %v", calls, exits, h.runs)
		}
	})
}

// TestAgentRunWithoutCA: without BERTH_CA_CERTS, or with it empty, the
// agent's environment keeps the CA variables it had and gains none, and
// no file is written.
func TestAgentRunWithoutCA(t *testing.T) {
	for _, set := range []bool{false, true} {
		h, run := caAgentRun(t, "")
		if !set {
			delete(h.vars, "BERTH_CA_CERTS")
		}
		h.vars["SSL_CERT_FILE"] = "/etc/image/ca.pem"
		envv := execEnv(t, h)
		for _, name := range caVars {
			got, ok := lookupEnv(envv, name)
			if want, had := h.vars[name]; got != want || ok != had {
				t.Errorf("BERTH_CA_CERTS set %v: agent's %s = %q (set %v), want it as it was, %q (set %v)", set, name, got, ok, want, had)
			}
		}
		if dirs := caDirs(t, run); len(dirs) != 0 || strings.Contains(h.stderr.String(), "deployment's CA") {
			t.Errorf("BERTH_CA_CERTS set %v: wrote %q, or spoke of a CA:\n%s", set, dirs, h.stderr.String())
		}
	}
}

// TestInMachineRunTrustsTheDeploymentCA: the agent of an in-machine run
// finds the CA's files while it runs and is handed the variables; its
// clone is berth-init's and keeps the environment's trust; the files are
// removed once the agent ended.
func TestInMachineRunTrustsTheDeploymentCA(t *testing.T) {
	ca := newTestCA(t, "berth deployment CA")
	g := newFakeGateway(t, testPrompt)
	h, work := inMachine(t, g)
	run, seen := t.TempDir(), t.TempDir()
	h.vars["BERTH_CA_CERTS"] = ca.pem
	h.vars["XDG_RUNTIME_DIR"] = run
	h.vars["CA_SEEN"] = seen
	bin, _, _ := strings.Cut(h.vars["PATH"], ":")
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte(`#!/bin/sh
cp "$SSL_CERT_FILE" "$CA_SEEN/bundle.pem" && cp "$NODE_EXTRA_CA_CERTS" "$CA_SEEN/extra.pem" || exit 8
`+agentScript+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code := h.inMachine(work, "-p"); code != 0 {
		t.Fatalf("Main = %d, want 0; stderr:\n%s", code, h.stderr.String())
	}
	i := slices.IndexFunc(h.runs, func(argv []string) bool { return argv[0] == "claude" })
	if i < 0 {
		t.Fatalf("the agent did not run: %q", h.runs)
	}
	envv := h.envs[i]
	bundle, _ := lookupEnv(envv, "SSL_CERT_FILE")
	if filepath.Base(bundle) != "bundle.pem" || !strings.HasPrefix(bundle, run+"/berth-ca-") {
		t.Errorf("agent's SSL_CERT_FILE = %q, want bundle.pem under XDG_RUNTIME_DIR", bundle)
	}
	for _, name := range caVars {
		if got, _ := lookupEnv(envv, name); filepath.Dir(got) != filepath.Dir(bundle) {
			t.Errorf("agent's %s = %q, want a file beside %s", name, got, bundle)
		}
	}
	if _, ok := lookupEnv(envv, "BERTH_CA_CERTS"); ok {
		t.Errorf("agent's environment has BERTH_CA_CERTS")
	}
	for _, name := range []string{"bundle.pem", "extra.pem"} {
		if b, err := os.ReadFile(filepath.Join(seen, name)); err != nil || !strings.HasSuffix(string(b), ca.pem) {
			t.Errorf("the agent's %s: %v; want it ending with the CA", name, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(seen, "extra.pem")); string(b) != ca.pem {
		t.Errorf("the agent's extra.pem = %q, want the CA alone (no NODE_EXTRA_CA_CERTS before)", b)
	}
	clone := slices.IndexFunc(h.runs, func(argv []string) bool { return slices.Contains(argv, "clone") })
	if clone < 0 {
		t.Fatalf("no clone: %q", h.runs)
	}
	if v, ok := lookupEnv(h.envs[clone], "GIT_SSL_CAINFO"); ok {
		t.Errorf("berth-init's clone has GIT_SSL_CAINFO=%s, want the environment's trust", v)
	}
	if dirs := caDirs(t, run); len(dirs) != 0 {
		t.Errorf("the CA's files are left after the run: %q", dirs)
	}
}

// TestInMachineKelosRunTrustsTheDeploymentCA: a kelos image's entrypoint
// gets the CA's variables in the pod's environment.
func TestInMachineKelosRunTrustsTheDeploymentCA(t *testing.T) {
	ca := newTestCA(t, "berth deployment CA")
	g := newFakeGateway(t, testPrompt)
	h, self, work := kelosInMachine(t, g)
	run := t.TempDir()
	h.vars["BERTH_CA_CERTS"] = ca.pem
	h.vars["XDG_RUNTIME_DIR"] = run
	if code := h.kelos(self, work); code != 0 {
		t.Fatalf("Main = %d, want 0; stderr:\n%s", code, h.stderr.String())
	}
	i := slices.IndexFunc(h.runs, func(argv []string) bool { return argv[0] == kelosEntrypoint })
	if i < 0 {
		t.Fatalf("the entrypoint did not run: %q", h.runs)
	}
	envv := h.envs[i]
	bundle, _ := lookupEnv(envv, "SSL_CERT_FILE")
	if !strings.HasPrefix(bundle, run+"/berth-ca-") {
		t.Errorf("entrypoint's SSL_CERT_FILE = %q, want bundle.pem under XDG_RUNTIME_DIR", bundle)
	}
	for _, name := range caVars {
		if got, ok := lookupEnv(envv, name); !ok || filepath.Dir(got) != filepath.Dir(bundle) {
			t.Errorf("entrypoint's %s = %q, want a file beside %s", name, got, bundle)
		}
	}
	if _, ok := lookupEnv(envv, "BERTH_CA_CERTS"); ok {
		t.Errorf("entrypoint's environment has BERTH_CA_CERTS")
	}
	if got, _ := lookupEnv(envv, "KELOS_MODEL"); got != "claude-sonnet-4-5" {
		t.Errorf("entrypoint's KELOS_MODEL = %q: the pod's environment must stay", got)
	}
}

// TestCATrustedByRealClients: real clients, run with the environment
// berth-init hands the agent, reach a TLS server whose certificate the
// deployment's CA signed (curl through CURL_CA_BUNDLE, git through
// GIT_SSL_CAINFO, Python's ssl through SSL_CERT_FILE, Node through
// NODE_EXTRA_CA_CERTS); with this machine's own environment the same
// client refuses the server's certificate. A client not installed is
// skipped.
func TestCATrustedByRealClients(t *testing.T) {
	ca := newTestCA(t, "berth deployment CA")
	bare := bareRepo(t)
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/git/", &cgi.Handler{
		Path: gitPath, Args: []string{"http-backend"}, Root: "/git",
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(bare), "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1", "HOME=" + filepath.Dir(bare)},
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello through TLS\n") })
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.serverCert(t)}}
	// The plain runs' refused handshakes are expected.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	h, _ := caAgentRun(t, ca.pem)
	agentEnv := execEnv(t, h)
	// Nothing between the client and the loopback server.
	noProxy := []string{"no_proxy=*", "NO_PROXY=*"}
	withCA, plain := slices.Concat(agentEnv, noProxy), slices.Concat(os.Environ(), noProxy)

	tests := []struct {
		client string
		argv   []string
		// failed says whether the plain run failed on the certificate.
		failed func(code int, out string) bool
	}{
		{"curl", []string{"curl", "-q", "-sS", "--fail", "--noproxy", "*", srv.URL + "/"},
			func(code int, out string) bool { return code == 60 }}, // CURLE_PEER_FAILED_VERIFICATION
		{"git", []string{"git", "ls-remote", srv.URL + "/git/app.git"},
			func(code int, out string) bool { return strings.Contains(out, "certificate") }},
		{"python3", []string{"python3", "-c", "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=20)", srv.URL + "/"},
			func(code int, out string) bool { return strings.Contains(out, "CERTIFICATE_VERIFY_FAILED") }},
		{"node", []string{"node", "-e", `require("https").get(process.argv[1], r => process.exit(r.statusCode === 200 ? 0 : 3))` +
			`.on("error", e => { console.error(e.code); process.exit(2) })`, srv.URL + "/"},
			func(code int, out string) bool { return strings.Contains(out, "UNABLE_TO_VERIFY_LEAF_SIGNATURE") }},
	}
	for _, tt := range tests {
		t.Run(tt.client, func(t *testing.T) {
			needCommand(t, tt.client)
			run := func(envv []string) (int, string) {
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, tt.argv[0], tt.argv[1:]...)
				cmd.Env = envv
				cmd.Dir = h.home
				out, err := cmd.CombinedOutput()
				return exitCode(err), string(out)
			}
			if code, out := run(withCA); code != 0 {
				t.Errorf("%s with berth-init's environment: exit %d, want 0:\n%s", tt.client, code, out)
			}
			code, out := run(plain)
			if code == 0 || !tt.failed(code, out) {
				t.Errorf("%s with the machine's own environment: exit %d, want a failure to verify the certificate:\n%s", tt.client, code, out)
			}
		})
	}
}

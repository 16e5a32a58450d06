package proxy

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
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
	"time"

	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/tunnel/tunneltest"
)

// testCA is a certificate authority of the test's own, whose leaf
// certificates name the test's hosts; curl trusts it by --cacert.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its certificate, PEM
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "berth egress test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, file: file}
}

// leafFor is a certificate of the test CA for names.
func (ca *testCA) leafFor(t *testing.T, names ...string) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// server starts an HTTPS server on loopback for names, answering with
// its name and counting its requests.
func (ca *testCA) server(t *testing.T, names ...string) (port int, hits func() int) {
	t.Helper()
	cert := ca.leafFor(t, names...)
	var mu sync.Mutex
	n := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		fmt.Fprintf(w, "hello from %s", r.Host)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// testProxy serves a Proxy on loopback for one sandbox key, its names
// resolved by hosts and its ConnectTo connectTo; it returns the proxy's
// URL and the connections it recorded.
func testProxy(t *testing.T, pol egress.Policy, hosts, connectTo map[string]string) (url string, recorded func() []Connection) {
	t.Helper()
	var mu sync.Mutex
	var recs []Connection
	p := &Proxy{
		Authenticate: func(_ context.Context, h string) (Caller, error) {
			if h != "Basic "+basic("x", "berth_sk_test") && h != "Bearer berth_sk_test" {
				return Caller{}, errors.New("unknown key")
			}
			return Caller{Sandbox: "sbx_test", Policy: pol}, nil
		},
		Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
			a, ok := hosts[host]
			if !ok {
				return nil, errors.New("no such host")
			}
			return []netip.Addr{netip.MustParseAddr(a)}, nil
		},
		Own:       func(a netip.Addr) bool { return a.String() == "198.51.100.7" },
		ConnectTo: connectTo,
		Record:    func(c Connection) { mu.Lock(); recs = append(recs, c); mu.Unlock() },
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL, func() []Connection { mu.Lock(); defer mu.Unlock(); return append([]Connection(nil), recs...) }
}

func basic(user, pass string) string {
	req, _ := http.NewRequest("GET", "http://x", nil)
	req.SetBasicAuth(user, pass)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

// curl runs the real curl through the proxy and returns its output,
// standard error and exit code.
func curl(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command("curl", append([]string{"-sS", "--max-time", "10"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // no proxy of the machine's
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestProxyWithCurl is the proxy as a sandbox's tools meet it, with the
// real curl: HTTPS to a host on the list goes through (the proxy never
// sees inside the TLS: curl verifies the host's certificate against the
// test CA); a host off the list, an unknown key, an address the policy
// does not name and names that resolve to the host's own, loopback,
// private or metadata addresses are refused with the reason in curl's
// error; a plain http:// request is forwarded; every connection is
// recorded with its bytes.
func TestProxyWithCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	ca := newTestCA(t)
	port, hits := ca.server(t, "allowed.test", "other.test")
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" {
			t.Error("the proxy passed its own credentials on to the host")
		}
		fmt.Fprint(w, "plain hello")
	}))
	t.Cleanup(plain.Close)
	plainPort := plain.Listener.Addr().(*net.TCPAddr).Port
	p := strconv.Itoa(port)
	// The test's hosts live on loopback, which only a rule naming the
	// address reaches: allowed.test's rule and 127.0.0.1's together.
	pol := policy(t, "allowed.test:"+p, "127.0.0.1:"+p, "plain.test:"+strconv.Itoa(plainPort), "127.0.0.1:"+strconv.Itoa(plainPort),
		"loop.test:"+p, "meta.test:"+p, "own.test:"+p)
	proxy, recorded := testProxy(t, pol, map[string]string{
		"allowed.test": "127.0.0.1", "other.test": "127.0.0.1", "plain.test": "127.0.0.1",
		"loop.test": "127.0.0.2", "meta.test": "169.254.169.254", "own.test": "198.51.100.7",
	}, nil)
	with := []string{"--proxy", proxy, "--proxy-user", "x:berth_sk_test", "--cacert", ca.file}

	out, errOut, code := curl(t, append(with, "https://allowed.test:"+p+"/")...)
	if code != 0 || out != "hello from allowed.test:"+p {
		t.Fatalf("curl https://allowed.test through the proxy: exit %d, %q %s", code, out, errOut)
	}
	out, errOut, code = curl(t, append(with, "http://plain.test:"+strconv.Itoa(plainPort)+"/")...)
	if code != 0 || out != "plain hello" {
		t.Errorf("curl http://plain.test through the proxy: exit %d, %q %s", code, out, errOut)
	}

	for _, c := range []struct {
		name, url, why string
		args           []string
	}{
		{"a host off the list", "https://other.test:" + p + "/", "not in this sandbox's egress policy", with},
		{"the allowed host on another port", "https://allowed.test:" + strconv.Itoa(plainPort) + "/", "not in this sandbox's egress policy", with},
		{"a name that resolves to loopback", "https://loop.test:" + p + "/", "may not reach", with},
		{"a name that resolves to the metadata service", "https://meta.test:" + p + "/", "may not reach", with},
		{"a name that resolves to the gateway's host", "https://own.test:" + p + "/", "may not reach", with},
		{"an address no rule names", "https://127.0.0.2:" + p + "/", "not in this sandbox's egress policy", with},
		{"no key", "https://allowed.test:" + p + "/", "407", []string{"--proxy", proxy, "--cacert", ca.file}},
		{"another key", "https://allowed.test:" + p + "/", "407", []string{"--proxy", proxy, "--proxy-user", "x:berth_sk_other", "--cacert", ca.file}},
	} {
		before := hits()
		_, errOut, code := curl(t, append(c.args, "-v", c.url)...)
		if code == 0 || !strings.Contains(errOut, c.why) {
			t.Errorf("%s: curl exit %d, stderr does not say %q:\n%s", c.name, code, c.why, lastLines(errOut, 6))
		}
		if hits() != before {
			t.Errorf("%s: the host was reached", c.name)
		}
	}

	recs := recorded()
	var allowed, refused int
	for _, r := range recs {
		if r.Allowed {
			allowed++
			if r.Up == 0 || r.Down == 0 || r.Sandbox != "sbx_test" {
				t.Errorf("an allowed connection recorded %+v, want its bytes and sandbox", r)
			}
		} else {
			refused++
			if r.Why == "" {
				t.Errorf("a refusal recorded without its reason: %+v", r)
			}
		}
	}
	if allowed != 2 || refused != 6 {
		t.Errorf("recorded %d allowed and %d refused, want 2 and 6: %+v", allowed, refused, recs)
	}
}

// TestConnectTo: a name the operator sends elsewhere (ConnectTo, as
// curl's --connect-to) is reached at that address under its own name and
// port, loopback included, and only while the policy allows the name:
// the same server under a name off the list, or the name on a port the
// mapping does not cover, is refused and never reached.
func TestConnectTo(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	ca := newTestCA(t)
	port, hits := ca.server(t, "mirror.test", "hidden.test")
	to := "127.0.0.1:" + strconv.Itoa(port)
	proxy, recorded := testProxy(t, policy(t, "mirror.test", "mirror.test:8443"), map[string]string{"mirror.test": "127.0.0.1"},
		map[string]string{"mirror.test:443": to, "hidden.test:443": to})
	with := []string{"--proxy", proxy, "--proxy-user", "x:berth_sk_test", "--cacert", ca.file}
	out, errOut, code := curl(t, append(with, "https://mirror.test/")...)
	if code != 0 || out != "hello from mirror.test" {
		t.Fatalf("curl https://mirror.test through the proxy: exit %d, %q %s", code, out, errOut)
	}
	// A tunnel is recorded once both its directions end, after curl's.
	recs := recorded()
	for deadline := time.Now().Add(5 * time.Second); len(recs) == 0 && time.Now().Before(deadline); recs = recorded() {
		time.Sleep(5 * time.Millisecond)
	}
	if len(recs) != 1 || !recs[0].Allowed || recs[0].Addr != to || recs[0].Host != "mirror.test" || recs[0].Port != 443 {
		t.Errorf("recorded %+v, want one allowed connection to mirror.test:443 at %s", recs, to)
	}
	for _, c := range []struct{ url, why string }{
		{"https://hidden.test/", "not in this sandbox's egress policy"},
		{"https://mirror.test:8443/", "may not reach"}, // resolved, to loopback
	} {
		before := hits()
		_, errOut, code := curl(t, append(with, "-v", c.url)...)
		if code == 0 || !strings.Contains(errOut, c.why) {
			t.Errorf("%s: curl exit %d, stderr does not say %q:\n%s", c.url, code, c.why, lastLines(errOut, 6))
		}
		if hits() != before {
			t.Errorf("%s: the host was reached", c.url)
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func policy(t *testing.T, rules ...string) egress.Policy {
	t.Helper()
	p, err := egress.ParsePolicy("", rules)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// listenPort serves every connection to serve on a loopback port until
// the test ends (tunneltest.Listen) and returns the port.
func listenPort(t *testing.T, serve func(net.Conn)) int {
	t.Helper()
	_, port, err := net.SplitHostPort(tunneltest.Listen(t, serve))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTunnelIdle: a CONNECT tunnel that carries nothing for the idle
// timeout is closed; one whose bytes keep moving (a trickle far smaller
// than any copy's chunk) is not. The proxy learns of them from the
// client's socket.
func TestTunnelIdle(t *testing.T) {
	port := listenPort(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
	pol := policy(t, "127.0.0.1:"+strconv.Itoa(port))
	p := &Proxy{
		Authenticate: func(context.Context, string) (Caller, error) { return Caller{Sandbox: "sbx_test", Policy: pol}, nil },
		IdleTimeout:  300 * time.Millisecond,
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	open := func() net.Conn {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", port, port)
		buf := make([]byte, len("HTTP/1.1 200 Connection established\r\n\r\n"))
		if _, err := io.ReadFull(c, buf); err != nil || !strings.HasPrefix(string(buf), "HTTP/1.1 200") {
			t.Fatalf("CONNECT: %q, %v", buf, err)
		}
		return c
	}

	quiet := open()
	defer quiet.Close()
	quiet.SetReadDeadline(time.Now().Add(5 * time.Second))
	began := time.Now()
	if _, err := quiet.Read(make([]byte, 1)); err == nil {
		t.Fatal("a quiet tunnel read a byte")
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("a quiet tunnel closed after %s, want about the idle timeout", took)
	}

	busy := open()
	defer busy.Close()
	for i := range 12 { // 1.2 s of a byte every 100 ms: four idle timeouts
		if _, err := busy.Write([]byte{byte(i)}); err != nil {
			t.Fatalf("a busy tunnel closed after %d bytes: %v", i, err)
		}
		busy.SetReadDeadline(time.Now().Add(2 * time.Second))
		b := make([]byte, 1)
		if _, err := io.ReadFull(busy, b); err != nil || b[0] != byte(i) {
			t.Fatalf("a busy tunnel after %d bytes: %v", i, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTunnelDownByStack: 8 MiB down a tunnel and 1 MiB up arrive whole
// and are recorded, whether the caller reads with this host's kernel
// (copied through buffers) or runs a network stack of its own (OwnStack:
// handed on by splice, no buffer taken for the download).
func TestTunnelDownByStack(t *testing.T) {
	down := make([]byte, 8<<20)
	up := make([]byte, 1<<20)
	rand.Read(down)
	rand.Read(up)
	heard := make(chan []byte, 4)
	port := listenPort(t, func(c net.Conn) {
		wrote := make(chan struct{})
		go func() { _, _ = c.Write(down); c.(*net.TCPConn).CloseWrite(); close(wrote) }()
		b, _ := io.ReadAll(c)
		heard <- b
		<-wrote // the connection closes when this returns
	})
	pol := policy(t, "127.0.0.1:"+strconv.Itoa(port))
	for _, ownStack := range []bool{false, true} {
		t.Run(fmt.Sprintf("own stack %v", ownStack), func(t *testing.T) {
			recs := make(chan Connection, 1)
			p := &Proxy{
				Authenticate: func(context.Context, string) (Caller, error) {
					return Caller{Sandbox: "sbx_test", Policy: pol, OwnStack: ownStack}, nil
				},
				Record: func(c Connection) { recs <- c },
			}
			srv := httptest.NewServer(p)
			defer srv.Close()
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			taken := buffersTaken.Load()
			fmt.Fprintf(c, "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", port, port)
			const ok = "HTTP/1.1 200 Connection established\r\n\r\n"
			buf := make([]byte, len(ok))
			if _, err := io.ReadFull(c, buf); err != nil || string(buf) != ok {
				t.Fatalf("CONNECT: %q, %v", buf, err)
			}
			go func() { _, _ = c.Write(up); c.(*net.TCPConn).CloseWrite() }()
			got, err := io.ReadAll(c)
			if err != nil || !bytes.Equal(got, down) {
				t.Fatalf("down the tunnel: %d bytes of %d, equal %v: %v", len(got), len(down), bytes.Equal(got, down), err)
			}
			if b := <-heard; !bytes.Equal(b, up) {
				t.Fatalf("up the tunnel: %d bytes of %d", len(b), len(up))
			}
			rec := <-recs
			if rec.Down != int64(len(down)) || rec.Up != int64(len(up)) {
				t.Errorf("recorded %d down and %d up, want %d and %d", rec.Down, rec.Up, len(down), len(up))
			}
			// The upload is copied either way: at most a buffer for each
			// of its reads (1 MiB: a handful) and its end.
			n := buffersTaken.Load() - taken
			if ownStack && n > int64(len(up)/(64<<10))+2 {
				t.Errorf("%d copy buffers taken with the download handed on by splice", n)
			}
			if !ownStack && n < int64(len(down)/copySize) {
				t.Errorf("%d copy buffers taken for %d bytes copied down, want at least %d", n, len(down), len(down)/copySize)
			}
		})
	}
}

// TestHostAddrs: the host's own addresses, as its interfaces say, and
// none other.
func TestHostAddrs(t *testing.T) {
	own, err := HostAddrs()
	if err != nil {
		t.Fatal(err)
	}
	if !own(netip.MustParseAddr("127.0.0.1")) || !own(netip.MustParseAddr("::ffff:127.0.0.1")) {
		t.Error("loopback is not among the host's addresses")
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && !own(p.Addr()) {
			t.Errorf("%s, an interface's, is not the host's own", p.Addr())
		}
	}
	if own(netip.MustParseAddr("192.0.2.99")) {
		t.Error("a documentation address is the host's own")
	}
}

// FuzzTarget: a proxy request's authority or URL host, as a sandbox
// sends it, never panics the proxy, and what it accepts is in bounds:
// a lower-case host of at most 253 bytes and a port from 1 to 65535.
func FuzzTarget(f *testing.F) {
	for _, s := range []string{"a.com:443", "[::1]:22", "A.COM.", "a.com", "a.com:0", ":443", "[::1", "a.com:99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		host, port, err := target(s, 443)
		if err != nil {
			return
		}
		if host == "" || len(host) > 253 || host != strings.ToLower(host) || port < 1 || port > 65535 {
			t.Errorf("target(%q) = %q, %d: out of bounds", s, host, port)
		}
	})
}

// TestParseConnectToAndHosts: the operator's settings are read as
// written, and a bad pair is named.
func TestParseConnectToAndHosts(t *testing.T) {
	to, err := ParseConnectTo(" Mirror.Test:443=127.0.0.1:8443, [::1]:80 , pypi.test:443=[::1]:9443")
	if err == nil {
		t.Errorf("a pair without = read as %v", to)
	}
	to, err = ParseConnectTo(" Mirror.Test:443=127.0.0.1:8443, pypi.test:443=[::1]:9443,")
	if err != nil || len(to) != 2 || to["mirror.test:443"] != "127.0.0.1:8443" || to["pypi.test:443"] != "[::1]:9443" {
		t.Errorf("ParseConnectTo: %v, %v", to, err)
	}
	for _, bad := range []string{"mirror.test=127.0.0.1:1", "mirror.test:443=mirror:1", "mirror.test:443=127.0.0.1", "mirror.test:0=127.0.0.1:1"} {
		if _, err := ParseConnectTo(bad); err == nil || !strings.Contains(err.Error(), strings.SplitN(bad, ",", 2)[0]) {
			t.Errorf("ParseConnectTo(%q): %v, want an error naming it", bad, err)
		}
	}
	hosts, err := ParseHosts("meta.test=169.254.169.254, Self.Test.=127.0.0.1,self.test=::ffff:10.0.0.1")
	if err != nil || len(hosts) != 2 || hosts["meta.test"][0].String() != "169.254.169.254" ||
		len(hosts["self.test"]) != 2 || hosts["self.test"][1].String() != "10.0.0.1" {
		t.Errorf("ParseHosts: %v, %v", hosts, err)
	}
	for _, bad := range []string{"meta.test", "=127.0.0.1", "meta.test=metadata"} {
		if _, err := ParseHosts(bad); err == nil {
			t.Errorf("ParseHosts(%q) read", bad)
		}
	}
}

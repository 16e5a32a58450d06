package tunnel_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/tunnel"
	"berth.dev/berth/internal/tunnel/tunneltest"
)

// gateway is a minimal gateway: the tunnel's server half in front of the
// backend at addr. Each tunnel's Stats arrive on stats.
type gateway struct {
	url   string
	stats chan tunnel.Stats
	tls   *tls.Config
}

func newGateway(t testing.TB, addr string, o tunnel.Options, useTLS bool) *gateway {
	t.Helper()
	g := &gateway{stats: make(chan tunnel.Stats, 16)}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := tunnel.CheckRequest(r); err != nil {
			tunnel.SetUpgradeHeaders(w.Header())
			http.Error(w, err.Error(), http.StatusUpgradeRequired)
			return
		}
		backend, err := net.Dial("tcp", addr)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		// Not r.Context(): net/http cancels it when the client half-closes
		// before the takeover.
		st, err := tunnel.Serve(context.WithoutCancel(r.Context()), w, r, backend, o)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		g.stats <- st
	})
	var srv *httptest.Server
	if useTLS {
		srv = httptest.NewTLSServer(h)
		g.tls = srv.Client().Transport.(*http.Transport).TLSClientConfig
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	g.url = srv.URL + "/sandbox/v1/dev/tcp/2222"
	return g
}

func (g *gateway) dial(t testing.TB) *tunnel.Conn {
	t.Helper()
	d := &tunnel.Dialer{TLSConfig: g.tls}
	c, err := d.Dial(context.Background(), g.url, http.Header{"Authorization": {"Bearer k"}})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (g *gateway) wait(t *testing.T) tunnel.Stats {
	t.Helper()
	select {
	case st := <-g.stats:
		return st
	case <-time.After(10 * time.Second):
		t.Fatal("the tunnel did not end within 10s")
	}
	return tunnel.Stats{}
}

// TestEchoCountsBytes: bytes go both ways, a half-close is passed on, and
// the tunnel counts what it carried.
func TestEchoCountsBytes(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[useTLS], func(t *testing.T) {
			g := newGateway(t, tunneltest.Listen(t, tunneltest.Echo), tunnel.Options{}, useTLS)
			c := g.dial(t)
			if _, err := io.WriteString(c, "hello, sandbox"); err != nil {
				t.Fatal(err)
			}
			if err := c.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			if err != nil || string(got) != "hello, sandbox" {
				t.Fatalf("read back %q, %v; want the echo then EOF", got, err)
			}
			want := tunnel.Stats{Up: 14, Down: 14, End: tunnel.EndClosed}
			if st := g.wait(t); st != want {
				t.Errorf("Stats = %+v, want %+v", st, want)
			}
		})
	}
}

// TestHalfClose: the client says it is done sending; the sandbox reads to
// EOF, then answers, and the answer still arrives.
func TestHalfClose(t *testing.T) {
	g := newGateway(t, tunneltest.Listen(t, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		fmt.Fprintf(c, "got %d bytes", n)
	}), tunnel.Options{}, false)
	c := g.dial(t)
	payload := bytes.Repeat([]byte("x"), 1<<20)
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "got 1048576 bytes" {
		t.Fatalf("answer %q, %v", got, err)
	}
	if st := g.wait(t); st.Up != 1<<20 || st.Down != int64(len(got)) {
		t.Errorf("Stats = %+v, want %d up and %d down", st, 1<<20, len(got))
	}
}

// TestBytesBehindTheHead: what arrives in the same packets as the HTTP
// heads is not lost on either side: the sandbox's greeting sent at once
// (as sshd does) and the client's first bytes sent with its request.
func TestBytesBehindTheHead(t *testing.T) {
	addr := tunneltest.Listen(t, func(c net.Conn) {
		io.WriteString(c, "SSH-2.0-test\r\n")
		tunneltest.Echo(c)
	})
	g := newGateway(t, addr, tunnel.Options{}, false)
	u := strings.TrimPrefix(g.url, "http://")
	host, path, _ := strings.Cut(u, "/")
	raw, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	req := "GET /" + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: Upgrade\r\nUpgrade: berth-sandbox/1\r\n\r\nearly bytes"
	if _, err := io.WriteString(raw, req); err != nil {
		t.Fatal(err)
	}
	raw.(*net.TCPConn).CloseWrite()
	br := bufio.NewReader(raw)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("answer %v, %v; want 101", resp, err)
	}
	rest, _ := io.ReadAll(br)
	if want := "SSH-2.0-test\r\nearly bytes"; string(rest) != want {
		t.Errorf("stream %q, want %q", rest, want)
	}
}

// TestIdleTimeout: a tunnel with no byte either way closes after the idle
// timeout; one that keeps carrying bytes stays open past it.
func TestIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	g := newGateway(t, tunneltest.Listen(t, tunneltest.Echo), tunnel.Options{IdleTimeout: idle}, false)

	busy := g.dial(t)
	buf := make([]byte, 1)
	start := time.Now()
	var lastByte time.Time
	for time.Since(start) < 3*idle {
		if _, err := busy.Write([]byte{'.'}); err != nil {
			t.Fatalf("after %v of traffic: write: %v", time.Since(start), err)
		}
		if _, err := io.ReadFull(busy, buf); err != nil {
			t.Fatalf("after %v of traffic: read: %v", time.Since(start), err)
		}
		lastByte = time.Now()
		time.Sleep(idle / 5)
	}

	// Now it goes quiet: the gateway closes it.
	_ = busy.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := busy.Read(buf); err == nil {
		t.Fatalf("read %d bytes from a quiet tunnel, want it closed", n)
	}
	if took := time.Since(lastByte); took < idle || took > idle+2*time.Second {
		t.Errorf("closed %v after the last byte, want about %v", took, idle)
	}
	if st := g.wait(t); st.End != tunnel.EndIdle || st.Up != st.Down || st.Up < 3 {
		t.Errorf("Stats = %+v, want ended idle after the bytes echoed", st)
	}
}

// TestActivityIsThrottled: OnActivity runs while bytes move, but not once
// per read.
func TestActivityIsThrottled(t *testing.T) {
	var calls atomic.Int32
	o := tunnel.Options{OnActivity: func() { calls.Add(1) }, ActivityInterval: time.Hour}
	g := newGateway(t, tunneltest.Listen(t, tunneltest.Echo), o, false)
	c := g.dial(t)
	buf := make([]byte, 1)
	for range 50 {
		c.Write([]byte{'x'})
		io.ReadFull(c, buf)
	}
	c.Close()
	g.wait(t)
	if n := calls.Load(); n != 1 {
		t.Errorf("OnActivity ran %d times over 100 reads within its interval, want 1", n)
	}
}

// TestStopped: when the gateway stops (the handler's context ends), open
// tunnels close.
func TestStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan tunnel.Stats, 1)
	addr := tunneltest.Listen(t, tunneltest.Echo)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		backend, err := net.Dial("tcp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		st, _ := tunnel.Serve(ctx, w, r, backend, tunnel.Options{})
		done <- st
	}))
	defer srv.Close()
	c, err := (&tunnel.Dialer{}).Dial(t.Context(), srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cancel()
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("read from a tunnel of a stopped gateway succeeded")
	}
	if st := <-done; st.End != tunnel.EndStopped {
		t.Errorf("End = %q, want %q", st.End, tunnel.EndStopped)
	}
}

func TestCheckRequest(t *testing.T) {
	tests := []struct {
		name              string
		connection, upgr  string
		proto             string
		wantUpgradeNeeded bool
	}{
		{"upgrade", "Upgrade", "berth-sandbox/1", "HTTP/1.1", false},
		{"any case, among others", "keep-alive, upgrade", "BERTH-SANDBOX/1", "HTTP/1.1", false},
		{"stripped by a proxy", "", "", "HTTP/1.1", true},
		{"upgrade without connection", "", "berth-sandbox/1", "HTTP/1.1", true},
		{"another protocol", "Upgrade", "websocket", "HTTP/1.1", true},
		{"HTTP/1.0", "Upgrade", "berth-sandbox/1", "HTTP/1.0", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/sandbox/v1/dev/tcp/2222", nil)
			r.Proto = tt.proto
			r.ProtoMajor, r.ProtoMinor, _ = http.ParseHTTPVersion(tt.proto)
			if tt.connection != "" {
				r.Header.Set("Connection", tt.connection)
			}
			if tt.upgr != "" {
				r.Header.Set("Upgrade", tt.upgr)
			}
			err := tunnel.CheckRequest(r)
			if got := errors.Is(err, fault.UpgradeRequired); got != tt.wantUpgradeNeeded {
				t.Fatalf("CheckRequest = %v, want upgrade required: %v", err, tt.wantUpgradeNeeded)
			}
			if err != nil && (!strings.Contains(err.Error(), "Upgrade: berth-sandbox/1") && tt.proto == "HTTP/1.1" ||
				!strings.Contains(err.Error(), "berth sandbox ssh")) {
				t.Errorf("message %q does not name the header and the client", err)
			}
		})
	}
}

// TestRefused: any answer but 101 comes back whole, so the caller can
// decode the gateway's error.
func TestRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"code":"unauthenticated","message":"no key"}`)
		}
	}))
	defer srv.Close()
	_, err := (&tunnel.Dialer{}).Dial(t.Context(), srv.URL, http.Header{"Authorization": {"Bearer bad"}})
	var re *tunnel.RefusedError
	if !errors.As(err, &re) || re.Response.StatusCode != http.StatusUnauthorized {
		t.Fatalf("Dial = %v, want a RefusedError with 401", err)
	}
	body, _ := io.ReadAll(re.Response.Body)
	if !strings.Contains(string(body), "unauthenticated") {
		t.Errorf("body %q, want the gateway's error", body)
	}
	// A 200 is a refusal too: the gateway did not switch.
	_, err = (&tunnel.Dialer{}).Dial(t.Context(), srv.URL, http.Header{"Authorization": {"Bearer good"}})
	if !errors.As(err, &re) || re.Response.StatusCode != http.StatusOK {
		t.Fatalf("Dial = %v, want a RefusedError with 200", err)
	}
}

// TestDialGivesUpWithContext: a gateway that never answers does not hold
// the client past its context.
func TestDialGivesUpWithContext(t *testing.T) {
	addr := tunneltest.Listen(t, tunneltest.Drain)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := (&tunnel.Dialer{}).Dial(ctx, "http://"+addr+"/x", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dial = %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Dial took %v", d)
	}
}

// TestDialReadsNothingPastTheHead: what the sandbox says first is still in
// the connection Dial returns, so the connection can be handed on whole.
func TestDialReadsNothingPastTheHead(t *testing.T) {
	g := newGateway(t, tunneltest.Listen(t, func(c net.Conn) {
		io.WriteString(c, "SSH-2.0-test\r\n")
		tunneltest.Echo(c)
	}), tunnel.Options{}, false)
	c := g.dial(t)
	_ = c.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c.Conn).ReadString('\n')
	if err != nil || line != "SSH-2.0-test\r\n" {
		t.Fatalf("the raw connection after Dial says %q, %v; want the greeting", line, err)
	}
}

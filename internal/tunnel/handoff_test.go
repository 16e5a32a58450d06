//go:build linux

package tunnel_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"berth.dev/berth/internal/tunnel"
	"berth.dev/berth/internal/tunnel/tunneltest"
)

// the101 is what the gateway writes before it hands the socket over: the
// sandbox's side may count it among the bytes sent, depending on when
// the client's kernel acknowledged it.
const the101 = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + tunnel.Protocol + "\r\n\r\n"

// fakeReceiver stands in for a machine's receiver (package handoff's,
// with berth-init and sshd behind it): it serves each socket it is given
// in this process with serve, and closes ended when serve returns. With
// err set, Give refuses instead, as a machine with no receiver does.
type fakeReceiver struct {
	serve func(net.Conn)
	err   error
	n     atomic.Int32  // sockets taken over
	given chan struct{} // a value when one was taken over
}

var _ tunnel.Receiver = (*fakeReceiver)(nil)

func newFakeReceiver(serve func(net.Conn)) *fakeReceiver {
	return &fakeReceiver{serve: serve, given: make(chan struct{}, 1)}
}

func (r *fakeReceiver) Give(f *os.File) (<-chan struct{}, error) {
	if r.err != nil {
		return nil, r.err
	}
	// FileConn duplicates the descriptor, as sending it to the sandbox
	// does: the caller closes f once ended is closed, or sooner when it
	// shuts the socket down, and the sandbox's copy lives on.
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer c.Close()
		r.serve(c)
	}()
	r.n.Add(1)
	select {
	case r.given <- struct{}{}:
	default:
	}
	return ended, nil
}

// gives says how many sockets r took over so far.
func (r *fakeReceiver) gives() int { return int(r.n.Load()) }

// handoffResult is what one ServeHandoff returned.
type handoffResult struct {
	st     tunnel.Stats
	handed bool
	err    error
}

// handoffGateway is a minimal gateway whose tunnels go through
// ServeHandoff; what each returned arrives on results.
type handoffGateway struct {
	url     string
	tls     *http.Transport
	results chan handoffResult
}

// newHandoffGateway serves tunnels with ServeHandoff, recv and dial, until
// ctx ends (the gateway stopping).
func newHandoffGateway(t *testing.T, ctx context.Context, recv tunnel.Receiver,
	dial func(context.Context) (net.Conn, error), o tunnel.Options, useTLS bool) *handoffGateway {
	t.Helper()
	g := &handoffGateway{results: make(chan handoffResult, 16)}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := tunnel.CheckRequest(r); err != nil {
			http.Error(w, err.Error(), http.StatusUpgradeRequired)
			return
		}
		st, handed, err := tunnel.ServeHandoff(ctx, w, r, recv, dial, o)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
		g.results <- handoffResult{st, handed, err}
	})
	var srv *httptest.Server
	if useTLS {
		srv = httptest.NewTLSServer(h)
		g.tls = srv.Client().Transport.(*http.Transport)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	g.url = srv.URL + "/sandbox/v1/dev/tcp/2222"
	return g
}

// dial opens a tunnel with the package's own client.
func (g *handoffGateway) dial(t *testing.T) *tunnel.Conn {
	t.Helper()
	d := &tunnel.Dialer{}
	if g.tls != nil {
		d.TLSConfig = g.tls.TLSClientConfig
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := d.Dial(ctx, g.url, http.Header{"Authorization": {"Bearer k"}})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	return c
}

// dialRaw opens a tunnel by hand, sending early right behind the request
// in the same write, as a client that does not wait for the 101 does. It
// returns the gateway's answer and the stream behind it.
func (g *handoffGateway) dialRaw(t *testing.T, early string) (*http.Response, *bufio.Reader, *net.TCPConn) {
	t.Helper()
	host, path, _ := strings.Cut(strings.TrimPrefix(g.url, "http://"), "/")
	raw, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	_ = raw.SetDeadline(time.Now().Add(5 * time.Second))
	req := "GET /" + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: Upgrade\r\nUpgrade: " + tunnel.Protocol + "\r\n\r\n" + early
	if _, err := io.WriteString(raw, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(raw)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the gateway's answer: %v", err)
	}
	return resp, br, raw.(*net.TCPConn)
}

func (g *handoffGateway) wait(t *testing.T) handoffResult {
	t.Helper()
	select {
	case res := <-g.results:
		return res
	case <-time.After(10 * time.Second):
		t.Fatal("ServeHandoff did not return within 10s")
	}
	return handoffResult{}
}

// backend is a sandbox's port for the tunnels that copy: it greets, then
// echoes, so the test can tell it from the fake receiver.
func backend(t *testing.T) func(context.Context) (net.Conn, error) {
	addr := tunneltest.Listen(t, func(c net.Conn) {
		io.WriteString(c, "backend\r\n")
		tunneltest.Echo(c)
	})
	return func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
}

// noBackend is the dial of a tunnel that must be handed over: copying
// would be a failure.
func noBackend(t *testing.T) func(context.Context) (net.Conn, error) {
	return func(context.Context) (net.Conn, error) {
		t.Error("ServeHandoff dialled the backend; want the connection handed over")
		return nil, errors.New("no backend in this test")
	}
}

// hold is a sandbox's server that reads until its end and then keeps its
// copy of the socket open until the test ends: only the gateway's
// shutdown can cut the client off. It tells sawEnd how its read ended.
func hold(t *testing.T, sawEnd chan<- error) func(net.Conn) {
	return func(c net.Conn) {
		_, err := io.Copy(io.Discard, c)
		sawEnd <- err
		<-t.Context().Done()
	}
}

// readsEnd fails the test unless the client's next read says the tunnel
// is over, rather than timing out on a tunnel still open.
func readsEnd(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 64))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the client read %d bytes, %v; want the tunnel cut off", n, err)
	}
}

// TestHandoffEcho: the socket is handed over whole, the sandbox's server
// talks to the client through it with the gateway copying nothing, and
// the gateway still sees the bytes move and counts them.
func TestHandoffEcho(t *testing.T) {
	var calls atomic.Int32
	o := tunnel.Options{OnActivity: func() { calls.Add(1) }, ActivityInterval: 20 * time.Millisecond}
	recv := newFakeReceiver(tunneltest.Echo)
	g := newHandoffGateway(t, t.Context(), recv, noBackend(t), o, false)
	c := g.dial(t)
	// Not a byte before the socket is the sandbox's: the gateway reads its
	// starting counts before it hands it over, and bytes that beat it are
	// TestHandoffCountsFirstBytes's matter.
	select {
	case <-recv.given:
	case <-time.After(5 * time.Second):
		t.Fatal("the socket was not handed over within 5s")
	}

	// Bytes keep moving until the gateway has noticed: it looks at the
	// socket's counts now and then, not at every byte.
	total := 0
	buf := make([]byte, 64)
	deadline := time.Now().Add(5 * time.Second)
	for rounds := 0; rounds < 3 || calls.Load() == 0; rounds++ {
		if time.Now().After(deadline) {
			t.Fatal("OnActivity not called within 5s of bytes moving")
		}
		msg := "hello, sandbox"
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf[:len(msg)]); err != nil || string(buf[:len(msg)]) != msg {
			t.Fatalf("echo %q, %v; want %q", buf[:len(msg)], err, msg)
		}
		total += len(msg)
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(c); err != nil || len(rest) > 0 {
		t.Fatalf("after the half-close the client read %q, %v; want EOF", rest, err)
	}

	res := g.wait(t)
	if res.err != nil || !res.handed {
		t.Fatalf("ServeHandoff = %v, handed %v; want handed over", res.err, res.handed)
	}
	if res.st.End != tunnel.EndClosed {
		t.Errorf("End = %q, want %q", res.st.End, tunnel.EndClosed)
	}
	// The counts are the kernel's (TCP_INFO), in sequence numbers: a FIN
	// counts as one. Up is what the client sent after its request, and
	// its FIN. Down counts what the client acknowledged: all the echo by
	// the time its FIN arrived, perhaps the 101, perhaps the sandbox's FIN.
	if res.st.Up < int64(total) || res.st.Up > int64(total+1) {
		t.Errorf("Up = %d, want %d, or %d with the FIN", res.st.Up, total, total+1)
	}
	if res.st.Down < int64(total) || res.st.Down > int64(total+len(the101)+1) {
		t.Errorf("Down = %d, want %d, or up to %d with the 101 and the FIN", res.st.Down, total, total+len(the101)+1)
	}
	if n := recv.gives(); n != 1 {
		t.Errorf("the receiver was given %d sockets, want 1", n)
	}
}

// TestHandoffCountsFirstBytes: the bytes a client sends as soon as it has
// the 101 (ssh's version and key exchange, through berth sandbox proxy)
// are the client's too, and counted in Up. The race is the gateway's
// against the client, so the test runs tunnels until one is counted
// short, or enough were not.
//
// The starting counts are read before the 101 for that: read after it,
// about 1 tunnel in 100 was counted short (Up 0).
func TestHandoffCountsFirstBytes(t *testing.T) {
	recv := newFakeReceiver(tunneltest.Echo)
	g := newHandoffGateway(t, t.Context(), recv, noBackend(t), tunnel.Options{}, false)
	const msg = "SSH-2.0-OpenSSH_9.9\r\n"
	for i := range 500 {
		c := g.dial(t)
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatal(err)
		}
		if err := c.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if got, err := io.ReadAll(c); err != nil || string(got) != msg {
			t.Fatalf("tunnel %d: echo %q, %v; want %q", i, got, err, msg)
		}
		c.Close()
		res := g.wait(t)
		if !res.handed {
			t.Fatalf("tunnel %d was not handed over", i)
		}
		if res.st.Up < int64(len(msg)) {
			t.Fatalf("tunnel %d: Up = %d after the client sent %d bytes", i, res.st.Up, len(msg))
		}
	}
}

// TestHandoffIdle: a handed-over tunnel with no byte either way closes
// after the idle timeout, though the sandbox's server still holds the
// socket: the gateway shuts it down for everyone.
func TestHandoffIdle(t *testing.T) {
	sawEnd := make(chan error, 1)
	recv := newFakeReceiver(hold(t, sawEnd))
	o := tunnel.Options{IdleTimeout: 200 * time.Millisecond, ActivityInterval: 50 * time.Millisecond}
	g := newHandoffGateway(t, t.Context(), recv, noBackend(t), o, false)
	c := g.dial(t)
	readsEnd(t, c)
	res := g.wait(t)
	if res.err != nil || !res.handed || res.st.End != tunnel.EndIdle {
		t.Errorf("ServeHandoff = %+v, handed %v, %v; want handed over and ended idle", res.st, res.handed, res.err)
	}
	if res.st.Up != 0 {
		t.Errorf("Up = %d from a client that sent nothing", res.st.Up)
	}
	select {
	case err := <-sawEnd:
		if err != nil {
			t.Errorf("the sandbox's server read %v, want EOF", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the sandbox's server did not see the end within 5s")
	}
}

// TestHandoffStopped: when the gateway stops, handed-over tunnels are cut
// off too, though the gateway copies none of their bytes.
func TestHandoffStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sawEnd := make(chan error, 1)
	recv := newFakeReceiver(hold(t, sawEnd))
	g := newHandoffGateway(t, ctx, recv, noBackend(t), tunnel.Options{}, false)
	c := g.dial(t)
	select {
	case <-recv.given:
	case <-time.After(5 * time.Second):
		t.Fatal("the socket was not handed over within 5s")
	}
	cancel()
	readsEnd(t, c)
	res := g.wait(t)
	if res.err != nil || !res.handed || res.st.End != tunnel.EndStopped {
		t.Errorf("ServeHandoff = %+v, handed %v, %v; want handed over and stopped", res.st, res.handed, res.err)
	}
}

// TestHandoffFallback: when the socket cannot be handed over, the tunnel
// copies to the backend as Serve does, and the client cannot tell.
func TestHandoffFallback(t *testing.T) {
	tests := []struct {
		name    string
		giveErr error  // the receiver's answer; nil: it would take the socket
		useTLS  bool   // the gateway serves TLS: no plain socket to hand over
		early   string // sent in the same write as the request; "": sent after the 101
	}{
		{name: "no receiver", giveErr: errors.New("handoff: no receiver in the sandbox")},
		{name: "tls", useTLS: true},
		{name: "bytes behind the request", early: "hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recv := newFakeReceiver(func(c net.Conn) { io.WriteString(c, "receiver\r\n") })
			recv.err = tt.giveErr
			g := newHandoffGateway(t, t.Context(), recv, backend(t), tunnel.Options{}, tt.useTLS)

			var got []byte
			if tt.early == "" {
				c := g.dial(t)
				if _, err := io.WriteString(c, "hello"); err != nil {
					t.Fatal(err)
				}
				if err := c.CloseWrite(); err != nil {
					t.Fatal(err)
				}
				var err error
				if got, err = io.ReadAll(c); err != nil {
					t.Fatal(err)
				}
			} else {
				resp, br, raw := g.dialRaw(t, tt.early)
				if resp.StatusCode != http.StatusSwitchingProtocols {
					t.Fatalf("the gateway answered %s, want 101", resp.Status)
				}
				raw.CloseWrite()
				var err error
				if got, err = io.ReadAll(br); err != nil {
					t.Fatal(err)
				}
			}
			if want := "backend\r\nhello"; string(got) != want {
				t.Errorf("the client read %q, want %q from the backend", got, want)
			}

			res := g.wait(t)
			if res.err != nil || res.handed {
				t.Errorf("ServeHandoff = %v, handed %v; want copied", res.err, res.handed)
			}
			want := tunnel.Stats{Up: 5, Down: int64(len("backend\r\nhello")), End: tunnel.EndClosed}
			if res.st != want {
				t.Errorf("Stats = %+v, want %+v", res.st, want)
			}
			if n := recv.gives(); n != 0 {
				t.Errorf("the receiver took %d sockets, want none", n)
			}
		})
	}
}

// TestHandoffBackendDown: a tunnel that falls back to copying and finds
// no backend tells the client: with a 502 and the reason when it has not
// answered yet, by closing the stream after the 101.
func TestHandoffBackendDown(t *testing.T) {
	down := func(context.Context) (net.Conn, error) { return nil, errors.New("sshd is not listening") }
	noRecv := &fakeReceiver{err: errors.New("no receiver")}

	t.Run("bytes behind the request", func(t *testing.T) {
		g := newHandoffGateway(t, t.Context(), newFakeReceiver(tunneltest.Echo), down, tunnel.Options{}, false)
		resp, br, _ := g.dialRaw(t, "SSH-2.0-client\r\n")
		body, _ := io.ReadAll(br)
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "sshd is not listening") {
			t.Errorf("the gateway answered %s %q, want 502 with the reason", resp.Status, body)
		}
		if res := g.wait(t); res.handed || res.err != nil {
			t.Errorf("ServeHandoff = %v, handed %v; want neither", res.err, res.handed)
		}
	})

	t.Run("tls", func(t *testing.T) {
		g := newHandoffGateway(t, t.Context(), newFakeReceiver(tunneltest.Echo), down, tunnel.Options{}, true)
		d := &tunnel.Dialer{TLSConfig: g.tls.TLSClientConfig}
		_, err := d.Dial(t.Context(), g.url, nil)
		var re *tunnel.RefusedError
		if !errors.As(err, &re) || re.Response.StatusCode != http.StatusBadGateway {
			t.Fatalf("Dial = %v, want a RefusedError with 502", err)
		}
		if body, _ := io.ReadAll(re.Response.Body); !strings.Contains(string(body), "sshd is not listening") {
			t.Errorf("body %q, want the reason", body)
		}
		g.wait(t)
	})

	t.Run("after the 101", func(t *testing.T) {
		g := newHandoffGateway(t, t.Context(), noRecv, down, tunnel.Options{}, false)
		c := g.dial(t)
		readsEnd(t, c)
		res := g.wait(t)
		if res.handed || res.err != nil || res.st.End != tunnel.EndClosed {
			t.Errorf("ServeHandoff = %+v, handed %v, %v; want closed, not handed", res.st, res.handed, res.err)
		}
	})
}

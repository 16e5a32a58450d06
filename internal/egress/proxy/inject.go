package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/secret"
)

// Replacement is a secret the proxy puts into a sandbox's requests: where its
// placeholder stands in a header of a request to one of its hosts, its
// value goes (package egress/placeholder makes them).
type Replacement struct {
	Hosts       []egress.Rule // names, *.domain
	Placeholder string
	Value       secret.Secret
}

// maxInjectHeader bounds a request's header read where the proxy stands
// in for a host.
const maxInjectHeader = 64 << 10

// secretsFor are the caller's secrets for host:port.
func (c Caller) secretsFor(host string, port int) []Replacement {
	var out []Replacement
	for _, s := range c.Secrets {
		for _, r := range s.Hosts {
			if r.Matches(host, port) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// inject serves a CONNECT to a host some of the caller's secrets are for:
// the proxy answers the sandbox's TLS with a certificate of its own
// authority for the host, reads each HTTP/1.1 request, puts the secrets'
// values where their placeholders stand in its headers, and sends it to
// the host over TLS of its own, verified (UpstreamRoots). up is the
// connection dialFor made; later requests dial again, through the checks.
func (p *Proxy) inject(w http.ResponseWriter, c Caller, rec Connection, up net.Conn, secrets []Replacement) {
	leaf, err := p.Issuer.leaf(rec.Host)
	if err != nil {
		up.Close()
		http.Error(w, "berth egress: "+err.Error(), http.StatusInternalServerError)
		return
	}
	client, br, ok := established(w, up)
	if !ok {
		return
	}
	tconn := tls.Server(&bufferedConn{Conn: client, r: br}, &tls.Config{
		Certificates: []tls.Certificate{*leaf}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})

	var mu sync.Mutex
	var counted []*countingConn
	first := up
	target := net.JoinHostPort(rec.Host, strconv.Itoa(rec.Port))
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			mu.Lock()
			conn := first
			first = nil
			mu.Unlock()
			if conn == nil {
				var err error
				if conn, _, err = p.dialFor(ctx, c, rec.Host, rec.Port); err != nil {
					return nil, err
				}
			}
			cc := &countingConn{Conn: conn}
			mu.Lock()
			counted = append(counted, cc)
			mu.Unlock()
			return cc, nil
		},
		TLSClientConfig:     &tls.Config{ServerName: rec.Host, RootCAs: p.UpstreamRoots, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // the answer goes back as the host sent it
	}
	defer tr.CloseIdleConnections()
	handler := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = "https", target
		replaceSecrets(out.Header, secrets)
		resp, err := tr.RoundTrip(out)
		if err != nil {
			http.Error(rw, "berth egress: "+rec.Host+": "+err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			rw.Header()[k] = vs
		}
		rw.WriteHeader(resp.StatusCode)
		flushCopy(rw, resp.Body)
	})
	ln := &oneConn{conn: tconn, closed: make(chan struct{})}
	idle := p.IdleTimeout
	if idle <= 0 {
		idle = time.Hour
	}
	srv := &http.Server{Handler: handler, MaxHeaderBytes: maxInjectHeader, ReadHeaderTimeout: time.Minute, IdleTimeout: idle,
		ErrorLog: log.New(io.Discard, "", 0),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				ln.Close()
			}
		}}
	_ = srv.Serve(ln)
	mu.Lock()
	if first != nil {
		first.Close() // the sandbox sent no request
	}
	for _, cc := range counted {
		rec.Up += cc.written.Load()
		rec.Down += cc.read.Load()
	}
	mu.Unlock()
	rec.Allowed = true
	rec.Took = time.Since(rec.Began)
	p.record(rec)
}

// replaceSecrets puts each secret's value where its placeholder stands in
// h's values, inside HTTP Basic credentials too.
func replaceSecrets(h http.Header, secrets []Replacement) {
	for k, vs := range h {
		for i, v := range vs {
			for _, s := range secrets {
				v = strings.ReplaceAll(v, s.Placeholder, s.Value.Reveal())
			}
			if scheme, cred, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "basic") {
				if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred)); err == nil {
					plain := string(raw)
					for _, s := range secrets {
						plain = strings.ReplaceAll(plain, s.Placeholder, s.Value.Reveal())
					}
					if plain != string(raw) {
						v = scheme + " " + base64.StdEncoding.EncodeToString([]byte(plain))
					}
				}
			}
			vs[i] = v
		}
		h[k] = vs
	}
}

// flushCopy copies an answer's body to rw, flushing as it comes (a stream
// of events must not wait for a buffer to fill).
func flushCopy(rw http.ResponseWriter, body io.Reader) {
	rc := http.NewResponseController(rw)
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := rw.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// bufferedConn reads what the proxy's HTTP reader had buffered past a
// CONNECT (a TLS hello) before the connection itself.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) {
	if c.r != nil && c.r.Buffered() > 0 {
		return c.r.Read(b)
	}
	return c.Conn.Read(b)
}

// oneConn is a listener of one connection, closed when it ends.
type oneConn struct {
	mu     sync.Mutex
	conn   net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.conn
	l.conn = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.closed
	return nil, errors.New("the connection ended")
}

func (l *oneConn) Close() error { l.once.Do(func() { close(l.closed) }); return nil }

func (l *oneConn) Addr() net.Addr { return dummyAddr{} }

type dummyAddr struct{}

func (dummyAddr) Network() string { return "tcp" }
func (dummyAddr) String() string  { return "sandbox" }

// Package proxy is the gateway's egress proxy (package egress says what
// a sandbox may reach): the only way out of a sandbox whose network
// reaches nothing but the gateway.
package proxy

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"berth.dev/berth/internal/egress"
	"berth.dev/berth/internal/tunnel"
)

// Caller is who asks the proxy for a connection: a sandbox, by its own
// key, and the policy it goes out under.
type Caller struct {
	Sandbox    string
	Org, Owner string // whose it is, for the record
	Class      string // its class, for the counters
	Policy     egress.Policy
	// Secrets are put into its requests to their hosts (inject.go).
	Secrets []Replacement
	// OwnStack says the sandbox runs a network stack of its own (the
	// isolated and VM tiers: gVisor's netstack, a VM's kernel) rather
	// than reading from this host's kernel's sockets: what comes down
	// its tunnels is handed on by the kernel's splice, not copied
	// (copy.go says why).
	OwnStack bool
}

// Connection is what the proxy did with one request, for the sandbox's
// egress record and the audit log: where to, whether it was allowed (and
// why not), and what it carried.
type Connection struct {
	Sandbox    string
	Org, Owner string
	Class      string
	Host       string
	Port       int
	Addr       string // the address dialled; "" when none was
	Allowed    bool
	Why        string // a refusal's reason
	Up, Down   int64  // bytes to and from the host
	Began      time.Time
	Took       time.Duration
}

// Proxy is the gateway's egress proxy: an HTTP proxy that tunnels CONNECT
// and forwards plain http:// requests, for sandboxes only.
type Proxy struct {
	// Authenticate names the caller from its Proxy-Authorization header
	// (Basic, the key as the password, or Bearer); an error refuses it
	// with 407.
	Authenticate func(ctx context.Context, header string) (Caller, error)
	// Resolve looks a name up; nil is the system's resolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial dials an address the checks allowed; nil is net.Dialer's.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Own says whether an address is the gateway host's own (any of its
	// interfaces'); such an address is reached only when a rule names it.
	Own func(netip.Addr) bool
	// ConnectTo sends a connection for "host:port" (a name the policy
	// allows) to another "addr:port", as curl's --connect-to does: an
	// operator's mirror under the public name, or a test's server on
	// loopback. The operator named the address, so it is dialled whatever
	// range it is in; the policy is still checked against the name.
	ConnectTo map[string]string
	// Hosts answers for the names it holds before Resolve is asked, as
	// curl's --resolve (or /etc/hosts) does; the addresses are checked as
	// any resolver's are.
	Hosts map[string][]netip.Addr
	// Record is told of every connection once it ends; nil records
	// nothing.
	Record func(Connection)
	// Opened is told of each connection the proxy dialled, as it opens
	// (Record comes once it ends): a learning sandbox's host is known to
	// have been reached from then. nil tells nobody.
	Opened func(Caller, Connection)
	// IdleTimeout closes a tunnel with no byte either way for this long;
	// 0 is an hour.
	IdleTimeout time.Duration
	// Issuer signs the certificates the proxy shows for the hosts a
	// caller's secrets are for; nil: secrets are never put in.
	Issuer *Issuer
	// UpstreamRoots verify those hosts' own certificates; nil: the
	// system's.
	UpstreamRoots *x509.CertPool
}

// ErrRefused is what every refusal of a destination is (errors.Is).
var ErrRefused = errors.New("egress refused")

// refusal is a destination refused, in words for the sandbox's user.
type refusal struct{ msg string }

func (r *refusal) Error() string        { return r.msg }
func (r *refusal) Is(target error) bool { return target == ErrRefused }

func refused(format string, args ...any) error { return &refusal{msg: fmt.Sprintf(format, args...)} }

// ServeHTTP answers a proxy request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	caller, err := p.Authenticate(r.Context(), r.Header.Get("Proxy-Authorization"))
	if err != nil {
		w.Header().Set("Proxy-Authenticate", `Basic realm="berth egress"`)
		http.Error(w, "berth egress: "+err.Error()+" (the proxy takes the sandbox's own key, as in HTTPS_PROXY)", http.StatusProxyAuthRequired)
		return
	}
	if r.Method == http.MethodConnect {
		p.connect(w, r, caller)
		return
	}
	p.forward(w, r, caller)
}

// target reads host and port from a CONNECT's authority or a request's
// absolute URL.
func target(hostport string, defaultPort int) (string, int, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			host, portStr = strings.Trim(hostport, "[]"), strconv.Itoa(defaultPort)
		} else {
			return "", 0, fmt.Errorf("%q is not host:port", hostport)
		}
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 || host == "" || len(host) > 253 {
		return "", 0, fmt.Errorf("%q is not host:port", hostport)
	}
	return host, port, nil
}

// dialFor checks host:port against the caller's policy, resolves it and
// dials the first address it may reach.
func (p *Proxy) dialFor(ctx context.Context, c Caller, host string, port int) (net.Conn, string, error) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		if !c.Policy.NamesAddr(a, port) && !((c.Policy.Mode == egress.ModeOpen || c.Policy.Mode == egress.ModeLearn) && egress.Public(a)) {
			return nil, "", refused("%s port %d is not in this sandbox's egress policy (%s)", host, port, c.Policy)
		}
		addrs = []netip.Addr{a}
	} else {
		if !c.Policy.AllowsName(host, port) {
			return nil, "", refused("%s port %d is not in this sandbox's egress policy (%s)", host, port, c.Policy)
		}
		if to, ok := p.ConnectTo[net.JoinHostPort(host, strconv.Itoa(port))]; ok {
			conn, err := p.dialer()(ctx, "tcp", to)
			if err != nil {
				return nil, "", fmt.Errorf("%s port %d does not answer: %w", host, port, err)
			}
			return conn, to, nil
		}
		resolve := p.Resolve
		if resolve == nil {
			resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		found, err := p.Hosts[host], error(nil)
		if len(found) == 0 {
			found, err = resolve(ctx, host)
		}
		if err != nil || len(found) == 0 {
			return nil, "", refused("%s does not resolve", host)
		}
		for _, a := range found {
			if p.reachable(c, a.Unmap(), port) {
				addrs = append(addrs, a.Unmap())
			}
		}
		if len(addrs) == 0 {
			return nil, "", refused("%s resolves only to addresses a sandbox may not reach (%s: private, loopback, link-local or the gateway's own)", host, found[0])
		}
	}
	dial := p.dialer()
	var errs []error
	for _, a := range addrs {
		addr := net.JoinHostPort(a.String(), strconv.Itoa(port))
		conn, err := dial(ctx, "tcp", addr)
		if err == nil {
			return conn, addr, nil
		}
		errs = append(errs, err)
	}
	return nil, "", fmt.Errorf("%s port %d does not answer: %w", host, port, errors.Join(errs...))
}

// dialer is Dial, or net.Dialer's.
func (p *Proxy) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if p.Dial != nil {
		return p.Dial
	}
	return (&net.Dialer{Timeout: 10 * time.Second}).DialContext
}

// reachable reports whether a name's address a may be dialled: a public
// address, or one a rule names.
func (p *Proxy) reachable(c Caller, a netip.Addr, port int) bool {
	if c.Policy.NamesAddr(a, port) {
		return true
	}
	return egress.Public(a) && (p.Own == nil || !p.Own(a))
}

// connect tunnels a CONNECT: the checks, then 200 and the bytes both ways
// unread.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request, c Caller) {
	began := time.Now()
	host, port, err := target(r.Host, egress.DefaultPort)
	rec := Connection{Sandbox: c.Sandbox, Org: c.Org, Owner: c.Owner, Class: c.Class, Host: host, Port: port, Began: began}
	if err != nil {
		http.Error(w, "berth egress: "+err.Error(), http.StatusBadRequest)
		return
	}
	up, addr, err := p.dialFor(r.Context(), c, host, port)
	rec.Addr = addr
	if err != nil {
		p.refuse(w, rec, err)
		return
	}
	p.opened(c, rec)
	if secrets := c.secretsFor(host, port); len(secrets) > 0 && p.Issuer != nil {
		p.inject(w, c, rec, up, secrets)
		return
	}
	client, br, ok := established(w, up)
	if !ok {
		return
	}
	// Bytes the client sent behind the CONNECT (a TLS hello) go first.
	var pre int64
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		m, _ := up.Write(b)
		pre = int64(m)
	}
	rec.Allowed = true
	down := copyConn
	if c.OwnStack {
		down = spliceConn
	}
	rec.Up, rec.Down = p.relay(client, up, down)
	rec.Up += pre
	rec.Took = time.Since(began)
	p.record(rec)
}

// established takes the client's connection from the HTTP server and
// tells it the tunnel is there; on failure it closes up and says why, if
// it can.
func established(w http.ResponseWriter, up net.Conn) (net.Conn, *bufio.Reader, bool) {
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		http.Error(w, "berth egress: "+err.Error(), http.StatusInternalServerError)
		return nil, nil, false
	}
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		client.Close()
		up.Close()
		return nil, nil, false
	}
	return client, brw.Reader, true
}

// forward carries a plain http:// request to its host and the answer
// back, without the proxy's own headers.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, c Caller) {
	began := time.Now()
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		http.Error(w, "berth egress: a proxy request names an http:// URL; https goes by CONNECT", http.StatusBadRequest)
		return
	}
	host, port, err := target(r.URL.Host, 80)
	rec := Connection{Sandbox: c.Sandbox, Org: c.Org, Owner: c.Owner, Class: c.Class, Host: host, Port: port, Began: began}
	if err != nil {
		http.Error(w, "berth egress: "+err.Error(), http.StatusBadRequest)
		return
	}
	conn, addr, err := p.dialFor(r.Context(), c, host, port)
	rec.Addr = addr
	if err != nil {
		p.refuse(w, rec, err)
		return
	}
	p.opened(c, rec)
	counted := &countingConn{Conn: conn}
	tr := &http.Transport{
		DialContext:       func(context.Context, string, string) (net.Conn, error) { return counted, nil },
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Header.Del("Proxy-Authorization")
	out.Header.Del("Proxy-Connection")
	resp, err := tr.RoundTrip(out)
	if err != nil {
		conn.Close()
		http.Error(w, "berth egress: "+host+": "+err.Error(), http.StatusBadGateway)
		rec.Allowed, rec.Why = true, err.Error()
		p.record(rec)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
	rec.Allowed = true
	rec.Up, rec.Down = counted.written.Load(), counted.read.Load()
	rec.Took = time.Since(began)
	p.record(rec)
}

// opened tells Opened of a connection dialled.
func (p *Proxy) opened(c Caller, rec Connection) {
	if p.Opened != nil {
		rec.Allowed = true
		p.Opened(c, rec)
	}
}

// refuse answers a refused destination: 403 with the reason, which the
// client shows (curl: "CONNECT tunnel failed, response 403").
func (p *Proxy) refuse(w http.ResponseWriter, rec Connection, err error) {
	rec.Why = err.Error()
	rec.Took = time.Since(rec.Began)
	p.record(rec)
	status := http.StatusForbidden
	if !errors.Is(err, ErrRefused) {
		status = http.StatusBadGateway
	}
	msg := "berth egress: " + err.Error()
	// Most clients show a refused CONNECT's status line and nothing of
	// its body (curl, git: "CONNECT tunnel failed, response 403"; pip
	// adds the reason phrase): the reason goes there, and in a header.
	w.Header().Set("X-Berth-Egress", printable(msg))
	raw, brw, herr := http.NewResponseController(w).Hijack()
	if herr != nil {
		http.Error(w, msg, status)
		return
	}
	defer raw.Close()
	body := msg + "\n"
	fmt.Fprintf(brw, "HTTP/1.1 %d %s (%s)\r\nContent-Type: text/plain; charset=utf-8\r\nX-Berth-Egress: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		status, http.StatusText(status), printable(msg), printable(msg), len(body), body)
	_ = brw.Flush()
}

// printable is s with what may not stand in a status line or a header
// (control bytes, non-ASCII) replaced.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

func (p *Proxy) record(c Connection) {
	if p.Record != nil {
		p.Record(c)
	}
}

// relay carries bytes both ways until both directions end or nothing
// moves for the idle timeout, and says how many bytes went each way: up
// by copyConn, down by down (copyConn or spliceConn). The bytes are never
// read for what they say. Whether they move is read from the client's
// socket (moved).
func (p *Proxy) relay(client, up net.Conn, down func(io.Writer, net.Conn) (int64, error)) (sent, received int64) {
	idle := p.IdleTimeout
	if idle <= 0 {
		idle = time.Hour
	}
	done := make(chan struct{}, 2)
	var upN, downN atomic.Int64
	cp := func(dst, src net.Conn, n *atomic.Int64, carry func(io.Writer, net.Conn) (int64, error)) {
		m, _ := carry(dst, src)
		n.Store(m)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(up, client, &upN, copyConn)
	go cp(client, up, &downN, down)
	t := time.NewTicker(min(idle/4, time.Minute))
	defer t.Stop()
	last := time.Now()
	seen, counted := moved(client)
	for ended := 0; ended < 2; {
		select {
		case <-done:
			ended++
		case now := <-t.C:
			if m, _ := moved(client); m != seen {
				last, seen = now, m
			} else if counted && now.Sub(last) >= idle {
				client.Close()
				up.Close()
			}
		}
	}
	client.Close()
	up.Close()
	return upN.Load(), downN.Load()
}

// countingConn counts the bytes through a forwarded request's connection.
type countingConn struct {
	net.Conn
	read, written atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	// Counted before the write: the host may answer, and the answer be
	// read and the connection recorded, before the writing goroutine
	// (http.Transport's) returns from Write. A short write takes back
	// what was not sent.
	c.written.Add(int64(len(b)))
	n, err := c.Conn.Write(b)
	if n < len(b) {
		c.written.Add(int64(n - len(b)))
	}
	return n, err
}

// HostAddrs is an Own for this host: the addresses of its interfaces,
// read once (a proxy started before an interface came up does not know
// it; the addresses of the loopback and private ranges are refused
// anyway).
func HostAddrs() (func(netip.Addr) bool, error) {
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("egress proxy: the host's addresses: %w", err)
	}
	own := map[netip.Addr]bool{}
	for _, a := range ifAddrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			own[p.Addr().Unmap()] = true
		}
	}
	return func(a netip.Addr) bool { return own[a.Unmap()] }, nil
}

// moved is how many bytes a TCP connection has carried either way, as
// its socket counts them; ok is false when it cannot tell (then no tunnel
// is closed for being idle).
func moved(c net.Conn) (n uint64, ok bool) {
	sc, isSys := c.(syscall.Conn)
	if !isSys {
		return 0, false
	}
	received, acked, err := tunnel.SocketBytes(sc)
	return received + acked, err == nil
}

// ParseConnectTo reads a ConnectTo as an operator writes it: "host:port=
// addr:port" pairs separated by commas (BERTH_EGRESS_CONNECT_TO).
func ParseConnectTo(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		from, to, ok := strings.Cut(pair, "=")
		host, port, err := target(strings.TrimSpace(from), 0)
		if !ok || err != nil || port == 0 {
			return nil, fmt.Errorf("%q is not host:port=address:port", pair)
		}
		ap, err := netip.ParseAddrPort(strings.TrimSpace(to))
		if err != nil || ap.Port() == 0 {
			return nil, fmt.Errorf("%q: %q is not address:port (an IP address; [::1]:443 for IPv6)", pair, to)
		}
		m[net.JoinHostPort(host, strconv.Itoa(port))] = ap.String()
	}
	return m, nil
}

// ParseHosts reads a Hosts table as an operator writes it: "name=addr"
// pairs separated by commas (BERTH_EGRESS_RESOLVE); a name given twice
// has both addresses.
func ParseHosts(s string) (map[string][]netip.Addr, error) {
	m := map[string][]netip.Addr{}
	for _, pair := range strings.Split(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		name, addr, ok := strings.Cut(pair, "=")
		name = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(name), "."))
		a, err := netip.ParseAddr(strings.TrimSpace(addr))
		if !ok || name == "" || len(name) > 253 || err != nil {
			return nil, fmt.Errorf("%q is not name=address (an IP address)", pair)
		}
		m[name] = append(m[name], a.Unmap())
	}
	return m, nil
}

package tunnel

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Conn is one end of a tunnel: the connection to the gateway (or, in the
// gateway, to the client) after the upgrade. Reads first return the bytes
// that arrived behind the HTTP head, then read the connection itself. On
// the client's side Dial reads nothing past the head, so the embedded
// connection is the stream itself and can be handed on whole (as berth
// sandbox proxy hands it to ssh).
type Conn struct {
	net.Conn
	r *bufio.Reader // holds bytes read past the head; nil once drained
}

// Read reads the stream.
func (c *Conn) Read(p []byte) (int, error) {
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(p)
		}
		c.r = nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes the stream: the far end reads EOF while bytes
// still come back.
func (c *Conn) CloseWrite() error {
	if closeWrite(c.Conn) {
		return nil
	}
	return c.Conn.Close()
}

// RefusedError is the gateway's answer when it was not 101. Response's
// body has been read (up to 64 KiB) and can be read again, so a caller can
// decode the gateway's error from it.
type RefusedError struct {
	Response *http.Response
}

func (e *RefusedError) Error() string {
	return "the gateway did not open the tunnel: " + e.Response.Status
}

// Dialer opens tunnels. The zero Dialer is ready to use.
type Dialer struct {
	// DialContext connects to the gateway; nil means a net.Dialer.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLSConfig is for an https gateway; nil means the system's roots. The
	// tunnel always speaks HTTP/1.1: HTTP/2 has no upgrade.
	TLSConfig *tls.Config
}

// Dial connects to the gateway at rawURL (http or https, the tunnel's
// route), asks for the upgrade with header added (the caller's
// Authorization), and returns the stream once the gateway answers 101.
// Any other answer is a *RefusedError. ctx bounds the connect and the
// handshake, not the stream.
func (d *Dialer) Dial(ctx context.Context, rawURL string, header http.Header) (*Conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	port := u.Port()
	switch {
	case u.Scheme == "http" && port == "":
		port = "80"
	case u.Scheme == "https" && port == "":
		port = "443"
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("tunnel to %s: the gateway's address must be http:// or https://", rawURL)
	}
	dial := d.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	conn, err := dial(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return nil, err
	}
	if u.Scheme == "https" {
		cfg := &tls.Config{}
		if d.TLSConfig != nil {
			cfg = d.TLSConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		conn = tls.Client(conn, cfg)
	}
	c, err := handshake(ctx, conn, u, header)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// handshake sends the upgrade request on conn and reads the answer, giving
// up when ctx ends.
func handshake(ctx context.Context, conn net.Conn, u *url.URL, header http.Header) (*Conn, error) {
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	req := &http.Request{
		Method: http.MethodGet, URL: u, Host: u.Host, Header: header.Clone(),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
	if req.Header == nil {
		req.Header = http.Header{}
	}
	SetUpgradeHeaders(req.Header)
	req.Header.Set("User-Agent", "berth")
	// A byte at a time, so that nothing behind the head (sshd's greeting,
	// say) is taken from the connection.
	br := bufio.NewReaderSize(byteReader{conn}, 16)
	err := req.Write(conn)
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(br, req)
	}
	if !stop() {
		return nil, fmt.Errorf("tunnel to %s: %w", u.Redacted(), ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("tunnel to %s: %w", u.Redacted(), err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || !hasToken(resp.Header, "Upgrade", Protocol) {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return nil, &RefusedError{Response: resp}
	}
	return &Conn{Conn: conn}, nil
}

// byteReader reads at most one byte per call.
type byteReader struct{ r io.Reader }

func (b byteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return b.r.Read(p)
}

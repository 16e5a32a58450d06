// Package tunneltest gives tests something for the tunnel to reach: a TCP
// server on loopback standing in for a sandbox's port. Like package tunnel
// it imports nothing of ours.
package tunneltest

import (
	"io"
	"net"
	"testing"
)

// Listen serves every connection to serve on a loopback port until the
// test ends, closing each when serve returns, and returns the address.
func Listen(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// Echo sends back what it reads until EOF, then half-closes.
func Echo(c net.Conn) {
	_, _ = io.Copy(c, c)
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// Drain reads until EOF, holding the connection open meanwhile.
func Drain(c net.Conn) { _, _ = io.Copy(io.Discard, c) }

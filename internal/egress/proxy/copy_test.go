package proxy

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"
)

// tcpPair is both ends of one loopback TCP connection.
func tcpPair(t *testing.T) (a, b *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// TestCopyConn: copyConn carries every byte in order across many
// buffers' worth, in bursts with pauses between them; while it waits for
// the next burst it holds no buffer; when the sender closes its writes it
// returns the count, and the receiver sees the end.
func TestCopyConn(t *testing.T) {
	inW, inR := tcpPair(t)   // the sender writes inW; copyConn reads inR
	outW, outR := tcpPair(t) // copyConn writes outW; the receiver reads outR
	data := make([]byte, 3*copySize+12345)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := copyConn(outW, inR)
		_ = outW.CloseWrite()
		done <- result{n, err}
	}()
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(outR)
		got <- b
	}()
	for off := 0; off < len(data); {
		end := min(off+copySize/3+777, len(data))
		if _, err := inW.Write(data[off:end]); err != nil {
			t.Fatal(err)
		}
		off = end
		// Waiting for the next burst, the copy holds no buffer.
		deadline := time.Now().Add(5 * time.Second)
		for buffersHeld.Load() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d copy buffers held by a tunnel waiting for bytes", buffersHeld.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
	if err := inW.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.n != int64(len(data)) {
			t.Errorf("copyConn = %d, %v; want %d, nil", r.n, r.err, len(data))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("copyConn did not return after the sender closed its writes")
	}
	if b := <-got; !bytes.Equal(b, data) {
		t.Errorf("the receiver got %d bytes, not the %d sent in order", len(b), len(data))
	}
	if n := buffersHeld.Load(); n != 0 {
		t.Errorf("%d copy buffers still held after the copy", n)
	}
}

// TestCopyConnClosed: a tunnel closed under a waiting copy (the idle
// timeout's close) ends it with an error and no buffer held.
func TestCopyConnClosed(t *testing.T) {
	_, inR := tcpPair(t)
	outW, _ := tcpPair(t)
	done := make(chan error, 1)
	go func() {
		_, err := copyConn(outW, inR)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	inR.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("copyConn of a closed connection returned no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("copyConn did not return when its connection was closed")
	}
	if n := buffersHeld.Load(); n != 0 {
		t.Errorf("%d copy buffers held after the close", n)
	}
}

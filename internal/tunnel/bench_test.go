package tunnel_test

import (
	"net"
	"testing"

	"berth.dev/berth/internal/tunnel"
	"berth.dev/berth/internal/tunnel/tunneltest"
)

// BenchmarkCopy compares a bulk copy to a TCP sink through the tunnel with
// the same copy straight to the sink: the tunnel adds one hop and a copy
// in user space. The ssh-level benchmark of the whole path (bench/tunnel.sh)
// is the one the README reports.
func BenchmarkCopy(b *testing.B) {
	sink := tunneltest.Listen(b, tunneltest.Drain)
	send := func(b *testing.B, c net.Conn) {
		buf := make([]byte, 1<<20)
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("direct", func(b *testing.B) {
		c, err := net.Dial("tcp", sink)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		send(b, c)
	})
	b.Run("tunnel", func(b *testing.B) {
		c := newGateway(b, sink, tunnel.Options{}, false).dial(b)
		send(b, c)
	})
}

package proxy

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// moved is how many bytes a TCP connection has carried either way, as
// its socket counts them (TCP_INFO); ok is false when it cannot tell.
func moved(c net.Conn) (n uint64, ok bool) {
	sc, isSys := c.(syscall.Conn)
	if !isSys {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	_ = raw.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			n, ok = info.Bytes_received+info.Bytes_acked, true
		}
	})
	return n, ok
}

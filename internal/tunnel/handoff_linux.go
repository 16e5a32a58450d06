package tunnel

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// canWatch says this system tells a socket's byte counts (TCP_INFO).
const canWatch = true

// SocketBytes is what a TCP socket has carried, as the kernel counts it
// (TCP_INFO): bytes received, and bytes sent and acknowledged. Whoever
// splices or hands a connection on reads its activity here.
func SocketBytes(c syscall.Conn) (received, acked uint64, err error) {
	sc, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var info *unix.TCPInfo
	var ierr error
	if err := sc.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		return 0, 0, err
	}
	if ierr != nil {
		return 0, 0, ierr
	}
	return info.Bytes_received, info.Bytes_acked, nil
}

// readCounts reads the socket's byte counts.
func readCounts(f *os.File) (counts, error) {
	up, down, err := SocketBytes(f)
	return counts{up: up, down: down}, err
}

// shutdown ends the connection both ways for everyone who holds it: the
// client reads its end, and so does the sandbox's server.
func shutdown(f *os.File) {
	if sc, err := f.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) { _ = unix.Shutdown(int(fd), unix.SHUT_RDWR) })
	}
}

package tunnel

import (
	"os"

	"golang.org/x/sys/unix"
)

// canWatch says this system tells a socket's byte counts (TCP_INFO).
const canWatch = true

// readCounts reads the socket's byte counts.
func readCounts(f *os.File) (counts, error) {
	sc, err := f.SyscallConn()
	if err != nil {
		return counts{}, err
	}
	var info *unix.TCPInfo
	var ierr error
	if err := sc.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		return counts{}, err
	}
	if ierr != nil {
		return counts{}, ierr
	}
	return counts{up: info.Bytes_received, down: info.Bytes_acked}, nil
}

// shutdown ends the connection both ways for everyone who holds it: the
// client reads its end, and so does the sandbox's server.
func shutdown(f *os.File) {
	if sc, err := f.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) { _ = unix.Shutdown(int(fd), unix.SHUT_RDWR) })
	}
}

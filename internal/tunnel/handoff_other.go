//go:build !linux

package tunnel

import (
	"errors"
	"os"
	"syscall"
)

// canWatch says this system tells a socket's byte counts: only Linux is
// known to, so elsewhere ServeHandoff copies.
const canWatch = false

// SocketBytes cannot tell here.
func SocketBytes(syscall.Conn) (received, acked uint64, err error) {
	return 0, 0, errors.New("no TCP_INFO here")
}

func readCounts(*os.File) (counts, error) { return counts{}, errors.New("no TCP_INFO here") }

func shutdown(*os.File) {}

//go:build unix

package openssh

import (
	"errors"
	"net"
	"os"
	"syscall"
)

// PassConn hands the tunnel's connection to ssh when ssh asked for it
// (ProxyUseFdpass: ssh makes the proxy's standard input and output one
// end of a Unix socket pair and waits for a file descriptor on it), so
// ssh talks to the gateway itself and no process copies the bytes in
// between. It reports false, having done nothing, when ssh did not ask
// or the connection cannot be handed on (TLS lives in this process).
func PassConn(conn net.Conn, stdin, stdout any) (bool, error) {
	in, ok1 := stdin.(*os.File)
	out, ok2 := stdout.(*os.File)
	sc, ok3 := conn.(syscall.Conn)
	if !ok1 || !ok2 || !ok3 || !sameSocket(in, out) {
		return false, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		// ssh expects a blocking socket, as one it connected itself.
		if serr = syscall.SetNonblock(int(fd), false); serr == nil {
			serr = syscall.Sendmsg(int(out.Fd()), []byte{0}, syscall.UnixRights(int(fd)), nil, 0)
		}
	})
	if err = errors.Join(err, serr); err != nil {
		return false, err
	}
	return true, nil
}

// sameSocket reports whether a and b are the same socket, as ssh sets up
// standard input and output for ProxyUseFdpass.
func sameSocket(a, b *os.File) bool {
	sa, err1 := a.Stat()
	sb, err2 := b.Stat()
	return err1 == nil && err2 == nil && sa.Mode()&os.ModeSocket != 0 && os.SameFile(sa, sb)
}

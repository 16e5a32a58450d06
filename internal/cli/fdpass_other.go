//go:build !unix

package cli

import "net"

// passConn never hands a connection on where there are no Unix sockets.
func passConn(net.Conn, any, any) (bool, error) { return false, nil }

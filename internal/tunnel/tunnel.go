// Package tunnel is the berth-sandbox/1 upgrade of SPEC S10, both halves:
// the gateway's (Serve: check the request, answer 101, take the connection
// over and copy bytes between it and the sandbox) and the client's (Dial:
// ask for the upgrade and hand back the stream, as `berth sandbox proxy`
// does for ssh). It is a leaf: it imports nothing of ours, so the gateway
// and the client share it as they share package api.
//
// The protocol is plain HTTP/1.1: a GET with "Connection: Upgrade" and
// "Upgrade: berth-sandbox/1" and the caller's key; the gateway answers
// "101 Switching Protocols", after which the connection carries the bytes of
// one TCP connection to the sandbox's port, both ways, until either end
// stops. A proxy that strips the Upgrade header makes the request an
// ordinary GET, which the gateway refuses with 426 (CheckRequest).
package tunnel

import (
	"net"
	"net/http"
	"strings"

	"berth.dev/berth/internal/fault"
)

// Protocol is the upgrade token.
const Protocol = "berth-sandbox/1"

// CheckRequest reports whether r asks for the berth-sandbox/1 upgrade. When
// it does not, the error (a fault.UpgradeRequired) says which header is
// missing and which client speaks the protocol.
func CheckRequest(r *http.Request) error {
	if r.ProtoMajor != 1 || r.ProtoMinor < 1 {
		return fault.Errorf(fault.UpgradeRequired, "the tunnel needs HTTP/1.1 (this request came as %s); use berth sandbox ssh or berth sandbox proxy as the client", r.Proto)
	}
	if !hasToken(r.Header, "Upgrade", Protocol) || !hasToken(r.Header, "Connection", "upgrade") {
		return fault.Errorf(fault.UpgradeRequired, "this route needs the headers Connection: Upgrade and Upgrade: %s "+
			"(a proxy on the way may have stripped them); use berth sandbox ssh or berth sandbox proxy as the client",
			Protocol)
	}
	return nil
}

// hasToken reports whether a comma-separated header holds token, ignoring
// case.
func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}

// SetUpgradeHeaders sets the headers that name the protocol, on a request
// or on the gateway's 101 and 426 answers.
func SetUpgradeHeaders(h http.Header) {
	h.Set("Connection", "Upgrade")
	h.Set("Upgrade", Protocol)
}

// closeWrite half-closes c when it can, so the far end reads EOF while
// bytes still flow the other way; it reports whether it could.
func closeWrite(c net.Conn) bool {
	cw, ok := c.(interface{ CloseWrite() error })
	return ok && cw.CloseWrite() == nil
}

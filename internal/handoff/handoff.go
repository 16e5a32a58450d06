// Package handoff hands a tunnel's client connection to the sandbox's own
// sshd (SPEC S10), so that the gateway copies no byte of it.
//
// The gateway still decides everything: who may get inside, which port,
// for how long. Once it has answered 101 Switching Protocols on a plain
// TCP connection to sshd's port, it sends that connection's descriptor
// (SCM_RIGHTS) to berth-init in the sandbox, which runs `sshd -i` on it.
// The bytes then go straight between the client's socket and sshd; the
// gateway keeps a duplicate of the descriptor to read the socket's byte
// counts (the sandbox's idle clock, the tunnel's own idle timeout, the
// audit entry) and to shut the connection down (the gateway stopping, a
// tunnel idle too long).
//
// The way between them is a unix socket of the gateway's (Hub): one per
// machine, in a directory of the gateway's that the machine mounts read
// only, so nothing in the sandbox can put another file at that path.
// berth-init connects to it and stays connected (Receiver); the gateway
// never connects to anything the sandbox could name. Whatever connects
// there is the sandbox's own, with no more reach than its sshd: it may be
// handed connections to this sandbox's port 2222 and nothing else.
//
// The wire is a SOCK_SEQPACKET socket carrying short text messages:
//
//	gateway → sandbox   "conn N"  with the connection's descriptor
//	sandbox → gateway   "end N"   when the sshd serving connection N ended
//
// N is a decimal number the gateway picks. A message from the sandbox is
// untrusted input: read into a fixed buffer, parsed strictly, any
// descriptor it carries dropped by the kernel (no room is given for one).
//
// This package is standard library only: berth-init, which ships in every
// sandbox image, uses its Receiver.
package handoff

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// SocketName is the socket's name in a machine's handoff directory.
const SocketName = "sshd.sock"

// Mount is where a machine mounts its handoff directory, read only.
const Mount = "/run/berth-handoff"

// EnvSocket tells berth-init where the gateway's socket is; unset, no
// connection is handed over and sshd alone serves the sandbox.
const EnvSocket = "BERTH_HANDOFF_SOCKET"

// maxMessage bounds one message either way; every valid one is far
// shorter.
const maxMessage = 64

// ErrNoReceiver is Give's answer when nothing in the sandbox is connected
// to take the connection: the caller copies bytes as before.
var ErrNoReceiver = errors.New("handoff: no receiver in the sandbox")

// message is one message on the wire.
type message struct {
	kind string // "conn" or "end"
	n    uint64
}

func (m message) bytes() []byte { return []byte(m.kind + " " + strconv.FormatUint(m.n, 10)) }

// parse reads one message: a kind, one space and a decimal number, and
// nothing else.
func parse(b []byte) (message, error) {
	if len(b) > maxMessage {
		return message{}, fmt.Errorf("a message of %d bytes (at most %d)", len(b), maxMessage)
	}
	kind, num, ok := strings.Cut(string(b), " ")
	if !ok || (kind != "conn" && kind != "end") {
		return message{}, fmt.Errorf("%q is not a message", b)
	}
	if num == "" || num[0] == '+' || (len(num) > 1 && num[0] == '0') {
		return message{}, fmt.Errorf("%q is not a message: its number is not in decimal form", b)
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return message{}, fmt.Errorf("%q is not a message: %w", b, err)
	}
	return message{kind: kind, n: n}, nil
}

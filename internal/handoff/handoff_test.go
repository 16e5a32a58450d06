//go:build linux

package handoff

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Every wait in these tests is for something that takes milliseconds; the
// bound is only there so that a broken hub fails instead of hanging.
const patience = 5 * time.Second

// openHub opens machine "m" in a hub under t.TempDir(); the hub closes
// when the test ends.
func openHub(t *testing.T) (*Hub, string) {
	t.Helper()
	h := NewHub(t.TempDir(), slog.New(slog.DiscardHandler))
	t.Cleanup(h.Close)
	if _, err := h.Open("m"); err != nil {
		t.Fatalf("Open: %v", err)
	}
	return h, "m"
}

// waitFor polls cond until it holds, failing the test after patience.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// isClosed reports whether ended is closed now.
func isClosed(ended <-chan struct{}) bool {
	select {
	case <-ended:
		return true
	default:
		return false
	}
}

// waitClosed fails the test unless ended closes within patience.
func waitClosed(t *testing.T, what string, ended <-chan struct{}) {
	t.Helper()
	select {
	case <-ended:
	case <-time.After(patience):
		t.Fatalf("%s: ended not closed within %v", what, patience)
	}
}

// tcpPair is a real TCP connection on loopback: the client's end, and the
// server's end as the file the gateway would hand over. The file is the
// only hold on the server's end, so once the caller closes it and the
// sandbox's side is done the client reads EOF.
func tcpPair(t *testing.T) (*net.TCPConn, *os.File) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	srv, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	f, err := srv.File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return client, f
}

// startReceiver runs berth-init's receiver against machine name's socket,
// serving each connection with a real shell that answers one line, reaped
// as berth-init reaps it. Run never returns: the goroutine outlives the
// test, retrying a socket that is gone, as berth-init would.
func startReceiver(t *testing.T, h *Hub, name string) *Receiver {
	t.Helper()
	recv := &Receiver{Path: filepath.Join(h.Dir(name), SocketName), Retry: 50 * time.Millisecond}
	recv.Serve = func(f *os.File) (int, error) {
		cmd := exec.Command("/bin/sh", "-c", `read l; echo "got $l"`)
		cmd.Stdin, cmd.Stdout = f, f
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		go func() {
			_ = cmd.Wait()
			recv.Exited(cmd.Process.Pid)
		}()
		return cmd.Process.Pid, nil
	}
	go recv.Run()
	return recv
}

// converse hands a fresh TCP connection to machine name's receiver (one
// started by startReceiver) and checks the shell in the sandbox answers
// on it, that the hub hears when it exited, and that nothing is left
// holding the client's connection afterwards.
func converse(t *testing.T, h *Hub, name, line string) {
	t.Helper()
	client, f := tcpPair(t)
	ended, err := h.Give(name, f)
	if err != nil {
		t.Fatalf("Give: %v", err)
	}
	_ = client.SetDeadline(time.Now().Add(patience))
	if _, err := io.WriteString(client, line+"\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(client)
	got, err := br.ReadString('\n')
	if want := "got " + line + "\n"; got != want || err != nil {
		t.Fatalf("the process in the sandbox answered %q, %v; want %q", got, err, want)
	}
	waitClosed(t, "the process exited", ended)
	// Give leaves f the caller's: once it is closed, the shell's exit was
	// the last hold on the socket, so the client sees the end.
	f.Close()
	if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
		t.Errorf("after the process exited the client read %q, %v; want EOF", rest, err)
	}
}

// TestReceiverServesAConnection: the whole way, with nothing faked: a TCP
// connection handed over a unix socket to a receiver that runs a process
// on it; the process talks to the client directly, and its exit reaches
// the hub as the connection's end.
func TestReceiverServesAConnection(t *testing.T) {
	h, name := openHub(t)
	startReceiver(t, h, name)
	waitFor(t, "the receiver connects", func() bool { return h.Ready(name) })
	converse(t, h, name, "hello")
	// The receiver stays connected and takes the next one.
	converse(t, h, name, "again")
}

// handMade is a receiver made by hand: it connects to the hub's socket as
// berth-init does, but the test says what it sends, as a sandbox that
// does not play by the rules could.
type handMade struct {
	*net.UnixConn
}

// connect makes a hand-made receiver of machine name.
func connect(t *testing.T, h *Hub, name string) *handMade {
	t.Helper()
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: filepath.Join(h.Dir(name), SocketName), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &handMade{c}
}

// take reads what the hub hands over: a "conn N" and its descriptor,
// which it closes (the test keeps the client's end).
func (p *handMade) take(t *testing.T) uint64 {
	t.Helper()
	buf := make([]byte, maxMessage+1)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	_ = p.SetReadDeadline(time.Now().Add(patience))
	n, oobn, _, _, err := p.ReadMsgUnix(buf, oob)
	if err != nil {
		t.Fatalf("the receiver read: %v", err)
	}
	files := rights(oob[:oobn])
	for _, f := range files {
		f.Close()
	}
	m, err := parse(buf[:n])
	if err != nil || m.kind != "conn" || len(files) != 1 {
		t.Fatalf("the hub sent %q (%v) with %d descriptors; want conn N and one", buf[:n], err, len(files))
	}
	return m.n
}

// send sends one message, with descriptors when fds are given.
func (p *handMade) send(t *testing.T, msg string, fds ...int) error {
	t.Helper()
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	_, _, err := p.WriteMsgUnix([]byte(msg), oob, nil)
	return err
}

// gone waits until the hub has dropped this receiver: its next read ends.
func (p *handMade) gone(t *testing.T) {
	t.Helper()
	_ = p.SetReadDeadline(time.Now().Add(patience))
	n, oobn, _, _, err := p.ReadMsgUnix(make([]byte, maxMessage+1), make([]byte, 64))
	if err == nil && (n > 0 || oobn > 0) {
		t.Fatalf("the hub sent a replaced receiver %d bytes", n)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the hub did not drop a replaced receiver within %v", patience)
	}
}

// give hands a fresh TCP connection to machine name and returns its
// ended channel.
func give(t *testing.T, h *Hub, name string) <-chan struct{} {
	t.Helper()
	_, f := tcpPair(t)
	ended, err := h.Give(name, f)
	if err != nil {
		t.Fatalf("Give: %v", err)
	}
	return ended
}

// TestGiveWithoutReceiver: with nobody in the sandbox to take it, Give
// says so and the caller copies bytes instead.
func TestGiveWithoutReceiver(t *testing.T) {
	// Each setup leaves machine "m" of a hub with nobody to take a
	// connection, and returns the name to give to.
	tests := []struct {
		name  string
		setup func(t *testing.T, h *Hub) string
	}{
		{"never opened", func(t *testing.T, h *Hub) string { return "n" }},
		{"nobody connected", func(t *testing.T, h *Hub) string { return "m" }},
		{"the receiver left", func(t *testing.T, h *Hub) string {
			p := connect(t, h, "m")
			waitFor(t, "the receiver connects", func() bool { return h.Ready("m") })
			p.Close()
			waitFor(t, "the hub sees it leave", func() bool { return !h.Ready("m") })
			return "m"
		}},
		{"the hub closed", func(t *testing.T, h *Hub) string {
			connect(t, h, "m")
			waitFor(t, "the receiver connects", func() bool { return h.Ready("m") })
			h.Close()
			return "m"
		}},
		{"removed", func(t *testing.T, h *Hub) string {
			connect(t, h, "m")
			waitFor(t, "the receiver connects", func() bool { return h.Ready("m") })
			if err := h.Remove("m"); err != nil {
				t.Fatal(err)
			}
			return "m"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := openHub(t)
			name := tt.setup(t, h)
			if h.Ready(name) {
				t.Error("Ready = true, want false")
			}
			_, f := tcpPair(t)
			ended, err := h.Give(name, f)
			if !errors.Is(err, ErrNoReceiver) || ended != nil {
				t.Errorf("Give = %v, %v; want no channel and ErrNoReceiver", ended, err)
			}
		})
	}
}

// TestReceiverGoneEndsItsConnections: when berth-init's connection goes
// away, so does every connection it was serving, as far as the gateway
// can tell: their ended channels close and the gateway stops watching.
func TestReceiverGoneEndsItsConnections(t *testing.T) {
	h, name := openHub(t)
	p := connect(t, h, name)
	waitFor(t, "the receiver connects", func() bool { return h.Ready(name) })
	e1, e2 := give(t, h, name), give(t, h, name)
	p.take(t)
	p.take(t)
	if isClosed(e1) || isClosed(e2) {
		t.Fatal("ended closed before the receiver said anything")
	}
	p.Close()
	waitClosed(t, "the first connection", e1)
	waitClosed(t, "the second connection", e2)
	waitFor(t, "Ready turns false", func() bool { return !h.Ready(name) })
}

// TestNewReceiverReplacesOld: berth-init started again connects anew;
// the hub takes the new connection and lets the old one go, with what
// was handed to it.
func TestNewReceiverReplacesOld(t *testing.T) {
	h, name := openHub(t)
	old := connect(t, h, name)
	waitFor(t, "the first receiver connects", func() bool { return h.Ready(name) })
	e1 := give(t, h, name)
	old.take(t)

	p := connect(t, h, name)
	old.gone(t)
	waitClosed(t, "the old receiver's connection", e1)
	if !h.Ready(name) {
		t.Fatal("Ready = false with the new receiver connected")
	}
	e2 := give(t, h, name)
	n := p.take(t)
	if isClosed(e2) {
		t.Fatal("the new receiver's connection ended by itself")
	}
	if err := p.send(t, "end "+strconv.FormatUint(n, 10)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "the new receiver said end", e2)
}

// TestEndOnlyEndsItsOwn: "end N" comes from the sandbox, so it is taken
// only for a connection handed to the very receiver that says it; every
// other message leaves the gateway watching.
func TestEndOnlyEndsItsOwn(t *testing.T) {
	h, name := openHub(t)
	old := connect(t, h, name)
	waitFor(t, "the first receiver connects", func() bool { return h.Ready(name) })
	give(t, h, name)
	n1 := old.take(t)

	p := connect(t, h, name)
	old.gone(t)
	e2, e3 := give(t, h, name), give(t, h, name)
	n2, n3 := p.take(t), p.take(t)
	if n1 == n2 || n2 == n3 || n1 == n3 {
		t.Fatalf("the hub numbered its connections %d, %d, %d; want each its own number", n1, n2, n3)
	}

	// The replaced receiver cannot be heard at all: the hub closed its
	// connection. Its attempt is made anyway.
	_ = old.send(t, "end "+strconv.FormatUint(n3, 10))
	num := func(n uint64) string { return strconv.FormatUint(n, 10) }
	for _, msg := range []string{
		"end " + num(n1),      // the replaced receiver's connection
		"end 0",               // never handed
		"end " + num(n3+1000), // never handed
		"end 18446744073709551615",
		"conn " + num(n3), // not the sandbox's to say
		"end 0" + num(n3), // not in decimal form
		"end " + num(n3) + " ",
		"end  " + num(n3),
		"END " + num(n3),
		"end " + num(n3) + strings.Repeat(" ", 100), // cut to maxMessage+1 and refused
		"end " + num(n3) + "\x00",
	} {
		if err := p.send(t, msg); err != nil {
			t.Fatalf("send %q: %v", msg, err)
		}
	}
	// Messages are read in order: once this one has ended e2, all of the
	// above were read too.
	if err := p.send(t, "end "+num(n2)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "end of the second connection", e2)
	if isClosed(e3) {
		t.Fatal("a message that was not \"end N\" of the third connection ended it")
	}
	if !h.Ready(name) {
		t.Fatal("the hub dropped a receiver for sending messages it ignores")
	}
	// The receiver is still heard after all that.
	if err := p.send(t, "end "+num(n3)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "end of the third connection", e3)
}

// holders counts the process's descriptors that refer to the same file
// as f, f's own included. It looks at that one file, not at the number of
// descriptors: other tests' receivers, which outlive them, open and close
// sockets meanwhile.
func holders(t *testing.T, f *os.File) int {
	t.Helper()
	want, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		fi, err := os.Stat(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && os.SameFile(fi, want) {
			n++
		}
	}
	return n
}

// TestSandboxCannotSendDescriptors: whatever descriptor a message from
// the sandbox carries is never installed in the gateway's process (the
// kernel drops it, since the hub gives no room for one), so a sandbox
// cannot make the gateway hold its files open, nor run it out of
// descriptors.
func TestSandboxCannotSendDescriptors(t *testing.T) {
	h, name := openHub(t)
	p := connect(t, h, name)
	waitFor(t, "the receiver connects", func() bool { return h.Ready(name) })
	ended := give(t, h, name)
	n := p.take(t)

	smuggled, err := os.Create(filepath.Join(t.TempDir(), "smuggled"))
	if err != nil {
		t.Fatal(err)
	}
	defer smuggled.Close()
	if got := holders(t, smuggled); got != 1 {
		t.Fatalf("before: %d descriptors of the file, want 1", got)
	}
	fd := int(smuggled.Fd())
	for _, msg := range []string{"hello", "conn 1", "end " + strconv.FormatUint(n+1, 10)} {
		if err := p.send(t, msg, fd, fd); err != nil {
			t.Fatalf("send %q: %v", msg, err)
		}
	}
	// The last one is a valid end: the hub takes it, descriptor or not,
	// and it is the sign that every message before it has been read.
	if err := p.send(t, "end "+strconv.FormatUint(n, 10), fd); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "end with a descriptor attached", ended)
	if got := holders(t, smuggled); got != 1 {
		t.Errorf("after the hub read them: %d descriptors of the file, want 1 (the test's own)", got)
	}
	if !h.Ready(name) {
		t.Error("the hub dropped the receiver")
	}
}

// TestReceiverThatDoesNotRead: what connects to the socket is the
// sandbox's, and may take connections without ever reading them. The
// gateway must not wait on it for long: Give returns (with ErrNoReceiver
// if it must), and Ready answers meanwhile, since the gateway asks it for
// every tunnel to the machine.
//
// Without the write deadline in give, the receiver's full socket buffer
// (some 280 unread connections) blocked Give for good, and Ready, Remove
// and Close with it.
func TestReceiverThatDoesNotRead(t *testing.T) {
	h, name := openHub(t)
	p := connect(t, h, name)
	waitFor(t, "the receiver connects", func() bool { return h.Ready(name) })
	_, f := tcpPair(t)

	gave := make(chan error)
	stop := make(chan struct{})
	go func() {
		defer close(gave)
		// The same socket each time: the kernel takes a reference per
		// message, which is all the test needs to fill the buffer.
		for range 20000 {
			_, err := h.Give(name, f)
			select {
			case gave <- err:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	// Closing the receiver's end unblocks a Give that waits, before f is
	// closed (which would wait for Give in turn).
	defer func() {
		p.Close()
		close(stop)
		for range gave {
		}
	}()

	n := 0
	for {
		select {
		case err, ok := <-gave:
			if !ok || err != nil {
				return // every Give returned: handed over, or refused
			}
			n++
		case <-time.After(2 * time.Second):
			ready := make(chan bool, 1)
			go func() { ready <- h.Ready(name) }()
			select {
			case <-ready:
			case <-time.After(time.Second):
				t.Error("Ready blocks while Give waits on the receiver")
			}
			t.Fatalf("Give blocked after %d connections handed to a receiver that reads none", n)
		}
	}
}

// TestReceiverServeFails: a server that cannot start ends its connection
// at once: the gateway hears it and the receiver holds nothing of it.
func TestReceiverServeFails(t *testing.T) {
	h, name := openHub(t)
	recv := &Receiver{
		Path:  filepath.Join(h.Dir(name), SocketName),
		Serve: func(*os.File) (int, error) { return 0, errors.New("no sshd here") },
		Retry: 50 * time.Millisecond,
	}
	go recv.Run()
	waitFor(t, "the receiver connects", func() bool { return h.Ready(name) })
	client, f := tcpPair(t)
	ended, err := h.Give(name, f)
	if err != nil {
		t.Fatalf("Give: %v", err)
	}
	waitClosed(t, "a server that did not start", ended)
	f.Close()
	_ = client.SetReadDeadline(time.Now().Add(patience))
	if rest, err := io.ReadAll(client); err != nil || len(rest) > 0 {
		t.Errorf("the client read %q, %v; want EOF", rest, err)
	}
	if !h.Ready(name) {
		t.Error("the receiver left after a server failed to start")
	}
}

// TestReceiverIgnoresOddMessages: berth-init serves only "conn N" with
// exactly one descriptor, and closes every descriptor of any other
// message instead of leaking it.
func TestReceiverIgnoresOddMessages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.sock")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan struct{}, 10)
	recv := &Receiver{
		Path: path,
		Serve: func(*os.File) (int, error) {
			served <- struct{}{}
			return 0, errors.New("not this time")
		},
		Retry: 50 * time.Millisecond,
	}
	go recv.Run()
	_ = ln.SetDeadline(time.Now().Add(patience))
	gw, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()

	handed, err := os.Create(filepath.Join(t.TempDir(), "handed"))
	if err != nil {
		t.Fatal(err)
	}
	defer handed.Close()
	fd := int(handed.Fd())
	for _, m := range []struct {
		msg string
		fds []int
	}{
		{"conn 1", nil},
		{"conn 2", []int{fd, fd}},
		{"end 3", []int{fd}},
		{"conn 04", []int{fd}},
		{"hello", []int{fd}},
		{"conn 5", []int{fd}}, // the one served
	} {
		var oob []byte
		if len(m.fds) > 0 {
			oob = syscall.UnixRights(m.fds...)
		}
		if _, _, err := gw.WriteMsgUnix([]byte(m.msg), oob, nil); err != nil {
			t.Fatalf("send %q: %v", m.msg, err)
		}
	}
	// A server that did not start is told as its end at once.
	buf := make([]byte, maxMessage+1)
	_ = gw.SetReadDeadline(time.Now().Add(patience))
	n, _, _, _, err := gw.ReadMsgUnix(buf, nil)
	if err != nil || string(buf[:n]) != "end 5" {
		t.Fatalf("the receiver said %q, %v; want %q", buf[:n], err, "end 5")
	}
	if got := len(served); got != 1 {
		t.Errorf("Serve ran %d times, want once", got)
	}
	waitFor(t, "the receiver closes every descriptor it was sent", func() bool { return holders(t, handed) == 1 })
}

// badNames are not a machine's name: each would put a machine's directory
// somewhere else than its own under the hub's.
// "/" is one: filepath.Base("/") is "/", which a check by Base alone let
// through (Remove("/") then removed every machine's socket).
var badNames = []string{"", ".", "..", "a/b", "../m", ".x", "/", "a/"}

// TestOpenRefusesNames: a machine's name becomes a path under the hub's
// directory, so only a plain name is one.
func TestOpenRefusesNames(t *testing.T) {
	for _, name := range badNames {
		t.Run(strconv.Quote(name), func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "hub")
			h := NewHub(dir, slog.New(slog.DiscardHandler))
			t.Cleanup(h.Close)
			if got, err := h.Open(name); err == nil {
				t.Errorf("Open(%q) = %q, nil; want an error", name, got)
			}
			// Nothing was made, in the hub's directory or beside it.
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Open(%q) made the hub's directory (%v)", name, err)
			}
			if entries, _ := os.ReadDir(parent); len(entries) > 0 {
				t.Errorf("Open(%q) made %v beside the hub's directory", name, entries)
			}
		})
	}
}

// TestRemoveRefusesNames: removing what is not a machine's name removes
// nothing, least of all the other machines' directories.
func TestRemoveRefusesNames(t *testing.T) {
	for _, name := range badNames {
		t.Run(strconv.Quote(name), func(t *testing.T) {
			h, m := openHub(t)
			_ = h.Remove(name) // an error or not: only what is left counts
			if _, err := os.Lstat(filepath.Join(h.Dir(m), SocketName)); err != nil {
				t.Errorf("Remove(%q) removed machine %s's socket: %v", name, m, err)
			}
		})
	}
}

// TestOpenModes: the machine's user is not the gateway's: it must be
// able to connect to the socket (write permission on it) and read the
// directory, but never add a file there. The modes hold whatever the
// gateway's umask and whatever mode the directory had before.
func TestOpenModes(t *testing.T) {
	h := NewHub(t.TempDir(), slog.New(slog.DiscardHandler))
	t.Cleanup(h.Close)
	// A directory someone left writable to all.
	if err := os.Mkdir(h.Dir("m"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(h.Dir("m"), 0o777); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o077)
	dir, err := h.Open("m")
	syscall.Umask(old)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if dir != h.Dir("m") {
		t.Errorf("Open = %q, want %q", dir, h.Dir("m"))
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode(); got != os.ModeDir|0o755 {
		t.Errorf("the directory's mode is %v, want %v", got, os.ModeDir|0o755)
	}
	si, err := os.Lstat(filepath.Join(dir, SocketName))
	if err != nil {
		t.Fatal(err)
	}
	if got := si.Mode(); got != os.ModeSocket|0o666 {
		t.Errorf("the socket's mode is %v, want %v", got, os.ModeSocket|0o666)
	}
	// Opening again is harmless: same directory, still listening.
	if again, err := h.Open("m"); err != nil || again != dir {
		t.Errorf("Open again = %q, %v; want %q, nil", again, err, dir)
	}
	connect(t, h, "m")
	waitFor(t, "a receiver connects after the second Open", func() bool { return h.Ready("m") })
}

// TestRemove: a machine that is gone takes its directory with it, and
// what was handed to it has ended.
func TestRemove(t *testing.T) {
	h, name := openHub(t)
	p := connect(t, h, name)
	waitFor(t, "the receiver connects", func() bool { return h.Ready(name) })
	ended := give(t, h, name)
	p.take(t)
	if err := h.Remove(name); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	waitClosed(t, "the removed machine's connection", ended)
	if _, err := os.Stat(h.Dir(name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory is still there after Remove (%v)", err)
	}
	if h.Ready(name) {
		t.Error("Ready = true after Remove")
	}
	if names, err := h.Names(); err != nil || len(names) != 0 {
		t.Errorf("Names = %q, %v; want none", names, err)
	}
	p.gone(t)
	// Removing what is not there is no error.
	if err := h.Remove(name); err != nil {
		t.Errorf("Remove again: %v", err)
	}
}

// TestReopen: a gateway that restarts finds its machines' directories,
// listens in them again, and the receivers still running in the
// sandboxes come back to it.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	h := NewHub(dir, slog.New(slog.DiscardHandler))
	for _, name := range []string{"a", "b"} {
		if _, err := h.Open(name); err != nil {
			t.Fatal(err)
		}
	}
	// Not a machine: Reopen passes it by.
	if err := os.WriteFile(filepath.Join(dir, "stray"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	startReceiver(t, h, "a")
	waitFor(t, "the receiver connects", func() bool { return h.Ready("a") })
	converse(t, h, "a", "before")

	// The gateway stops: the directories and sockets stay, listened on by
	// nobody.
	h.Close()
	if h.Ready("a") {
		t.Error("Ready = true after Close")
	}
	if _, err := os.Lstat(filepath.Join(dir, "a", SocketName)); err != nil {
		t.Fatalf("Close removed the socket: %v", err)
	}

	h2 := NewHub(dir, slog.New(slog.DiscardHandler))
	t.Cleanup(h2.Close)
	names, err := h2.Names()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, names); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	if err := h2.Reopen(); err != nil {
		t.Fatalf("Reopen: %v", err)
	}
	waitFor(t, "the receiver reconnects", func() bool { return h2.Ready("a") })
	converse(t, h2, "a", "after")
	if h2.Ready("b") {
		t.Error("machine b is Ready with no receiver")
	}
	if _, err := os.Lstat(filepath.Join(dir, "b", SocketName)); err != nil {
		t.Errorf("Reopen did not listen for machine b: %v", err)
	}
}

// TestReopenWithoutDir: a gateway's first start has no directory yet.
func TestReopenWithoutDir(t *testing.T) {
	h := NewHub(filepath.Join(t.TempDir(), "none"), slog.New(slog.DiscardHandler))
	defer h.Close()
	if err := h.Reopen(); err != nil {
		t.Errorf("Reopen = %v, want nil", err)
	}
	if names, err := h.Names(); err != nil || names != nil {
		t.Errorf("Names = %q, %v; want none", names, err)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want message // zero: the message is refused
	}{
		{"conn 1", message{"conn", 1}},
		{"end 1", message{"end", 1}},
		{"conn 0", message{"conn", 0}},
		{"end 18446744073709551615", message{"end", 1<<64 - 1}},

		{"", message{}},
		{"conn", message{}},
		{"conn ", message{}},
		{" conn 1", message{}},
		{"conn  1", message{}},
		{"conn 01", message{}},
		{"conn 00", message{}},
		{"conn +1", message{}},
		{"conn -1", message{}},
		{"conn -0", message{}},
		{"conn 1 ", message{}},
		{"conn 1\n", message{}},
		{"conn 1\x00", message{}},
		{"conn\t1", message{}},
		{"conn 0x1", message{}},
		{"conn 1_000", message{}},
		{"conn 1e3", message{}},
		{"conn １", message{}}, // a fullwidth digit
		{"end x", message{}},
		{"End 1", message{}},
		{"open 1", message{}},
		{"end 18446744073709551616", message{}},
		{"end 99999999999999999999", message{}},
		{"end " + strings.Repeat("1", maxMessage-3), message{}}, // 65 bytes
		{"end 1" + strings.Repeat(" ", maxMessage), message{}},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.in), func(t *testing.T) {
			got, err := parse([]byte(tt.in))
			if tt.want == (message{}) {
				if err == nil {
					t.Errorf("parse = %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(message{})); diff != "" {
				t.Errorf("parse (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParse: parse reads the sandbox's messages, so it must take any
// bytes without panicking, and what it accepts must be exactly the one
// way of writing that message: nothing smuggled in around it.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"conn 1", "end 18446744073709551615", "end 0", "conn 01", "end -1", "end 1 ", "", "end  1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parse(b)
		if err != nil {
			return
		}
		if m.kind != "conn" && m.kind != "end" {
			t.Fatalf("parse(%q) accepted kind %q", b, m.kind)
		}
		out := m.bytes()
		if len(out) > maxMessage {
			t.Fatalf("%+v is %d bytes written, more than %d", m, len(out), maxMessage)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("parse(%q) = %+v, which is written %q", b, m, out)
		}
		again, err := parse(out)
		if err != nil || again != m {
			t.Fatalf("parse(%q) = %+v, %v; want %+v", out, again, err, m)
		}
	})
}

// TestIdleOfAnotherProcess: a directory another process opened (berth
// image check, on the same data directory) is not idle while it is new,
// so a gateway's tidy does not take a machine being made for a stray; an
// old one is.
func TestIdleOfAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	theirs := NewHub(dir, log)
	t.Cleanup(theirs.Close)
	if _, err := theirs.Open("berth-imagecheck-abc"); err != nil {
		t.Fatal(err)
	}
	ours := NewHub(dir, log)
	t.Cleanup(ours.Close)
	if ours.Idle("berth-imagecheck-abc", time.Minute) {
		t.Error("a directory opened just now by another process is idle")
	}
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(ours.Dir("berth-imagecheck-abc"), old, old); err != nil {
		t.Fatal(err)
	}
	if !ours.Idle("berth-imagecheck-abc", time.Minute) {
		t.Error("a directory two minutes old, opened by no one here, is not idle")
	}
	if !ours.Idle("berth-never-opened", time.Minute) {
		t.Error("a machine with no directory is not idle")
	}
}

package handoff

import (
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// Receiver is berth-init's side: it stays connected to the gateway's
// socket and starts a server (`sshd -i`) for each connection handed to
// it. Whoever reaps the server's process (berth-init, PID 1) tells it
// with Exited, and the gateway hears that the connection ended.
type Receiver struct {
	// Path is the gateway's socket.
	Path string
	// Serve starts a process that serves the connected socket f and
	// returns its pid; f is closed after it returns.
	Serve func(f *os.File) (pid int, err error)
	// Logf says what went wrong; nil says nothing.
	Logf func(format string, args ...any)
	// Retry is the longest wait between two attempts to connect; 0 means
	// a second.
	Retry time.Duration

	mu   sync.Mutex
	live map[int]served // by pid
}

// served is a connection a process serves, and the gateway's connection
// it came through.
type served struct {
	via *net.UnixConn
	n   uint64
}

// Run connects to the gateway's socket, takes what it hands over until
// it goes away, and connects again, for as long as berth-init runs.
func (r *Receiver) Run() {
	wait := 50 * time.Millisecond
	most := r.Retry
	if most <= 0 {
		most = time.Second
	}
	for {
		c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: r.Path, Net: "unixpacket"})
		if err != nil {
			time.Sleep(wait)
			wait = min(wait*2, most)
			continue
		}
		wait = 50 * time.Millisecond
		r.take(c)
		c.Close()
	}
}

// take serves what the gateway hands over on c until c ends.
func (r *Receiver) take(c *net.UnixConn) {
	buf := make([]byte, maxMessage+1)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil || (n == 0 && oobn == 0) {
			return
		}
		files := rights(oob[:oobn])
		m, perr := parse(buf[:n])
		if perr != nil || m.kind != "conn" || len(files) != 1 {
			r.logf("handoff: a message from the gateway ignored (%d descriptors): %v", len(files), perr)
			for _, f := range files {
				f.Close()
			}
			continue
		}
		r.serve(c, m.n, files[0])
	}
}

// serve starts the server of connection n on f.
func (r *Receiver) serve(c *net.UnixConn, n uint64, f *os.File) {
	defer f.Close()
	// Held while the process starts: whoever reaps it waits here, so its
	// end is never told before it is known.
	r.mu.Lock()
	defer r.mu.Unlock()
	// The gateway's socket is non-blocking; a server started on it as on
	// inetd's expects an ordinary, blocking one.
	var pid int
	err := setBlocking(f)
	if err == nil {
		pid, err = r.Serve(f)
	}
	if err != nil {
		r.logf("handoff: serve a connection: %v", err)
		r.tell(c, n)
		return
	}
	if r.live == nil {
		r.live = map[int]served{}
	}
	r.live[pid] = served{via: c, n: n}
}

// Exited is told that process pid ended; when it served a connection,
// the gateway hears that the connection ended.
func (r *Receiver) Exited(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.live[pid]
	if !ok {
		return
	}
	delete(r.live, pid)
	r.tell(s.via, s.n)
}

// tell sends "end n" on c; a gateway that went away hears nothing.
func (r *Receiver) tell(c *net.UnixConn, n uint64) {
	_, _, _ = c.WriteMsgUnix(message{kind: "end", n: n}.bytes(), nil, nil)
}

func (r *Receiver) logf(format string, args ...any) {
	if r.Logf != nil {
		r.Logf(format, args...)
	}
}

// rights are the descriptors in control data oob, as files.
func rights(oob []byte) []*os.File {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			syscall.CloseOnExec(fd)
			files = append(files, os.NewFile(uintptr(fd), "handed connection"))
		}
	}
	return files
}

// setBlocking clears O_NONBLOCK on f's open file (the gateway's
// duplicate shares it, and only asks it for its counts).
func setBlocking(f *os.File) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := sc.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	return serr
}

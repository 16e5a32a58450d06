package handoff

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Hub is the gateway's side: one listening socket per machine, each in
// its own directory under dir, and the receiver connected to each.
type Hub struct {
	dir string
	log *slog.Logger

	mu    sync.Mutex
	rooms map[string]*room
}

// room is one machine's socket and what came through it.
type room struct {
	name   string
	ln     *net.UnixListener
	log    *slog.Logger
	opened time.Time // the last Open of it, under Hub.mu

	mu      sync.Mutex
	peer    *net.UnixConn // the receiver connected now; nil: none
	next    uint64
	waiting map[uint64]*given // connections handed to peer, not yet ended
	closed  bool
}

// given is one connection handed over, until its receiver says it ended
// or goes away.
type given struct {
	peer  *net.UnixConn
	ended chan struct{}
	once  sync.Once
}

func (g *given) end() { g.once.Do(func() { close(g.ended) }) }

// NewHub keeps its machines' directories under dir.
func NewHub(dir string, log *slog.Logger) *Hub {
	return &Hub{dir: dir, log: log, rooms: map[string]*room{}}
}

// Dir is machine name's handoff directory, which its container mounts
// read only at Mount.
func (h *Hub) Dir(name string) string { return filepath.Join(h.dir, name) }

// Open makes machine name's directory and listens in it, unless it
// listens already; it returns the directory.
func (h *Hub) Open(name string) (string, error) {
	if !validName(name) {
		return "", fmt.Errorf("handoff: %q is not a machine's name", name)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	dir := h.Dir(name)
	if r, ok := h.rooms[name]; ok {
		r.opened = time.Now()
		return dir, nil
	}
	// The directory is the gateway's alone to write: the machine's user
	// may read it and connect to the socket, nothing else.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("handoff: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", fmt.Errorf("handoff: %w", err)
	}
	path := filepath.Join(dir, SocketName)
	// A socket left by a gateway that stopped answers nobody.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("handoff: %w", err)
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return "", fmt.Errorf("handoff: listen for machine %s: %w", name, err)
	}
	ln.SetUnlinkOnClose(false)
	// Connecting needs write permission on the socket; the machine's user
	// is not the gateway's.
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return "", fmt.Errorf("handoff: %w", err)
	}
	r := &room{name: name, ln: ln, log: h.log.With("machine", name), opened: time.Now(), waiting: map[uint64]*given{}}
	h.rooms[name] = r
	go r.accept()
	return dir, nil
}

// validName says whether name can be a directory of its own under the
// hub's: one plain path element, not hidden.
func validName(name string) bool {
	return name != "" && !strings.ContainsRune(name, filepath.Separator) && name[0] != '.'
}

// giveTimeout bounds the sending of one connection: a receiver that does
// not read (anything in the sandbox may connect in berth-init's place)
// holds its machine's room that long at most, and is dropped.
const giveTimeout = time.Second

// Reopen listens again for every machine whose directory is under dir:
// what a gateway that restarted does before its machines' receivers come
// back.
func (h *Hub) Reopen() error {
	names, err := h.Names()
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		if _, err := h.Open(name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Names are the machines with a directory under dir.
func (h *Hub) Names() ([]string, error) {
	entries, err := os.ReadDir(h.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("handoff: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Remove stops listening for machine name, ends what was handed to it
// and removes its directory: the machine is gone.
func (h *Hub) Remove(name string) error {
	h.mu.Lock()
	r := h.rooms[name]
	delete(h.rooms, name)
	h.mu.Unlock()
	if r != nil {
		r.close()
	}
	if !validName(name) {
		return nil
	}
	if err := os.RemoveAll(h.Dir(name)); err != nil {
		return fmt.Errorf("handoff: %w", err)
	}
	return nil
}

// Close stops listening for every machine, leaving their directories for
// the next gateway.
func (h *Hub) Close() {
	h.mu.Lock()
	rooms := h.rooms
	h.rooms = map[string]*room{}
	h.mu.Unlock()
	for _, r := range rooms {
		r.close()
	}
}

// Idle reports whether machine name's directory has not been opened for
// age: a machine being made opens it just before its container exists,
// so only an idle one whose container is gone may be taken for a stray.
// A directory this hub did not open (another process's: berth image
// check's, on the same data directory) is idle once it is that old.
func (h *Hub) Idle(name string, age time.Duration) bool {
	h.mu.Lock()
	r, ok := h.rooms[name]
	var opened time.Time
	if ok {
		opened = r.opened
	}
	h.mu.Unlock()
	if ok {
		return time.Since(opened) >= age
	}
	fi, err := os.Stat(h.Dir(name))
	return err != nil || time.Since(fi.ModTime()) >= age
}

// Ready reports whether a receiver in machine name is connected now.
func (h *Hub) Ready(name string) bool {
	r := h.room(name)
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peer != nil
}

// Give hands f (a connected socket) to machine name's receiver. f stays
// the caller's: close it once ended is closed, which happens when the
// receiver says the connection ended or goes away. ErrNoReceiver: none is
// connected, or it went away as f was sent.
func (h *Hub) Give(name string, f *os.File) (ended <-chan struct{}, err error) {
	r := h.room(name)
	if r == nil {
		return nil, ErrNoReceiver
	}
	return r.give(f)
}

func (h *Hub) room(name string) *room {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rooms[name]
}

func (r *room) give(f *os.File) (<-chan struct{}, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.peer == nil {
		return nil, ErrNoReceiver
	}
	r.next++
	m := message{kind: "conn", n: r.next}
	g := &given{peer: r.peer, ended: make(chan struct{})}
	// Registered before it is sent: the receiver may answer "end" at once.
	r.waiting[m.n] = g
	sc, err := f.SyscallConn()
	if err != nil {
		delete(r.waiting, m.n)
		return nil, fmt.Errorf("handoff: %w", err)
	}
	var werr error
	_ = r.peer.SetWriteDeadline(time.Now().Add(giveTimeout))
	if err := sc.Control(func(fd uintptr) {
		_, _, werr = r.peer.WriteMsgUnix(m.bytes(), syscall.UnixRights(int(fd)), nil)
	}); err != nil {
		werr = err
	}
	if werr != nil {
		delete(r.waiting, m.n)
		r.log.Warn("a connection could not be handed to the sandbox", "err", werr)
		r.dropLocked(r.peer)
		return nil, ErrNoReceiver
	}
	return g.ended, nil
}

// accept takes each receiver that connects; a new one replaces the one
// before it (berth-init started again with its machine).
func (r *room) accept() {
	for {
		c, err := r.ln.AcceptUnix()
		if err != nil {
			return // closed
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			c.Close()
			return
		}
		if r.peer != nil {
			r.dropLocked(r.peer)
		}
		r.peer = c
		r.mu.Unlock()
		r.log.Debug("the sandbox's receiver connected")
		go r.read(c)
	}
}

// read takes the receiver's messages until it goes away. Only "end N" of
// a connection handed to this very receiver counts; anything else is
// ignored.
func (r *room) read(c *net.UnixConn) {
	buf := make([]byte, maxMessage+1)
	for {
		// No room for control data: a descriptor the sandbox sends is
		// closed by the kernel, never received.
		n, _, _, _, err := c.ReadMsgUnix(buf, nil)
		if err != nil || n == 0 {
			break
		}
		m, err := parse(buf[:n])
		if err != nil || m.kind != "end" {
			r.log.Debug("a message from the sandbox's receiver ignored", "err", err)
			continue
		}
		r.mu.Lock()
		if g, ok := r.waiting[m.n]; ok && g.peer == c {
			delete(r.waiting, m.n)
			g.end()
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	r.dropLocked(c)
	r.mu.Unlock()
}

// dropLocked forgets receiver c: every connection handed to it has ended
// as far as the gateway can tell.
func (r *room) dropLocked(c *net.UnixConn) {
	c.Close()
	if r.peer == c {
		r.peer = nil
	}
	for n, g := range r.waiting {
		if g.peer == c {
			delete(r.waiting, n)
			g.end()
		}
	}
}

func (r *room) close() {
	r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.peer != nil {
		r.dropLocked(r.peer)
	}
}
